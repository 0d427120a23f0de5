#!/usr/bin/env python3
"""Checks the JSON of a loaders_bench.py --quick run (tools/bench): every
variant ran both epochs of both sizes on every backend, with the counts its
loader must deliver (every sample once; a DLFS view's ranks pad to ceil(N/W)),
positive samples/s, a first batch inside the epoch, memory figures where
they belong, shuffle measures in their ranges; DLFS's orders are within
uniform's spread (its views and raw/ shuffle the whole dataset when it fits
in memory), and a WebDataset sample buffer's order keeps shard neighbours
together (what the measure is there to see). Speeds are not judged.

Used by 46_loaders_bench_smoke.sh:

  check_loaders_bench.py RESULTS_JSON --backends local [--png FILE]
"""
import argparse
import json
import math
import os

from checklib import fail

DLFS = ("dlfs-views", "dlfs-views-b", "dlfs-views-wds", "dlfs-raw")
VIEWS = ("dlfs-views", "dlfs-views-b", "dlfs-views-wds")
MUST_RUN = ("dlfs-views", "dlfs-views-b", "dlfs-views-wds", "dlfs-raw", "files", "mosaic", "wds-1k", "wds-10k",
            "dali-file", "dali-tfrecord")
UNIFORM_MAX_Z = 6.0  # a uniform shuffle stays below ~3.5 (shuffle_quality.py); 6 leaves no room for flakes


def check_run(r, size, workers, bad):
    where = f"{r['size']}/{r['backend']}/{r['variant']}/epoch {r['epoch']} rep {r['rep']}"
    n = size["count"]
    want = workers * math.ceil(n / workers) if r["variant"] in VIEWS else n
    q = r["shuffle"]
    if r["samples"] != want or q["delivered"] != want:
        bad.append(f"{where}: {r['samples']} samples, {q['delivered']} ids delivered, want {want}")
    if q["missing"] != 0 or q["distinct"] != n:
        bad.append(f"{where}: {q['distinct']} distinct samples of {n}, {q['missing']} missing")
    if not (r["samples_s"] > 0 and 0 <= r["ttfb_s"] <= r["seconds"]):
        bad.append(f"{where}: samples/s {r['samples_s']}, first batch {r['ttfb_s']} s of {r['seconds']} s")
    if not r["loader_rss_peak"] > 0:
        bad.append(f"{where}: loader RSS {r['loader_rss_peak']}")
    on_dlfs = r["variant"] in DLFS
    if on_dlfs != bool(r["dlfsd_rss_peak"]) or on_dlfs != (r["dlfsd_load_s"] is not None):
        bad.append(f"{where}: dlfsd RSS {r['dlfsd_rss_peak']}, load {r['dlfsd_load_s']} s")
    if not isinstance(r["cache_growth"], int):
        bad.append(f"{where}: page cache growth {r['cache_growth']!r}")
    ranges = {"shard_adjacency": (0, 1e6), "rho": (-1, 1), "displacement": (0, 1), "max_z": (0, 1e9)}
    for k, (lo, hi) in ranges.items():
        if not (isinstance(q[k], (int, float)) and lo <= q[k] <= hi):
            bad.append(f"{where}: {k} = {q[k]!r}, want within [{lo}, {hi}]")
    if (r["epoch"] == 2) != (q["rho_prev"] is not None) or (q["rho_prev"] is not None and abs(q["rho_prev"]) > 1):
        bad.append(f"{where}: rho_prev = {q['rho_prev']!r}")
    if on_dlfs and q["max_z"] > UNIFORM_MAX_Z:
        bad.append(f"{where}: DLFS's order is {q['max_z']:.1f} standard deviations from uniform ({q})")
    if r["variant"] == "wds-1k" and q["shard_adjacency"] < 1.3:
        bad.append(f"{where}: a 1,000-sample buffer over shards of a few hundred kept few shard neighbours: "
                   f"{q['shard_adjacency']:.2f} x uniform")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--backends", default="local")
    ap.add_argument("--png", help="the figure the run should have drawn")
    a = ap.parse_args()
    with open(a.results) as f:
        res = json.load(f)
    cfg, bad = res["config"], []
    variants = cfg["variants"]
    missing = [v for v in MUST_RUN if v not in variants]
    if missing:
        fail(f"variants left out of the run: {missing} (ran {variants})")
    cells = 0
    for size_key, size in cfg["sizes"].items():
        for b in a.backends.split(","):
            for v in variants:
                for e in (1, 2):
                    c = res["summary"].get(size_key, {}).get(b, {}).get(v, {}).get(f"epoch{e}")
                    if c is None:
                        bad.append(f"{size_key}/{b}/{v}/epoch {e}: no summary")
                        continue
                    cells += 1
                    if not (c["ratio_fastest_peer"] and c["ratio_fastest_peer"] > 0):
                        bad.append(f"{size_key}/{b}/{v}/epoch {e}: ratio to the fastest peer {c['ratio_fastest_peer']}")
                    if v in ("dlfs-views", "dlfs-views-b"):
                        g = c.get("goal") or {}
                        if not all(isinstance(g.get(k), bool) for k in ("speed_ok", "shuffle_ok")):
                            bad.append(f"{size_key}/{b}/{v}/epoch {e}: goals not evaluated: {g}")
    for r in res["runs"]:
        check_run(r, cfg["sizes"][r["size"]], cfg["workers"], bad)
    if len(res["runs"]) != cells * cfg["repeat"]:
        bad.append(f"{len(res['runs'])} runs for {cells} summary cells x {cfg['repeat']} repetitions")
    if a.png and not (os.path.exists(a.png) and os.path.getsize(a.png) > 10000):
        bad.append(f"no figure at {a.png}")
    if bad:
        fail("loaders JSON:\n  " + "\n  ".join(bad))
    print(f"loaders JSON: {cells} cells of {len(variants)} variants, counts, memory and shuffle measures in range")


if __name__ == "__main__":
    main()
