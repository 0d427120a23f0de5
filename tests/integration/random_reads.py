#!/usr/bin/python3
"""Random offsets and sizes, from many threads at once, through the mount,
each compared with the same range of the backend file.

usage: random_reads.py BACKEND MOUNTED_RAW [--threads N] [--reads N] [--seed S]
"""
import argparse
import os
import random
import sys
import threading


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("backend")
    ap.add_argument("mounted")
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--reads", type=int, default=400, help="reads per thread")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    files = []
    for dirpath, _, names in os.walk(args.backend):
        for n in names:
            p = os.path.join(dirpath, n)
            files.append((os.path.relpath(p, args.backend), os.path.getsize(p)))
    files.sort()
    if not files:
        sys.exit("no files under " + args.backend)

    errors = []
    counts = [0] * args.threads

    def worker(t):
        rng = random.Random(args.seed * 1000 + t)
        for _ in range(args.reads):
            rel, size = rng.choice(files)
            off = rng.randrange(0, size + 2)
            length = rng.choice([1, 511, 4096, 65536, 131072, 1 << 20, rng.randrange(1, 3 << 20)])
            with open(os.path.join(args.backend, rel), "rb") as f:
                f.seek(off)
                want = f.read(length)
            # os.pread straight on the mount: exercises unaligned offsets and sizes.
            fd = os.open(os.path.join(args.mounted, rel), os.O_RDONLY)
            try:
                got = os.pread(fd, length, off)
            finally:
                os.close(fd)
            if got != want:
                errors.append(f"{rel} offset {off} length {length}: {len(got)} bytes differ from backend ({len(want)})")
                return
            counts[t] += 1

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(args.threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        print("\n".join(errors[:10]), file=sys.stderr)
        sys.exit(1)
    print(f"{sum(counts)} random reads on {args.threads} threads equal the backend")


if __name__ == "__main__":
    main()
