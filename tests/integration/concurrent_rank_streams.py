#!/usr/bin/env python3
"""Reads the .bin streams of every rank of one (epoch, world size) at once, one
thread per rank, as concurrent trainers would, and checks them against a
fixed-record backend: each stream is as long as its .index says, record k of
rank r is the backend record the index names, and across the ranks every
sample id in [0, SAMPLES) appears.

Used by 12_rounds.sh:

  concurrent_rank_streams.py VIEW_DIR BACKEND --samples 6007 [--world-size 2]
                             [--record-size 3073] [--header-bytes 16]

VIEW_DIR is MNT/DATASET/epochs/E/W; rank r's stream is VIEW_DIR/r.bin.
"""
import argparse
import threading

from checklib import add_fixed_backend_args, fail


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base", help="MNT/DATASET/epochs/E/W")
    ap.add_argument("backend", help="the fixed-record backend directory")
    ap.add_argument("--samples", type=int, required=True, help="samples in the dataset")
    add_fixed_backend_args(ap)
    args = ap.parse_args()
    base, backend, rec_size, header = args.base, args.backend, args.record_size, args.header_bytes
    ranks = range(args.world_size)

    out, errors = {}, []

    def read(r):
        try:
            with open(f"{base}/{r}.bin", "rb") as f:
                out[r] = f.read()
        except OSError as e:
            errors.append(f"rank {r}: {e}")

    ts = [threading.Thread(target=read, args=(r,)) for r in ranks]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        fail("; ".join(errors))
    ids = []
    for r in ranks:
        rows = [l.rstrip("\n").split("\t") for l in open(f"{base}/{r}.index") if not l.startswith("#")]
        if len(out[r]) != rec_size * len(rows):
            fail(f"rank {r}: short stream ({len(out[r])} bytes for {len(rows)} records)")
        for k, row in enumerate(rows):
            path, rec = row[4].rsplit("/", 1)
            with open(f"{backend}/{path}", "rb") as f:
                f.seek(header + int(rec[:8]) * rec_size)
                if out[r][k * rec_size:(k + 1) * rec_size] != f.read(rec_size):
                    fail(f"rank {r} record {k} differs")
            ids.append(int(row[1]))
    if sorted(set(ids)) != list(range(args.samples)):
        fail("a sample is missing")
    print("concurrent ok")


if __name__ == "__main__":
    main()
