#!/usr/bin/env python3
"""Per-open cost of the requests Python's open() makes, over any tree.

Reads every file of TREE once (to warm caches), then times one of:
  openclose  os.open + os.close               (no request on a cached DLFS raw/ file)
  ioctl      os.open + TCGETS ioctl + close   (what open()'s isatty() costs: one FUSE round trip)
  pyopen     with open(p, "rb") as f: f.read()  (the usual user code)
  readfile   os.open, fstat, one os.read of size+1, close (dlfs.read_file: no ioctl)
from --procs processes (files split between them), and prints ops/s and
microseconds per op. Compare a DLFS raw/ tree with the backend directory, or
one dlfsd run with --fuse-uring on against one with off (docs/benchmark-notes.md,
"FUSE over io_uring").

  tools/bench/fuse_roundtrip_bench.py /mnt/dlfs/ds/raw ioctl --procs 2
"""
import argparse
import fcntl
import multiprocessing as mp
import os
import termios
import time

from benchlib.readers import files_under, read_whole


def run(args):
    mode, paths = args
    t = time.perf_counter()
    for p in paths:
        if mode == "openclose":
            os.close(os.open(p, os.O_RDONLY))
        elif mode == "ioctl":
            fd = os.open(p, os.O_RDONLY)
            try:
                fcntl.ioctl(fd, termios.TCGETS, bytes(64))
            except OSError:
                pass  # ENOTTY: the answer every regular file gives
            os.close(fd)
        elif mode == "readfile":
            fd = os.open(p, os.O_RDONLY)
            try:
                os.read(fd, os.fstat(fd).st_size + 1)
            finally:
                os.close(fd)
        else:
            with open(p, "rb") as f:
                f.read()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tree")
    ap.add_argument("mode", choices=["openclose", "ioctl", "pyopen", "readfile"])
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3, help="timed passes; the median is printed")
    a = ap.parse_args()
    files = [os.path.join(a.tree, n) for n in files_under(a.tree)]
    if not files:
        raise SystemExit(f"{a.tree}: no files")
    for p in files:
        read_whole(p)
    rates = []
    for _ in range(a.repeat):
        parts = [(a.mode, files[i::a.procs]) for i in range(a.procs)]
        if a.procs == 1:
            dt = run(parts[0])
        else:
            with mp.Pool(a.procs) as pool:
                t = time.perf_counter()
                pool.map(run, parts)
                dt = time.perf_counter() - t
        rates.append(len(files) / dt)
    rates.sort()
    med = rates[len(rates) // 2]
    print(f"{a.tree} {a.mode} procs={a.procs}: {med:,.0f} opens/s (median of {a.repeat}), "
          f"{a.procs / med * 1e6:.1f} us per open per process")


if __name__ == "__main__":
    main()
