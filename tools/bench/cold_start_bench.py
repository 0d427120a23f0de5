#!/usr/bin/python3
"""Cold start at scale (issue 15): how long a tree of many small files takes to
become a DLFS mount, against Python's os.scandir walks of the same tree, in one
run. Every figure printed is measured in this run.

Measured, cold (`sync; echo 3 > /proc/sys/vm/drop_caches` before each), the
targets taking turns in a rotating order, --repeat times:
  stat walk   os.scandir walk collecting what DLFS collects of every entry
              (name, size, mtime, mode, inode: entry.stat(follow_symlinks=False))
  bare walk   os.scandir walk of names and d_type only (no stat)
  scan        dlfs-bench-scan: provenance::scan_tree alone (the directory walk)
  manifest    dlfs-bench-scan: Manifest::build (walk, sort, tables, samples)
  mount       from starting dlfsd until the dataset's top directory lists
              (<mnt>/ds/raw: the daemon has scanned, built and mounted)
  [mount old] the same with --against's dlfsd (another build), if given
For each dlfsd also "mount up": from its start until the mount answers (the
mountpoint is another device and <mnt>/.dlfs/stats exists). dlfsd mounts
before it scans since issue 15, so the two differ; an older dlfsd mounted
after its scan, and they are nearly equal.
Printed: medians of wall time and of CPU time (user + system, every thread;
steadier on a busy machine), and ratios against the stat walk. For information also the
daemon's own scan time (`scan_s` in .dlfs/stats) and the time until the load
is complete (.dlfs/stats, load.state "done"), unless --skip-load.

The tree (--files files of --size bytes spread evenly over --dirs leaf
directories, nested --depth levels deep) is generated once and cached under
--workdir.

usage: cold_start_bench.py [--build DIR] [--against OLD_BUILD] [--workdir DIR]
                           [--files 1000000] [--dirs 1000] [--depth 1] [--size 128]
                           [--repeat 3] [--skip-load] [--load-timeout 600]
                           [--threads 0] [--json FILE]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

from benchlib import cli, readers
from benchlib.daemons import Daemons, dlfsd_argv, loaded
from benchlib.proc import children_cpu, cpu_seconds
from benchlib.readers import drop_caches
from benchlib.report import log, medians, write_json
from benchlib.stats import mount_stats


# ---- the tree ----------------------------------------------------------------

def leaf_dirs(dirs, depth):
    """Relative paths of `dirs` leaf directories nested `depth` levels deep:
    depth 1: d0000 ...; depth 2: a00/d0000 ... (about dirs**(1/depth) per level)."""
    width = max(1, math.ceil(dirs ** (1.0 / depth)))
    out = []
    for i in range(dirs):
        parts, k = [], i
        for _ in range(depth - 1):
            k //= width
            parts.append(f"a{k % width:0{len(str(width))}d}")
        out.append("/".join(reversed(parts)) + ("/" if parts else "") + f"d{i:0{len(str(dirs))}d}")
    return out


def write_dirs(root, rels, per_dir, extra, size, first_index):
    """Writes the files of the leaf directories `rels` (os.open/os.write: no
    Python file objects); the first `extra` directories get one file more."""
    payload = bytes((i * 7 + 1) & 0xFF for i in range(size))
    width = len(str(per_dir + 1))
    for j, rel in enumerate(rels):
        d = os.path.join(root, rel)
        os.makedirs(d, exist_ok=True)
        n = per_dir + (1 if first_index + j < extra else 0)
        for f in range(n):
            fd = os.open(os.path.join(d, f"f{f:0{width}d}.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, payload)
            os.close(fd)


def ensure_tree(a):
    root = os.path.join(a.workdir, f"tree-{a.files}x{a.size}B-{a.dirs}d-{a.depth}l")
    marker = root + ".complete"
    if os.path.exists(marker):
        log(f"tree: {root} (cached)")
        return root
    subprocess.run(["rm", "-rf", root], check=True)
    os.makedirs(root)
    rels = leaf_dirs(a.dirs, a.depth)
    per_dir, extra = divmod(a.files, a.dirs)
    log(f"generating {a.files:,} files of {a.size} B in {a.dirs:,} directories (depth {a.depth}) under {root}")
    t0 = time.perf_counter()
    # Two writer processes (os.fork: no pickling, no pool): each takes every
    # other chunk of directories; the parent reports progress by chunks done.
    chunk = max(1, len(rels) // 50)
    chunks = [(i, rels[i:i + chunk]) for i in range(0, len(rels), chunk)]
    workers = max(1, min(2, os.cpu_count() or 1))
    rfd, wfd = os.pipe()
    pids = []
    for w in range(workers):
        pid = os.fork()
        if pid == 0:
            os.close(rfd)
            code = 0
            try:
                for first, part in chunks[w::workers]:
                    write_dirs(root, part, per_dir, extra, a.size, first)
                    os.write(wfd, b".")
            except BaseException as e:  # noqa: BLE001 - the child must not return into the parent's code
                sys.stderr.write(f"cold_start_bench.py: generating {root}: {e}\n")
                code = 1
            os._exit(code)
        pids.append(pid)
    os.close(wfd)
    done = 0
    while True:
        b = os.read(rfd, 64)
        if not b:
            break
        done += len(b)
        if done % max(1, len(chunks) // 10) == 0 or done == len(chunks):
            log(f"  {done}/{len(chunks)} chunks of directories written ({time.perf_counter() - t0:.0f} s)")
    os.close(rfd)
    failed = [pid for pid in pids if os.waitpid(pid, 0)[1] != 0]
    if failed:
        sys.exit(f"cold_start_bench.py: generating the tree under {root} failed (see above)")
    subprocess.run(["sync"], check=True)
    open(marker, "w").close()
    log(f"generated in {time.perf_counter() - t0:.1f} s")
    return root


# ---- the Python walks (run in a fresh interpreter each: --walk) ---------------

def walk_stat(root):
    """What DLFS collects of every entry: relative path, size, mtime, mode, inode."""
    out, stack = [], [""]
    while stack:
        rel = stack.pop()
        with os.scandir(os.path.join(root, rel) if rel else root) as it:
            for e in it:
                st = e.stat(follow_symlinks=False)
                p = f"{rel}/{e.name}" if rel else e.name
                out.append((p, st.st_size, st.st_mtime_ns, st.st_mode, st.st_ino))
                if e.is_dir(follow_symlinks=False):
                    stack.append(p)
    return len(out)


def walk_bare(root):
    """Names and d_type only (is_dir answers from d_type, no stat)."""
    out, stack = [], [""]
    while stack:
        rel = stack.pop()
        with os.scandir(os.path.join(root, rel) if rel else root) as it:
            for e in it:
                p = f"{rel}/{e.name}" if rel else e.name
                d = e.is_dir(follow_symlinks=False)
                out.append((p, d))
                if d:
                    stack.append(p)
    return len(out)


def timed_child(argv):
    """Runs argv; returns its stdout and the CPU seconds (user + system) it used."""
    before = children_cpu()
    r = subprocess.run(argv, check=True, capture_output=True, text=True)
    return r.stdout, children_cpu() - before


def python_walk(kind, root):
    out, cpu = timed_child([sys.executable, os.path.abspath(__file__), "--walk", kind, root])
    entries, seconds = out.split()
    return float(seconds), cpu


# ---- DLFS ----------------------------------------------------------------------

def bench_scan(binary, what, root, threads):
    out, cpu = timed_child([binary, "--what", what, "--threads", str(threads), root])
    return json.loads(out)["seconds"], cpu


def mount_up(mnt, parent_dev):
    """The mount answers: the root is DLFS's and its stats file exists."""
    try:
        return os.stat(mnt).st_dev != parent_dev and os.path.exists(os.path.join(mnt, ".dlfs", "stats"))
    except OSError:
        return False


def dataset_listed(mnt):
    """Lists the dataset's top directory (waits inside the kernel while a
    newer dlfsd scans); False if the mount failed meanwhile."""
    try:
        os.listdir(os.path.join(mnt, "ds", "raw"))
        return True
    except OSError:
        return False


def dlfs_mount(dlfsd, root, a, tag, wait_load):
    """Seconds from starting dlfsd until the mount is up and until the
    dataset lists, the daemon's CPU seconds until it lists, its own scan_s,
    and the seconds until the load is done (if wait_load)."""
    mnt = os.path.join(a.workdir, f"mnt-{tag}")
    os.makedirs(mnt, exist_ok=True)
    parent_dev = os.stat(os.path.dirname(mnt)).st_dev
    log_path = os.path.join(a.workdir, f"dlfsd-{tag}.log")
    name = f"dlfsd ({tag})"
    with Daemons() as daemons:  # stops the daemon and unmounts, also on errors
        proc = daemons.spawn(name, dlfsd_argv(dlfsd, mnt, root, os.path.join(a.workdir, f"{tag}.sock"), seed=1),
                             mnt, log_path)
        t0 = proc.started
        # Polled every 10 ms (the default 100 ms would be a tenth of a fast start).
        daemons.wait(proc, name, lambda: mount_up(mnt, parent_dev), log_path, a.load_timeout, poll=0.01)
        mounted = time.perf_counter() - t0
        daemons.wait(proc, name, lambda: dataset_listed(mnt), log_path, a.load_timeout - mounted, poll=0.01)
        listed = time.perf_counter() - t0
        cpu = cpu_seconds(proc.pid)
        scan_s = mount_stats(mnt)["datasets"][0].get("scan_s")
        done = None
        if wait_load:
            deadline = time.time() + a.load_timeout
            while time.time() < deadline and not loaded(mnt):
                time.sleep(0.05)
            if loaded(mnt):
                done = time.perf_counter() - t0
            else:
                log(f"dlfsd ({tag}): load not done after {a.load_timeout} s")
        return mounted, listed, cpu, scan_s, done


# ---- the run --------------------------------------------------------------------

def main():
    p = cli.parser(__doc__, workdir="/tmp/dlfs-bench-full", repeat=3, json="write every run's figures here")
    p.add_argument("--against", help="another build directory: its dlfsd's mount time too (e.g. main's)")
    p.add_argument("--files", type=int, default=1_000_000)
    p.add_argument("--dirs", type=int, default=1000, help="leaf directories the files are spread over")
    p.add_argument("--depth", type=int, default=1, help="levels the leaf directories are nested (1: below the root)")
    p.add_argument("--size", type=int, default=128, help="bytes per file")
    p.add_argument("--threads", type=int, default=0, help="dlfs-bench-scan's scan threads (0: DLFS's default)")
    p.add_argument("--skip-load", action="store_true", help="do not wait for the load to finish")
    p.add_argument("--load-timeout", type=float, default=600)
    p.add_argument("--settle", type=float, default=1.0, help="seconds to wait after drop_caches")
    p.add_argument("--walk", nargs=2, metavar=("KIND", "ROOT"), help=argparse.SUPPRESS)
    a = p.parse_args()

    if a.walk:  # a child: one timed walk, printed as "entries seconds"
        kind, root = a.walk
        t0 = time.perf_counter()
        n = {"stat": walk_stat, "bare": walk_bare}[kind](root)
        print(n, time.perf_counter() - t0)
        return

    for name, v in (("--files", a.files), ("--dirs", a.dirs), ("--depth", a.depth), ("--repeat", a.repeat)):
        if v < 1:
            sys.exit(f"cold_start_bench.py: {name} must be at least 1 (got {v})")
    if a.size < 0:
        sys.exit(f"cold_start_bench.py: --size must not be negative (got {a.size})")
    cli.require_root(p, "FUSE mounts, drop_caches")
    dlfsd = cli.built(p, a.build, "fs/dlfsd")
    scanner = cli.built(p, a.build, "tools/bench/dlfs-bench-scan")
    old = cli.built(p, a.against, "fs/dlfsd") if a.against else None
    readers.set_settle(a.settle)
    os.makedirs(a.workdir, exist_ok=True)
    root = ensure_tree(a)

    targets = {
        "stat walk": lambda: python_walk("stat", root),
        "bare walk": lambda: python_walk("bare", root),
        "scan": lambda: bench_scan(scanner, "scan", root, a.threads),
        "manifest": lambda: bench_scan(scanner, "manifest", root, a.threads),
    }
    loads = {}
    daemon_scan = {}
    mount_ups = {}

    def mount_target(binary, tag):
        def run():
            mounted, listed, cpu, scan_s, loaded = dlfs_mount(binary, root, a, tag, not a.skip_load)
            mount_ups.setdefault(tag, []).append(mounted)
            daemon_scan.setdefault(tag, []).append(scan_s)
            if loaded is not None:
                loads.setdefault(tag, []).append(loaded)
            return listed, cpu
        return run

    targets["mount"] = mount_target(dlfsd, "new")
    if old:
        targets["mount old"] = mount_target(old, "old")

    runs = {k: [] for k in targets}
    cpus = {k: [] for k in targets}
    names = list(targets)
    for r in range(a.repeat):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            drop_caches()
            s, cpu = targets[name]()
            runs[name].append(s)
            cpus[name].append(cpu)
            log(f"run {r + 1}/{a.repeat} {name}: {s:.2f} s, {cpu:.2f} s CPU")

    med, med_cpu = medians(runs), medians(cpus)
    base, base_cpu = med["stat walk"], med_cpu["stat walk"]
    print(f"\nCold start, {a.files:,} files of {a.size} B in {a.dirs:,} directories (depth {a.depth}), "
          f"medians of {a.repeat} cold runs (CPU: user + system, every thread):")
    print(f"{'target':<12} {'median s':>9} {'/ stat walk':>12} {'CPU s':>7} {'/ stat walk':>12}   runs (s)")
    for k in names:
        print(f"{k:<12} {med[k]:>9.2f} {med[k] / base:>11.2f}x {med_cpu[k]:>7.2f} {med_cpu[k] / base_cpu:>11.2f}x   " +
              " ".join(f"{s:.2f}" for s in runs[k]))
    for tag, name in (("new", "mount"), ("old", "mount old")):
        if tag in mount_ups:
            print(f"dlfsd ({tag}): mount up median {statistics.median(mount_ups[tag]):.2f} s (" +
                  " ".join(f"{s:.2f}" for s in mount_ups[tag]) + f"), dataset listed median {med[name]:.2f} s")
    for tag, v in daemon_scan.items():
        v = [x for x in v if x is not None]
        if v:
            print(f"dlfsd ({tag}) scan_s in its stats: median {statistics.median(v):.2f} s")
    for tag, v in loads.items():
        print(f"dlfsd ({tag}) start to load done: median {statistics.median(v):.1f} s (" +
              " ".join(f"{s:.1f}" for s in v) + ")")
    if a.json:
        write_json(a.json, {"args": {k: v for k, v in vars(a).items() if k != "walk"}, "runs": runs, "cpu_s": cpus,
                            "medians": med, "daemon_scan_s": daemon_scan, "load_s": loads, "mount_up_s": mount_ups},
                   indent=2)


if __name__ == "__main__":
    main()
