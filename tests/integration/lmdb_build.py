#!/usr/bin/env python3
"""Builds and changes LMDB databases with python3-lmdb for the LMDB scenarios.

Used by 15_lmdb_ctl.sh and 16_lmdb_views.sh:

  lmdb_build.py make DIR N ORDER SIZES EVERY
      N records with "%08d" keys, put in `sorted` (MDB_APPEND) or `shuffled`
      order, values of `mixed` sizes (in-leaf and overflow of 1-17 pages) or
      of one size (a number), random bytes seeded by N, a commit every EVERY
      puts.
  lmdb_build.py put DIR KEY (--value TEXT | --value-size N) [--map-size BYTES]
      one more commit that puts KEY (value TEXT, or N bytes of 'x').
  lmdb_build.py delete DIR KEY [--map-size BYTES]
      one more commit that deletes KEY, which must exist.
"""
import argparse
import random

import lmdb

from checklib import fail


def make(args):
    d, n, order, sizes, every = args.dir, args.n, args.order, args.sizes, args.every
    rng = random.Random(n)
    keys = list(range(n))
    if order == "shuffled":
        rng.shuffle(keys)
    env = lmdb.open(d, map_size=args.map_size)
    txn = env.begin(write=True)
    for i, k in enumerate(keys):
        size = rng.choice([100, 1500, 2500, 5000, 70000]) if sizes == "mixed" else int(sizes)
        txn.put(b"%08d" % k, rng.randbytes(size), append=(order == "sorted"))
        if (i + 1) % every == 0:
            txn.commit()
            txn = env.begin(write=True)
    txn.commit()
    env.close()


def put(args):
    value = args.value.encode() if args.value is not None else b"x" * args.value_size
    env = lmdb.open(args.dir, map_size=args.map_size)
    with env.begin(write=True) as txn:
        txn.put(args.key.encode(), value)
    env.close()


def delete(args):
    env = lmdb.open(args.dir, map_size=args.map_size)
    with env.begin(write=True) as txn:
        if not txn.delete(args.key.encode()):
            fail(f"{args.dir}: no record with key {args.key!r} to delete")
    env.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="a new database")
    m.add_argument("dir")
    m.add_argument("n", type=int, help="records")
    m.add_argument("order", choices=("sorted", "shuffled"))
    m.add_argument("sizes", help="'mixed' or a value size in bytes")
    m.add_argument("every", type=int, help="puts per commit")
    m.add_argument("--map-size", type=int, default=1 << 34)
    m.set_defaults(func=make)
    p = sub.add_parser("put", help="one more commit with one put")
    p.add_argument("dir")
    p.add_argument("key")
    v = p.add_mutually_exclusive_group(required=True)
    v.add_argument("--value", help="the value, as text")
    v.add_argument("--value-size", type=int, help="a value of this many 'x' bytes")
    p.add_argument("--map-size", type=int, default=1 << 34)
    p.set_defaults(func=put)
    d = sub.add_parser("delete", help="one more commit with one delete")
    d.add_argument("dir")
    d.add_argument("key")
    d.add_argument("--map-size", type=int, default=1 << 34)
    d.set_defaults(func=delete)
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
