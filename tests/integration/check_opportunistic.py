#!/usr/bin/env python3
"""Checks the opportunistic-order tar streams of every rank of one (epoch,
world size) of a fixed-record dataset: the .tar carries the xattr
user.dlfs.order = opportunistic; each member has the backend record's bytes;
every member is served fewer than WINDOW positions from its planned position
(the .index); every planned sample of the rank comes exactly once; re-reads
(pread at a few offsets) of the open stream return the same bytes. With
read-ahead off, at least one sample must have been served out of plan order.

Used by 14_opportunistic.sh:

  check_opportunistic.py VIEW_DIR BACKEND WINDOW on|off [--world-size 2]
                         [--record-size 3073] [--header-bytes 16]

VIEW_DIR is MNT/DATASET/epochs/E/W; rank r's stream is VIEW_DIR/r.tar.
"""
import argparse
import os
import tarfile

from checklib import add_fixed_backend_args, fail


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base", help="MNT/DATASET/epochs/E/W")
    ap.add_argument("backend", help="the fixed-record backend directory")
    ap.add_argument("window", type=int, help="the daemon's --opportunistic-window")
    ap.add_argument("readahead", choices=("on", "off"), help="whether the daemon's read-ahead is on")
    add_fixed_backend_args(ap)
    args = ap.parse_args()
    base, backend, window, readahead = args.base, args.backend, args.window, args.readahead
    rec_size, header = args.record_size, args.header_bytes

    moved = 0
    rows = []
    for rank in range(args.world_size):
        view = f"{base}/{rank}"
        order = os.getxattr(view + ".tar", "user.dlfs.order")
        if order != b"opportunistic":
            fail(f"rank {rank}: user.dlfs.order is {order!r}")
        rows = [l.rstrip("\n").split("\t") for l in open(view + ".index") if not l.startswith("#")]
        planned = {r[4]: int(r[0]) for r in rows}
        fd = os.open(view + ".tar", os.O_RDONLY)
        with tarfile.open(fileobj=os.fdopen(os.dup(fd), "rb"), mode="r|") as t:
            names = []
            for j, m in enumerate(t):
                path, rec = m.name.rsplit("/", 1)
                with open(f"{backend}/{path}", "rb") as f:
                    f.seek(header + int(rec[:8]) * rec_size)
                    if t.extractfile(m).read() != f.read(rec_size):
                        fail(f"rank {rank}: member {m.name} differs")
                if m.name not in planned:
                    fail(f"rank {rank}: member {m.name} is not in the rank's plan")
                k = planned[m.name]
                if not abs(j - k) < window:
                    fail(f"rank {rank}: planned {k} served at {j}, window {window}")
                moved += j != k
                names.append(m.name)
        if sorted(names) != sorted(planned):
            fail(f"rank {rank}: not every planned sample exactly once")
        size = os.fstat(fd).st_size
        for off in (0, size // 3, size - 5000):
            if os.pread(fd, 4096, off) != os.pread(fd, 4096, off):
                fail(f"rank {rank}: a re-read of the stream at offset {off} differs")
        os.close(fd)
    if readahead == "off" and not moved > 0:
        fail("no sample was served ahead of its plan position although half are resident")
    print(f"ok (read-ahead {readahead}): {len(rows)} samples per rank, {moved} served out of plan order")


if __name__ == "__main__":
    main()
