"""CPU time and memory of a process, and of the machine, from /proc: what a
benchmark reports next to its throughput to tell a slow daemon from a slow
device or a busy machine; and the peak memory of a process tree and of the
page cache while a loader runs (PeakMemory)."""
import os
import resource
import threading
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """user + system seconds of a process, all its threads (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def thread_cpu_seconds(pid):
    """CPU time of a process's live threads so far, in seconds, at nanosecond
    resolution (schedstat; /proc/PID/stat counts 10 ms ticks, too coarse for
    one epoch of small samples)."""
    total = 0
    task_dir = f"/proc/{pid}/task"
    for tid in os.listdir(task_dir):
        try:
            with open(f"{task_dir}/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # the thread ended meanwhile
    return total / 1e9


def children_cpu():
    """user + system seconds of every child process waited for so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def huge_page_bytes(pid):
    """Bytes of the process's anonymous memory in transparent huge pages
    (/proc/<pid>/smaps_rollup), or None where the kernel does not say."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("AnonHugePages:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def vmstat(*keys):
    """The named counters of /proc/vmstat."""
    got = {}
    with open("/proc/vmstat") as f:
        for line in f:
            k, v = line.split()
            if k in keys:
                got[k] = int(v)
    return got


def machine_cpu():
    """(busy, idle, iowait) jiffies of the whole machine so far (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4], v[3], v[4]


def cpu_share(before, after):
    """'busy N%, iowait M%' of the machine's CPU time between two machine_cpu() readings:
    whether a phase was bound by the CPUs or waited on the device."""
    d = [b - a for a, b in zip(before, after)]
    total = max(1, sum(d))
    return f"machine busy {100 * d[0] / total:.0f}%, iowait {100 * d[2] / total:.0f}%"


class DeviceWatch:
    """Samples the machine's block-device reads (vmstat pgpgin, KiB) and free
    memory every 0.25 s while a phase runs: what the device delivered per
    second, to tell a slow device from a slow daemon."""

    def __init__(self):
        self.samples = []
        self.stop_ev = threading.Event()
        self.th = threading.Thread(target=self._run, daemon=True)
        self.th.start()

    def _sample(self):
        v = vmstat("pgpgin", "nr_free_pages")
        self.samples.append((time.perf_counter(), v.get("pgpgin", 0), v.get("nr_free_pages", 0)))

    def _run(self):
        while True:
            self._sample()
            if self.stop_ev.wait(0.25):
                return

    def stop(self):
        self.stop_ev.set()
        self.th.join()
        self._sample()

    def per_second(self):
        """Device GB/s in each whole second (the last one partial), and free
        GiB at each second's start."""
        rates, free = [], []
        if len(self.samples) < 2:
            return rates, free
        t0 = self.samples[0][0]
        start = self.samples[0]
        for i, (t, kib, pages) in enumerate(self.samples[1:], 1):
            if t - t0 >= len(rates) + 1 or i == len(self.samples) - 1:
                rates.append((kib - start[1]) * 1024 / max(t - start[0], 1e-6) / 1e9)
                free.append(start[2] * 4096 / (1 << 30))
                start = (t, kib, pages)
        return rates, free


PAGE = os.sysconf("SC_PAGE_SIZE")


def meminfo(*keys):
    """The named lines of /proc/meminfo in bytes (Cached, Shmem, MemAvailable, ...)."""
    got = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, rest = line.split(":", 1)
            if k in keys:
                got[k] = int(rest.split()[0]) * 1024
    return got


def rss_bytes(pid):
    """A process's resident set in bytes (/proc/<pid>/statm), 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def descendants(root):
    """`root` and every process below it (parents from /proc/<pid>/stat)."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    tree, grew = {root}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in tree and p not in tree}
        tree |= more
        grew = bool(more)
    return tree


class PeakMemory:
    """Samples, every `interval` s until stop(), the summed resident set of a
    process tree (a loader and its workers), the resident set of other
    processes (a dlfsd) and the page cache (Cached in /proc/meminfo): their
    peaks, and Cached at start and stop."""

    def __init__(self, tree_root, others=(), interval=0.2):
        self.root, self.others, self.interval = tree_root, list(others), interval
        self.tree_peak = self.others_peak = 0
        self.cached_start = meminfo("Cached")["Cached"]
        self.cached_peak = self.cached_start
        self.cached_end = None
        self.stop_ev = threading.Event()
        self.th = threading.Thread(target=self._run, daemon=True)
        self.th.start()

    def _sample(self):
        self.tree_peak = max(self.tree_peak, sum(rss_bytes(p) for p in descendants(self.root)))
        self.others_peak = max(self.others_peak, sum(rss_bytes(p) for p in self.others))
        self.cached_peak = max(self.cached_peak, meminfo("Cached")["Cached"])

    def _run(self):
        while True:
            self._sample()
            if self.stop_ev.wait(self.interval):
                return

    def stop(self):
        self.stop_ev.set()
        self.th.join()
        self._sample()
        self.cached_end = meminfo("Cached")["Cached"]
        return self
