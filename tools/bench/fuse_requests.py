#!/usr/bin/python3
"""FUSE requests per sample read: how many round trips to the daemon (lookup,
getattr, open, flush, release, read, ...) a reader's sample costs, for raw/
and for epoch views, in a first (cold) and a second (warm) epoch.

Counts come from the daemon's own request counters ("fuse" in `dlfs-ctl
stats --json`, read over the control socket so that reading them costs no
FUSE request), taken before and after each phase; every figure printed is
a difference measured in this run, divided by the samples read.

  raw, epoch 1   drop_caches, then every file of raw/ in a shuffled order,
                 `with open(p, "rb") as f: f.read()` (a map-style Dataset's
                 __getitem__)
  raw, epoch 2   the same files again, another order, no drop_caches
  raw, epoch 3,  the same with dlfs.read_file(p) (os.open/os.read: no isatty()
   read_file     ioctl, which Python's open() makes before 3.14 and the kernel
                 forwards to a FUSE daemon every time)
  view tar       the Python client streaming rank 0 of W=1 (dlfs.TarView:
                 the .index, then the .tar), epoch 1 and a new epoch 2
  view bin       `.bin` of rank 0 of W=1 read with 1 MiB reads, epoch 1 and
                 a new epoch 2 (the dataset is mounted as format fixed with
                 one record per file: same samples, same raw/, and a .bin)

usage: fuse_requests.py [--build DIR] [--workdir DIR] [--count 2000] [--sizes 3K,110K] [--json FILE]
"""
import os
import sys

from benchlib import cli
from benchlib.client import dlfs
from benchlib.daemons import Daemons
from benchlib.datasets import ensure_dataset
from benchlib.readers import drop_caches, files_under, read_shuffled
from benchlib.report import log, write_json
from benchlib.stats import ctl_stats, fuse_requests, per_sample

SHOWN = ("lookup", "getattr", "open", "flush", "release", "ioctl", "read", "forget")


def fuse_counts(ctl, sock):
    counts = fuse_requests(ctl_stats(ctl, sock))
    if counts is None:
        sys.exit("fuse_requests.py: this dlfsd has no FUSE request counters in its stats (\"fuse\")")
    return counts


def read_tar_view(ds, epoch):
    return sum(1 for _ in dlfs.TarView(ds, epoch, 0, 1, zero_copy=False).samples())


def read_bin_view(ds, epoch, record):
    path = os.path.join(ds, f"epochs/{epoch}/1/0.bin")
    with open(path, "rb", buffering=0) as f:
        while f.read(1 << 20):
            pass
    return os.path.getsize(path) // record


def measure(a, daemons, dlfsd, ctl, size):
    data = os.path.join(a.workdir, f"req-{a.count}x{size}")
    ensure_dataset(data, a.count, size, 10)
    tag = f"req-{size}"
    # Format fixed with one record per file: the same samples as "files" (and
    # the same raw/), plus the .bin view of fixed-size samples.
    mnt, sock, _ = daemons.serve(dlfsd, a.workdir, tag, data, ["--format", "fixed", "--record-size", str(size)])
    ds = os.path.join(mnt, "ds")
    raw = os.path.join(ds, "raw")
    names = files_under(data)
    phases = [("raw, epoch 1", True, lambda: read_shuffled(raw, names, 1)[0]),
              ("raw, epoch 2", False, lambda: read_shuffled(raw, names, 2)[0]),
              ("raw, epoch 3, read_file", False, lambda: read_shuffled(raw, names, 3, dlfs.read_file)[0]),
              ("view tar, epoch 1", True, lambda: read_tar_view(ds, 1)),
              ("view tar, epoch 2", False, lambda: read_tar_view(ds, 2)),
              ("view bin, epoch 1", True, lambda: read_bin_view(ds, 11, size)),
              ("view bin, epoch 2", False, lambda: read_bin_view(ds, 12, size))]
    rows = {}
    for name, cold, run in phases:
        if cold:
            drop_caches()
        before = fuse_counts(ctl, sock)
        samples = run()
        after = fuse_counts(ctl, sock)
        rows[name] = {"samples": samples, **per_sample(before, after, samples)}
        log(f"{size} B {name}: " + ", ".join(f"{k} {rows[name][k]:.3f}" for k in SHOWN))
    daemons.stop_all()
    return rows


def report(res):
    for size, rows in res.items():
        print(f"\nFUSE requests per sample, {size} B samples:")
        print(f"  {'':<26}" + "".join(f"{k:>9}" for k in SHOWN))
        for name, r in rows.items():
            print(f"  {name:<26}" + "".join(f"{r.get(k, 0):>9.3f}" for k in SHOWN))


def main():
    ap = cli.parser(__doc__, workdir="/tmp/dlfs-bench-full", json="write all results here")
    ap.add_argument("--count", type=int, default=2000, help="samples per dataset")
    ap.add_argument("--sizes", default="3K,110K", help="sample sizes, comma-separated")
    a = ap.parse_args()
    cli.require_root(ap, "FUSE mounts, drop_caches")
    dlfsd, ctl = cli.built(ap, a.build, "fs/dlfsd"), cli.built(ap, a.build, "tools/ctl/dlfs-ctl")
    os.makedirs(a.workdir, exist_ok=True)
    res = {}
    with Daemons() as daemons:
        for s in a.sizes.split(","):
            res[cli.size_arg(s)] = measure(a, daemons, dlfsd, ctl, cli.size_arg(s))
    report(res)
    if a.json:
        write_json(a.json, res)


if __name__ == "__main__":
    main()
