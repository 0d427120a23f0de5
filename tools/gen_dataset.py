#!/usr/bin/python3
"""Generate synthetic datasets for DLFS quick starts, tests and benchmarks.

  gen_dataset.py files OUTDIR --count N --size S [--size-jitter F] [--dirs D] [--seed X]
      N files of about S bytes (e.g. 3K, 256K, 1M) in D class directories
      (class_0000/img_000123.bin), contents deterministic from the seed.
  gen_dataset.py fixed OUTDIR --records N --record-size R [--header H] [--files F] [--seed X]
      CIFAR-10-binary-style files of fixed-length records, each starting with
      H header bytes; record k holds its index as a label byte and pattern bytes.
"""
import argparse
import os
import random
import sys
import time

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size_arg(text):
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    try:
        if t and t[-1] in UNITS:
            return int(float(t[:-1]) * UNITS[t[-1]])
        return int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size such as 4096, 3K, 256K or 1M")


def pattern(rng, n):
    # randbytes of a 64 KiB block, repeated with a per-file twist: fast and
    # still different per file (so a mixed-up file shows up in a checksum).
    block = rng.randbytes(min(n, 1 << 16))
    reps = n // len(block) + 1 if block else 0
    return (block * reps)[:n]


def gen_files(args):
    rng = random.Random(args.seed)
    total = 0
    width = max(6, len(str(args.count - 1)))
    for i in range(args.count):
        d = os.path.join(args.outdir, f"class_{i % args.dirs:04d}")
        if i < args.dirs:
            os.makedirs(d, exist_ok=True)
        jitter = 1.0 + args.size_jitter * (2 * rng.random() - 1) if args.size_jitter else 1.0
        n = max(0, int(args.size * jitter))
        data = pattern(rng, n)
        with open(os.path.join(d, f"img_{i:0{width}d}.bin"), "wb") as f:
            f.write(data)
        total += n
    return args.count, total


def gen_fixed(args):
    rng = random.Random(args.seed)
    os.makedirs(args.outdir, exist_ok=True)
    per_file = [args.records // args.files + (1 if k < args.records % args.files else 0) for k in range(args.files)]
    body = pattern(rng, args.record_size)
    index, total = 0, 0
    for k, n in enumerate(per_file):
        with open(os.path.join(args.outdir, f"data_batch_{k + 1}.bin"), "wb") as f:
            f.write(bytes([0xAB]) * args.header)
            chunk = bytearray()
            for _ in range(n):
                rec = bytearray(body)
                rec[0] = index % 10  # a label byte, as in CIFAR-10
                rec[1:9] = index.to_bytes(8, "little")[: max(0, min(8, args.record_size - 1))]
                chunk += rec[: args.record_size]
                index += 1
                if len(chunk) >= 8 << 20:
                    f.write(chunk)
                    chunk = bytearray()
            f.write(chunk)
        total += args.header + n * args.record_size
    return args.records, total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="kind", required=True)
    f = sub.add_parser("files", help="one file per sample")
    f.add_argument("outdir")
    f.add_argument("--count", type=int, required=True, help="number of files")
    f.add_argument("--size", type=size_arg, required=True, help="bytes per file (3K, 256K, 1M)")
    f.add_argument("--size-jitter", type=float, default=0.0, help="sizes vary by +-this fraction (0..1)")
    f.add_argument("--dirs", type=int, default=10, help="class directories")
    f.add_argument("--seed", type=int, default=0)
    x = sub.add_parser("fixed", help="fixed-length records")
    x.add_argument("outdir")
    x.add_argument("--records", type=int, required=True)
    x.add_argument("--record-size", type=size_arg, required=True)
    x.add_argument("--header", type=size_arg, default=0, help="header bytes at the start of every file")
    x.add_argument("--files", type=int, default=5)
    x.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for name in ("count", "records", "dirs", "files"):
        if getattr(args, name, 1) < 1:
            ap.error(f"--{name} must be at least 1")
    if args.kind == "files" and not 0 <= args.size_jitter < 1:
        ap.error("--size-jitter must be in [0, 1)")
    if os.path.exists(args.outdir) and os.listdir(args.outdir):
        ap.error(f"output directory '{args.outdir}' exists and is not empty")
    t0 = time.perf_counter()
    n, total = gen_files(args) if args.kind == "files" else gen_fixed(args)
    dt = time.perf_counter() - t0
    print(f"gen_dataset: {n} samples, {total / 2**20:.1f} MiB in {dt:.1f} s under {args.outdir}")


if __name__ == "__main__":
    sys.exit(main())
