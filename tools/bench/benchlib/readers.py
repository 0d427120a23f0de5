"""The read loops the benchmarks time, the cold start they share (drop_caches),
and fio. What is timed is the caller's business: a loop returns what it read
and, where the loop itself is the measurement, its seconds."""
import json
import os
import random
import subprocess
import sys
import time

MiB = 1 << 20
SETTLE_S = 2.0  # seconds to wait after dropping caches (quick runs take less: set_settle)


def human(n):
    """A byte count as its name in dataset paths: 3K, 110K, 1M (exact units only)."""
    for unit, v in (("M", MiB), ("K", 1024)):
        if n % v == 0:
            return f"{n // v}{unit}"
    return str(n)


def set_settle(seconds):
    global SETTLE_S
    SETTLE_S = seconds


def drop_caches(settle=None):
    """Cold: the page cache, dentries and inodes of every filesystem dropped
    (the backend's and the FUSE mounts'; a daemon's own memory stays)."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    # Freeing gigabytes of page cache leaves the kernel busy for a moment
    # (measured here: whichever target ran right after the backend's cache
    # was dropped used twice the CPU); let it settle before measuring.
    time.sleep(SETTLE_S if settle is None else settle)


def files_under(root):
    """Every file under `root`, as sorted paths relative to it."""
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def read_whole(path):
    """A file's bytes the way user code reads them: Python's open(), one read."""
    with open(path, "rb") as f:
        return f.read()


def read_shuffled(root, names, seed, whole_file=read_whole):
    """Reads every file of `names` under `root` whole, in an order shuffled with
    `seed`; returns how many and the seconds of the reads (not of the shuffle)."""
    order = list(names)
    random.Random(seed).shuffle(order)
    t0 = time.perf_counter()
    for n in order:
        whole_file(os.path.join(root, n))
    return len(order), time.perf_counter() - t0


def read_files(root, names):
    """os.open/os.read/close of each file in the given order; returns seconds."""
    t0 = time.perf_counter()
    for name in names:
        fd = os.open(os.path.join(root, name), os.O_RDONLY)
        while os.read(fd, MiB):
            pass
        os.close(fd)
    return time.perf_counter() - t0


def read_stream(path, bs=MiB, give_back=False):
    """Reads a file sequentially; returns (bytes, seconds).

    give_back: then drop the kernel's cached copy (untimed). On a VM, page
    cache growing into untouched guest memory costs more than the read, and
    repeated warm runs slow down without it."""
    fd = os.open(path, os.O_RDONLY)
    t0 = time.perf_counter()
    n = 0
    try:
        while True:
            b = os.read(fd, bs)
            if not b:
                break
            n += len(b)
        dt = time.perf_counter() - t0
        if give_back:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return n, dt


def read_index(path):
    """The rows of an epoch view's .index (tab-separated), its header line skipped."""
    with open(path) as f:
        f.readline()
        return [line.rstrip("\n").split("\t") for line in f]


def fio(options, out_json):
    """Runs fio with `options` (global ones, then --name=... and each job's) and
    returns its JSON report; exits with fio's error output if it fails."""
    p = subprocess.run(["fio", "--output-format=json", f"--output={out_json}", *options],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"fio failed ({p.returncode}): {p.stderr[-2000:]}")
    with open(out_json) as f:
        text = f.read()
    return json.loads(text[text.index("{"):])  # fio may print notes ("opendir added ...") before the JSON
