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
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_bench import Daemons, SRC, drop_caches, ensure_dataset, log, size_arg  # noqa: E402
from views_bench import start_dlfs  # noqa: E402

sys.path.insert(0, os.path.join(SRC, "python"))
import dlfs  # noqa: E402


def read_open(path):
    with open(path, "rb") as f:
        return f.read()


READERS = {"open": read_open, "read_file": dlfs.read_file}


def fuse_requests(ctl, sock):
    out = subprocess.run([ctl, "--socket", sock, "--json", "stats"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["fuse"]["requests"]


def read_all(root, names, reader, seed):
    order = list(names)
    random.Random(seed).shuffle(order)
    read = READERS[reader]
    t0 = time.perf_counter()
    for n in order:
        read(os.path.join(root, n))
    return len(order) / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--workdir", default="/tmp/dlfs-bench-full")
    ap.add_argument("--count", type=int, default=15000, help="files in the dataset")
    ap.add_argument("--size", type=size_arg, default=110 << 10, help="bytes per file (default 110K)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="write every cell here")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("open_ioctl_bench.py: needs root (a FUSE mount, drop_caches)")
    if a.count < 1 or a.repeat < 1:
        ap.error("--count and --repeat must be at least 1")
    dlfsd, ctl = os.path.join(a.build, "fs/dlfsd"), os.path.join(a.build, "tools/ctl/dlfs-ctl")
    if not os.access(dlfsd, os.X_OK):
        ap.error(f"--build {a.build}: no fs/dlfsd there (build it first)")
    os.makedirs(a.workdir, exist_ok=True)
    data = os.path.join(a.workdir, f"ioctl-{a.count}x{a.size}")
    ensure_dataset(data, a.count, a.size, 100)
    names = sorted(os.path.relpath(os.path.join(d, f), data) for d, _, fs in os.walk(data) for f in fs)
    daemons = Daemons()
    cells = [(tree, reader) for tree in ("backend", "raw") for reader in READERS]
    rates = {(t, r, p): [] for t, r in cells for p in ("cold", "warm")}
    requests = {}
    try:
        mnt = start_dlfs(daemons, dlfsd, a.workdir, "ioctl", data)
        sock = os.path.join(a.workdir, "views-ioctl.sock")
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
                        requests[(reader, phase)] = {k: (after[k] - before[k]) / len(names)
                                                     for k in after if after[k] != before[k]}
                    log(f"rep {rep} {tree} {reader} {phase}: {rate:,.0f} files/s")
    finally:
        daemons.stop_all()
    print(f"\n{len(names)} files of {a.size} B, one reader process; files/s: median of {a.repeat}; "
          "ratio: per repetition against the backend with open(), then medianed")
    print(f"{'tree':<9}{'reader':<11}{'phase':<6}{'files/s':>10}{'ratio':>8}  FUSE requests per file")
    out = []
    for tree, reader in cells:
        for phase in ("cold", "warm"):
            got, ref = rates[(tree, reader, phase)], rates[("backend", "open", phase)]
            ratio = statistics.median(x / y for x, y in zip(got, ref))
            req = requests.get((reader, phase)) if tree == "raw" else None
            shown = " ".join(f"{k} {v:.2f}" for k, v in sorted(req.items()) if v >= 0.005) if req else ""
            print(f"{tree:<9}{reader:<11}{phase:<6}{statistics.median(got):>10,.0f}{ratio:>7.2f}x  {shown}")
            out.append({"tree": tree, "reader": reader, "phase": phase, "files_s": got, "ratio": ratio,
                        "fuse_per_file": req})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
