#!/usr/bin/python3
"""Reads while the dataset loads, and resident serving under page-cache pressure
(issue 15, item 4). Every figure printed is measured in this run.

A dataset of 256 KiB files is read the way a training job reads it: every
file once, in a shuffled order, whole-file reads (open, one read into a reused
buffer, close), by several reader threads at once (--readers, default 4; the
GIL is released while a read runs). Four phases per repetition:

  a  backend  the backend directory, cold (drop_caches first)
  b  loading  DLFS raw/, cold backend, started as soon as the mount is up,
              while the loader runs: a per-second timeline and when the load
              completed
  c  resident DLFS raw/ with every extent resident, after drop_caches
  d  pressure the same after --filler bytes of unrelated files (generated once
              under --workdir) were read with cat, filling the page cache

Medians over --repeat, in GB/s, with the ratios b/a (target >= 1) and d/c
(target >= 0.8), and the daemon's CPU seconds (user+system, /proc/<pid>/stat)
for each phase. Several --build directories (e.g. the tree before and after a
change) run in the same repetitions, alternating which goes first. On this
project's VMs the build that runs right after phase a has read 20-40% faster
during the load than the one after it, whichever build it was (the same
build twice shows it), so an A/B run also prints the loading medians by
position; compare builds only over an even number of repetitions.

--loading-only runs phases a and b only (the load; minutes shorter).

--backend nfs serves the dataset over NFS on loopback (tools/bench/nfs_backend.py:
the kernel's nfsd and client where the kernel has them, else nfs-ganesha and the
build's libnfs FUSE client), torn down afterwards: phase a reads the NFS mount, and
dlfsd's backend is the NFS mount, as on a cluster whose dataset lives on NFS.
--latency-ms adds a round-trip delay to every NFS RPC (tc netem).

usage: load_bench.py [--build DIR]... [--workdir DIR] [--size 4G] [--file-size 256K]
                     [--readers 4] [--repeat 3] [--filler 4G] [--loading-only] [--quick] [--perf DIR]
                     [--backend local|nfs] [--nfs-vers 4.2] [--latency-ms 0] [--json FILE]
"""
import os
import random
import statistics
import subprocess
import sys
import threading
import time

from benchlib import SRC, backends, cli
from benchlib.daemons import Daemons
from benchlib.datasets import ensure_dataset, ensure_filler
from benchlib.proc import DeviceWatch, cpu_seconds, cpu_share, huge_page_bytes, machine_cpu
from benchlib.readers import drop_caches, files_under, set_settle
from benchlib.report import log, write_json
from benchlib.stats import mount_stats
from benchlib.teardown import Teardown

PHASES = ("backend", "loading", "resident", "pressure")
LOADING_PHASES = PHASES[:2]


def churn_memory(nbytes):
    """A child process fills `nbytes` of fresh anonymous memory (huge pages
    advised) and exits: the memory state a daemon finds right after another
    daemon with a stripe that size has exited (--churn-memory)."""
    code = ("import mmap,sys\n"
            "n=int(sys.argv[1]); m=mmap.mmap(-1,n)\n"
            "m.madvise(mmap.MADV_HUGEPAGE) if hasattr(mmap,'MADV_HUGEPAGE') else None\n"
            "c=b'\\1'*(64<<20)\n"
            "for o in range(0,n,len(c)): m[o:o+min(len(c),n-o)]=c[:min(len(c),n-o)]\n")
    subprocess.run([sys.executable, "-c", code, str(nbytes)], check=True)


def read_all(root, names, readers, file_size):
    """Reads every file of `names` under `root` with `readers` threads, each
    taking the next name of the shared (shuffled) list. Returns (bytes,
    seconds, [(seconds since start, bytes)] per file)."""
    lock = threading.Lock()
    it = iter(names)
    done = []  # (t, bytes), appended under the lock
    errors = []
    t0 = time.perf_counter()

    def worker():
        buf = bytearray(file_size + 4096)  # one read gets the whole file; +4096 sees EOF
        while True:
            with lock:
                name = next(it, None)
            if name is None:
                return
            try:
                fd = os.open(os.path.join(root, name), os.O_RDONLY)
                try:
                    n = total = os.readv(fd, [buf])
                    while n:  # a file larger than --file-size: read it all
                        n = os.readv(fd, [buf])
                        total += n
                finally:
                    os.close(fd)
            except OSError as e:
                errors.append(f"{name}: {e}")
                return
            with lock:
                done.append((time.perf_counter() - t0, total))

    threads = [threading.Thread(target=worker) for _ in range(readers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.perf_counter() - t0
    if errors:
        sys.exit(f"read of {root} failed: {errors[0]}")
    return sum(b for _, b in done), secs, done


def timeline(done, secs):
    """GB/s in each whole second of the run (the last, partial second scaled)."""
    buckets = [0] * (int(secs) + 1)
    for t, b in done:
        buckets[min(int(t), len(buckets) - 1)] += b
    out = [b / 1e9 for b in buckets]
    if secs % 1 > 0.05:
        out[-1] /= secs % 1
    return out


class Perf:
    """perf record -g of the daemon during one phase (--perf)."""

    def __init__(self, outdir, pid, tag):
        self.p = None
        if outdir:
            os.makedirs(outdir, exist_ok=True)
            out = os.path.join(outdir, f"{tag}.data")
            self.p = subprocess.Popen(["perf", "record", "-g", "-q", "-o", out, "-p", str(pid)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.3)  # perf attaches to every thread

    def stop(self):
        if self.p:
            self.p.send_signal(2)
            self.p.wait(60)


def mount_up(mnt):
    return os.path.isdir(os.path.join(mnt, "ds/raw"))


def load_watch(mnt, t0, stop):
    """Polls stats every 0.1 s; returns a dict that gets 'done_s' (seconds
    after t0 when the load was seen done)."""
    got = {}

    def run():
        while not stop.is_set():
            try:
                s = mount_stats(mnt)["datasets"][0]["load"]
                if s["state"] == "done":
                    got["done_s"] = time.perf_counter() - t0
                    got["load"] = s
                    return
            except (OSError, ValueError, KeyError, IndexError):
                pass
            time.sleep(0.1)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return got, th


def load_done_line(log_path):
    """The daemon's own "load done" line (rate, failed extents, and how many
    extents it loaded yielding to readers that missed), or None."""
    try:
        with open(log_path, errors="replace") as f:
            lines = [ln for ln in f if "load done:" in ln]
    except OSError:
        return None
    return lines[-1].split("load done:", 1)[1].strip() if lines else None


def one_build(a, daemons, label, dlfsd, env, extra_args, data, names, filler, perf_dir, rep):
    """Phases b, c, d with one daemon build; returns {phase: (GB/s, cpu s)} and the loading timeline."""
    w = a.workdir
    if a.churn_memory:
        churn_memory(a.size)
    drop_caches()  # the backend cold for the loader and the readers
    time.sleep(a.pause)
    # env: this build's extra environment (--build DIR::VAR=VALUE)
    mnt, _, p = daemons.serve(dlfsd, w, label, data, [*a.dlfsd_arg, *extra_args], prefix="load", seed=None,
                              ready=mount_up, env=env)
    out = {}
    raw = os.path.join(mnt, "ds/raw")

    perf = Perf(perf_dir, p.pid, f"{label}-rep{rep}-loading")
    cpu0 = cpu_seconds(p.pid)
    t0 = time.perf_counter()
    stop = threading.Event()
    watch, th = load_watch(mnt, t0, stop)
    m0 = machine_cpu()
    device = DeviceWatch()
    nbytes, secs, done = read_all(raw, names, a.readers, a.file_size)
    device.stop()
    machine = cpu_share(m0, machine_cpu())
    out["loading"] = (nbytes / secs / 1e9, cpu_seconds(p.pid) - cpu0)
    perf.stop()
    tl = timeline(done, secs)
    th.join(600)
    stop.set()
    load_done = watch.get("done_s")
    line = " ".join(f"{x:.2f}" for x in tl)
    done_text = f"load done at {load_done:.1f}s" if load_done is not None else "load not seen done"
    log(f"{label} rep {rep} loading: {out['loading'][0]:.3f} GB/s over {secs:.1f}s, daemon cpu "
        f"{out['loading'][1]:.2f}s, {machine}; {done_text}")
    log(f"{label} rep {rep} loading timeline (GB/s per second): {line}")
    dev, free = device.per_second()
    log(f"{label} rep {rep} device reads (GB/s per second, vmstat pgpgin): " + " ".join(f"{x:.2f}" for x in dev)
        + "; free memory (GiB): " + " ".join(f"{x:.1f}" for x in free))
    daemon_line = load_done_line(os.path.join(w, f"dlfsd-load-{label}.log"))
    if daemon_line:
        log(f"{label} rep {rep} daemon: {daemon_line}")
    huge = huge_page_bytes(p.pid)  # how much of the stripe the kernel gave huge pages
    if huge is not None:
        log(f"{label} rep {rep} daemon memory in huge pages after the load: {huge / (1 << 30):.2f} GiB")

    for phase in () if a.loading_only else ("resident", "pressure"):
        drop_caches()
        if phase == "pressure":
            subprocess.run(["cat", *filler], check=True, stdout=subprocess.DEVNULL)
        perf = Perf(perf_dir, p.pid, f"{label}-rep{rep}-{phase}")
        cpu0 = cpu_seconds(p.pid)
        nbytes, secs, _ = read_all(raw, names, a.readers, a.file_size)
        out[phase] = (nbytes / secs / 1e9, cpu_seconds(p.pid) - cpu0)
        perf.stop()
        log(f"{label} rep {rep} {phase}: {out[phase][0]:.3f} GB/s, daemon cpu {out[phase][1]:.2f}s")
    daemons.stop_all()
    return out, {"timeline_gbps": tl, "load_done_s": load_done, "seconds": secs}


def main():
    ap = cli.parser(__doc__, workdir="/tmp/dlfs-load-bench", repeat=3, build=None, json="write the results here too",
                    quick="smoke run: 64 MiB dataset and filler, one repetition")
    ap.add_argument("--build", action="append",
                    help="meson build directory (repeatable: each is measured in the same repetitions; "
                         "default: this tree's build); DIR::VAR=VALUE[,...] runs its daemon with that "
                         "environment too, DIR::--flag[,...] with those dlfsd flags too (the same build "
                         "under two settings); items of both kinds may be mixed")
    ap.add_argument("--size", type=cli.size_arg, default=4 << 30, help="dataset bytes (default 4G)")
    ap.add_argument("--file-size", type=cli.size_arg, default=256 << 10, help="bytes per file (default 256K)")
    ap.add_argument("--readers", type=int, default=4, help="reader threads (default 4)")
    ap.add_argument("--filler", type=cli.size_arg, default=4 << 30,
                    help="bytes of unrelated files read before phase d (default 4G)")
    ap.add_argument("--seed", type=int, default=1, help="shuffle seed (each repetition adds its index)")
    ap.add_argument("--dlfsd-arg", action="append", default=[], help="extra dlfsd argument (repeatable)")
    ap.add_argument("--perf", help="directory for perf record -g of the daemon in each phase")
    ap.add_argument("--loading-only", action="store_true", help="phases a and b only (backend, loading)")
    ap.add_argument("--churn-memory", action="store_true",
                    help="before phase a and each daemon, a child fills and frees as much anonymous memory as "
                         "the dataset, so that every phase starts from the state a daemon leaves behind")
    ap.add_argument("--pause", type=float, default=0.0,
                    help="seconds to wait before each daemon starts, after dropping the caches (default 0)")
    ap.add_argument("--backend", choices=["local", "nfs"], default="local",
                    help="where the dataset lives: the local directory (default) or an NFS mount of it over "
                         "loopback, made and torn down here (tools/bench/nfs_backend.py)")
    ap.add_argument("--nfs-vers", default="4.2", choices=["4.2", "4.1", "4", "3"],
                    help="NFS version of the kernel client (--backend nfs; the ganesha mode speaks 4.0)")
    ap.add_argument("--latency-ms", type=float, default=0.0,
                    help="added NFS round-trip latency in ms, tc netem in a network namespace (--backend nfs)")
    a = ap.parse_args()
    if a.latency_ms < 0 or (a.latency_ms > 0 and a.backend != "nfs"):
        sys.exit("load_bench.py: --latency-ms takes a value >= 0 and applies to --backend nfs only")
    if a.quick:
        a.size, a.filler, a.repeat = 64 << 20, 64 << 20, 1
        set_settle(0.2)
    cli.require_root(ap, "FUSE mounts, drop_caches")
    if a.readers < 1 or a.repeat < 1 or a.file_size < 1 or a.size < a.file_size:
        sys.exit("load_bench.py: --readers and --repeat must be >= 1, and --size >= --file-size")
    builds = a.build or [os.path.join(SRC, "build")]
    labels = []
    envs, flags = {}, {}
    for i, b in enumerate(builds):
        b, _, extra = b.partition("::")
        builds[i] = b
        items = [kv for kv in extra.split(",") if kv]
        flags[f"b{i}"] = [kv for kv in items if kv.startswith("--")]
        env_items = [kv for kv in items if not kv.startswith("--")]
        if any("=" not in kv or kv.startswith("=") for kv in env_items):
            sys.exit(f"load_bench.py: --build {b}::{extra}: expected VAR=VALUE or --flag items, comma-separated")
        envs[f"b{i}"] = dict(kv.split("=", 1) for kv in env_items)
        cli.built(ap, b, "fs/dlfsd")
        labels.append(f"b{len(labels)}")
    os.makedirs(a.workdir, exist_ok=True)
    nfiles = a.size // a.file_size
    data = os.path.join(a.workdir, f"data-{nfiles}x{a.file_size}")
    log(f"dataset: {nfiles} files of {a.file_size} bytes under {data}; {a.readers} reader threads")
    ensure_dataset(data, nfiles, a.file_size, 16)
    filler = [] if a.loading_only else ensure_filler(a.workdir, a.filler)
    phases = LOADING_PHASES if a.loading_only else PHASES
    files = files_under(data)
    if a.backend == "nfs":
        reason = backends.unavailable_reason("nfs", builds[0], a.latency_ms)
        if reason:
            print(f"load_bench.py: NFS backend unavailable: {reason}", file=sys.stderr)
            sys.exit(77)

    runs = {"backend": []}
    for lb in labels:
        for ph in phases[1:]:
            runs[f"{lb}:{ph}"] = []
    timelines = {lb: [] for lb in labels}
    positions = {lb: [] for lb in labels}  # 0: right after phase a, 1: after another build's daemon
    nfs = None
    with Teardown() as td:  # the daemons stop before the NFS mount they read goes, even on SIGTERM
        root = data  # what phase a reads and dlfsd's --backend
        if a.backend == "nfs":
            nfs = td.enter_context(backends.mount("nfs", data, os.path.join(a.workdir, "mnt-nfs"), builds[0],
                                                  a.nfs_vers, a.latency_ms))
            root = nfs.mountpoint
            log(f"backend: NFS mount {root} ({nfs.options})")
        daemons = td.enter_context(Daemons())
        for rep in range(a.repeat):
            names = files[:]
            random.Random(a.seed + rep).shuffle(names)
            if a.churn_memory:
                churn_memory(a.size)
            drop_caches()
            m0 = machine_cpu()
            nbytes, secs, _ = read_all(root, names, a.readers, a.file_size)
            runs["backend"].append((nbytes / secs / 1e9, 0.0))
            log(f"rep {rep} backend: {runs['backend'][-1][0]:.3f} GB/s over {secs:.1f}s, "
                f"{cpu_share(m0, machine_cpu())}")
            order = list(zip(labels, builds))
            if rep % 2:
                order.reverse()
            for pos, (lb, b) in enumerate(order):
                positions[lb].append(pos)
                got, tl = one_build(a, daemons, lb, os.path.join(b, "fs/dlfsd"), envs[lb], flags[lb], root, names,
                                    filler, a.perf, rep)
                for ph, v in got.items():
                    runs[f"{lb}:{ph}"].append(v)
                timelines[lb].append(tl)

    med = {k: statistics.median(x for x, _ in v) for k, v in runs.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
    print()
    where = "local directory" if a.backend == "local" else f"NFS ({nfs.options})"
    print(f"{nfiles} files of {a.file_size >> 10} KiB, {a.readers} readers, shuffled, medians of {a.repeat}; "
          f"backend: {where}")
    print(f"{'build':<40} {'phase':<9} {'GB/s':>6} {'cpu s':>6}")
    print(f"{'(backend, read directly)':<40} {'backend':<9} {med['backend']:6.3f}")
    result = {"config": vars(a), "builds": dict(zip(labels, builds)), "envs": envs, "flags": flags, "runs": runs, "median_gbps": med,
              "median_cpu_s": cpu, "timelines": timelines, "ratios": {}}
    for lb, b in zip(labels, builds):
        for ph in phases[1:]:
            extra = [f"{k}={v}" for k, v in envs[lb].items()] + flags[lb]
            name = (b + "::" + ",".join(extra)) if extra else b
            print(f"{name[-40:]:<40} {ph:<9} {med[f'{lb}:{ph}']:6.3f} {cpu[f'{lb}:{ph}']:6.2f}")
        r = {"loading_over_backend": med[f"{lb}:loading"] / med["backend"]}
        if not a.loading_only:
            r["pressure_over_resident"] = med[f"{lb}:pressure"] / med[f"{lb}:resident"]
        result["ratios"][lb] = r
        done = [t["load_done_s"] for t in timelines[lb] if t["load_done_s"] is not None]
        done_text = f"load done after {statistics.median(done):.1f}s (median)" if done else "load not seen done"
        pressure = ("" if a.loading_only else
                    f", pressure/resident {r['pressure_over_resident']:.2f} (target >= 0.8)")
        print(f"{'':<40} loading/backend {r['loading_over_backend']:.2f} (target >= 1){pressure}; {done_text}")
    if len(labels) > 1:
        # Which build ran first in a repetition has mattered more than the
        # build here (docs/benchmark-notes.md, session 26): say so for each run.
        by_pos = {0: [], 1: []}
        for lb in labels:
            for pos, (gbps, _) in zip(positions[lb], runs[f"{lb}:loading"]):
                by_pos[min(pos, 1)].append(gbps)
        if by_pos[0] and by_pos[1]:
            print(f"loading by position, all builds: right after phase a {statistics.median(by_pos[0]):.3f} GB/s "
                  f"({len(by_pos[0])} runs), after another daemon {statistics.median(by_pos[1]):.3f} "
                  f"({len(by_pos[1])} runs)")
        result["positions"] = positions
    if a.json:
        write_json(a.json, result, indent=2)
        print(f"results: {a.json}")


if __name__ == "__main__":
    main()
