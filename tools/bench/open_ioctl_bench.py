#!/usr/bin/python3
"""What Python's open() costs per file on a FUSE mount: one process reads every
file of a dataset whole, in a shuffled order, from the backend directory and
from a dlfsd's raw/ tree over it, with two readers:

  open     `with open(p, "rb") as f: f.read()`: before Python 3.14 open() calls
           isatty() (an ioctl, TCGETS) at every open, and the kernel forwards
           every ioctl on a FUSE file to the daemon: one round trip per file
  read_file  dlfs.read_file(p): os.open, fstat, os.read, close; no ioctl

Each (tree, reader) is read cold (drop_caches first; dlfsd's memory stays) and
then warm (at once again, another order). Repetitions alternate the order of the
cells; printed: files/s medians, ratios against the backend read with open()
in the same phase (per repetition, then medianed), and the daemon's FUSE
requests per file (from `dlfs-ctl stats`) for the raw/ cells.

usage: open_ioctl_bench.py [--build DIR] [--workdir DIR] [--count 15000] [--size 110K] [--repeat 3]
"""
import os
import statistics

from benchlib import cli
from benchlib.client import dlfs
from benchlib.daemons import Daemons
from benchlib.datasets import ensure_dataset
from benchlib.readers import drop_caches, files_under, read_shuffled, read_whole
from benchlib.report import log, paired_ratio, write_json
from benchlib.stats import ctl_stats, spent_between

READERS = {"open": read_whole, "read_file": dlfs.read_file}


def fuse_requests(ctl, sock):
    return ctl_stats(ctl, sock)["fuse"]["requests"]


def read_all(root, names, reader, seed):
    n, secs = read_shuffled(root, names, seed, READERS[reader])
    return n / secs


def main():
    ap = cli.parser(__doc__, workdir="/tmp/dlfs-bench-full", repeat=3, json="write every cell here")
    ap.add_argument("--count", type=int, default=15000, help="files in the dataset")
    ap.add_argument("--size", type=cli.size_arg, default=110 << 10, help="bytes per file (default 110K)")
    a = ap.parse_args()
    cli.require_root(ap, "a FUSE mount, drop_caches")
    if a.count < 1 or a.repeat < 1:
        ap.error("--count and --repeat must be at least 1")
    dlfsd, ctl = cli.built(ap, a.build, "fs/dlfsd"), cli.built(ap, a.build, "tools/ctl/dlfs-ctl")
    os.makedirs(a.workdir, exist_ok=True)
    data = os.path.join(a.workdir, f"ioctl-{a.count}x{a.size}")
    ensure_dataset(data, a.count, a.size, 100)
    names = files_under(data)
    cells = [(tree, reader) for tree in ("backend", "raw") for reader in READERS]
    rates = {(t, r, p): [] for t, r in cells for p in ("cold", "warm")}
    requests = {}
    with Daemons() as daemons:
        mnt, sock, _ = daemons.serve(dlfsd, a.workdir, "ioctl", data)
        roots = {"backend": data, "raw": os.path.join(mnt, "ds/raw")}
        for rep in range(a.repeat):
            for tree, reader in (cells if rep % 2 == 0 else cells[::-1]):
                drop_caches()
                for phase, seed in (("cold", 2 * rep), ("warm", 2 * rep + 1)):
                    before = fuse_requests(ctl, sock) if tree == "raw" else None
                    rate = read_all(roots[tree], names, reader, seed)
                    rates[(tree, reader, phase)].append(rate)
                    if before is not None:
                        after = fuse_requests(ctl, sock)
                        requests[(reader, phase)] = {k: v / len(names) for k, v in spent_between(before, after).items()}
                    log(f"rep {rep} {tree} {reader} {phase}: {rate:,.0f} files/s")
    print(f"\n{len(names)} files of {a.size} B, one reader process; files/s: median of {a.repeat}; "
          "ratio: per repetition against the backend with open(), then medianed")
    print(f"{'tree':<9}{'reader':<11}{'phase':<6}{'files/s':>10}{'ratio':>8}  FUSE requests per file")
    out = []
    for tree, reader in cells:
        for phase in ("cold", "warm"):
            got, ref = rates[(tree, reader, phase)], rates[("backend", "open", phase)]
            ratio = paired_ratio(got, ref)
            req = requests.get((reader, phase)) if tree == "raw" else None
            shown = " ".join(f"{k} {v:.2f}" for k, v in sorted(req.items()) if v >= 0.005) if req else ""
            print(f"{tree:<9}{reader:<11}{phase:<6}{statistics.median(got):>10,.0f}{ratio:>7.2f}x  {shown}")
            out.append({"tree": tree, "reader": reader, "phase": phase, "files_s": got, "ratio": ratio,
                        "fuse_per_file": req})
    if a.json:
        write_json(a.json, out)


if __name__ == "__main__":
    main()
