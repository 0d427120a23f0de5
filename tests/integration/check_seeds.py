#!/usr/bin/env python3
"""One job's views of its own seed (53_seeds.sh):

  check_seeds.py DATASET_DIR OUT --epochs 0,1 --world-size W [--seed S] [--zero-copy]

reads every rank's view of each epoch with dlfs.TarView (seeds/<S>/ with
--seed; through the mount, or dlfsd's client socket with --zero-copy) and
writes one line per sample in view order: "<epoch> <rank> <key> <sha256 of
its bytes>". Run for two seeds at once against one dlfsd, and without
--seed against dlfsd's started with those seeds: the files must be equal."""
import argparse
import hashlib
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import dlfs  # noqa: E402
from checklib import fail  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset_dir")
    ap.add_argument("out")
    ap.add_argument("--epochs", default="0")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--zero-copy", action="store_true")
    a = ap.parse_args()
    lines = []
    for e in map(int, a.epochs.split(",")):
        for r in range(a.world_size):
            v = dlfs.TarView(a.dataset_dir, e, r, a.world_size, seed=a.seed, zero_copy=bool(a.zero_copy))
            if a.zero_copy and v.client_socket is None:
                fail(f"{v.path}: --zero-copy, but TarView reads the mount")
            if a.seed is not None and v.index.meta.get("seed") != str(a.seed):
                fail(f"{v.index.path}: header seed={v.index.meta.get('seed')}, want {a.seed}")
            n = 0
            for key, group in v.samples():
                data = b"".join(group[x] for x in sorted(group))
                lines.append(f"{e} {r} {key} {hashlib.sha256(data).hexdigest()}\n")
                n += 1
            if n != len(v):
                fail(f"{v.path}: read {n} samples, the view holds {len(v)}")
    with open(a.out, "w", encoding="utf-8") as f:
        f.writelines(lines)
    print(f"{a.dataset_dir}{'' if a.seed is None else f' seed {a.seed}'}: {len(lines)} samples read")


if __name__ == "__main__":
    main()
