#!/usr/bin/env python3
"""Checks the results.json of a benchmark harness run (tools/bench/run_bench.py):
it has fio rows; every row has a positive cold median and warm throughput for
each target (dlfs, ceiling, backend); the metadata walk's median time for
dlfs and dlfs's metadata bytes per sample are positive. Ratios are not judged.

Used by 10_bench_harness_smoke.sh:

  check_bench_results.py RESULTS_JSON
"""
import argparse
import json

from checklib import fail


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="results.json written by run_bench.py")
    args = ap.parse_args()
    with open(args.results) as f:
        r = json.load(f)
    if not r["rows"]:
        fail("no fio rows")
    for row in r["rows"]:
        for t in ("dlfs", "ceiling", "backend"):
            if not (row["cold_median_bps"][t] > 0 and row["warm_bps"][t] > 0):
                fail(f"{row['workload']}: no throughput for {t}: cold {row['cold_median_bps'][t]}, warm {row['warm_bps'][t]}")
    if not r["metadata"]["median_seconds"]["dlfs"] > 0:
        fail(f"metadata walk: median {r['metadata']['median_seconds']['dlfs']} s for dlfs")
    if not r["dlfs_memory"]["metadata_bytes_per_sample"] > 0:
        fail(f"dlfs memory: metadata bytes per sample {r['dlfs_memory']['metadata_bytes_per_sample']}")
    print("results.json: %d fio rows, metadata and memory figures present" % len(r["rows"]))


if __name__ == "__main__":
    main()
