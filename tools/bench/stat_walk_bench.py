#!/usr/bin/env python3
"""A metadata walk over raw/ against the same walk over the backend: what
`find | xargs stat`, `ls -lR`, `du` or an indexing pass costs through DLFS,
and how much file data it moves into the page cache (none should move: a
stat reads no byte).

For each repetition, after drop_caches: `find DIR -type f -print0 | xargs -0
stat` over the backend, then over a loaded dlfsd's raw/ (under its overlay
when dlfsd runs as root, as deployed), then the raw/ walk again warm. Prints
seconds per walk, the ratio to the backend's walk of the same repetition,
the page cache's growth during the cold raw/ walk (/proc/meminfo Cached)
against the dataset's size, and the FUSE requests and pushed bytes the walk
cost dlfsd. Goals (docs/benchmarks.md): page cache growth under 1% of the
data; time at most 2x the backend's, cold and warm.

  tools/bench/stat_walk_bench.py [--count 20000] [--size 100K] [--repeat 3]
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import cli, daemons, datasets, readers, report, stats  # noqa: E402


def walk(root):
    """Seconds of `find root -type f -print0 | xargs -0 stat` (output dropped)."""
    t = time.perf_counter()
    find = subprocess.Popen(["find", root, "-type", "f", "-print0"], stdout=subprocess.PIPE)
    subprocess.run(["xargs", "-0", "stat"], stdin=find.stdout, stdout=subprocess.DEVNULL, check=True)
    find.stdout.close()
    if find.wait() != 0:
        sys.exit(f"find {root} failed")
    return time.perf_counter() - t


def cached_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Cached:"):
                return int(line.split()[1]) * 1024
    return 0


def raw_pushed(s):
    return s["datasets"][0]["views"]["raw"]["pushed_bytes"]


def main():
    ap = cli.parser(__doc__, workdir="/tmp/dlfs-bench-walk", repeat=3, quick="2,000 files of 3 KiB, one repetition")
    ap.add_argument("--count", type=int, default=20000, help="files in the dataset")
    ap.add_argument("--size", type=cli.size_arg, default=100 << 10, help="bytes per file")
    ap.add_argument("--dlfsd-args", default="", help="more dlfsd flags, as one string (e.g. '--fuse-uring on')")
    a = ap.parse_args()
    cli.require_root(ap, "drop_caches, and the raw overlay as deployed")
    if a.quick:
        a.count, a.size, a.repeat = 2000, 3 << 10, 1
    if a.count < 1 or a.size < 1 or a.repeat < 1:
        ap.error("--count, --size and --repeat must be at least 1")
    dlfsd = cli.built(ap, a.build, "fs/dlfsd")
    ctl = cli.built(ap, a.build, "tools/ctl/dlfs-ctl")
    data = os.path.join(a.workdir, f"files-{a.count}x{a.size}")
    datasets.ensure_dataset(data, a.count, a.size, dirs=max(1, a.count // 1000))
    total = a.count * a.size

    runs = {"backend": [], "raw_cold": [], "raw_warm": [], "cached_growth": []}
    spent_requests = []
    with daemons.Daemons() as d:
        served = d.serve(dlfsd, a.workdir, "walk", data, extra=a.dlfsd_args.split(), prefix="walk")
        raw = os.path.join(served.mnt, "ds", "raw")
        overlay = (stats.ctl_stats(ctl, served.sock).get("fuse") or {}).get("raw_overlay", {}).get("mounted") or []
        report.log(f"raw/ {'under its overlay' if overlay else 'without an overlay'}; "
                   f"{a.count} files of {a.size} bytes ({total / 2**20:.0f} MiB)")
        for r in range(a.repeat):
            readers.drop_caches()
            runs["backend"].append(walk(data))
            readers.drop_caches()
            before_stats, before_cached = stats.ctl_stats(ctl, served.sock), cached_bytes()
            runs["raw_cold"].append(walk(raw))
            after_stats, after_cached = stats.ctl_stats(ctl, served.sock), cached_bytes()
            runs["cached_growth"].append(max(0, after_cached - before_cached))
            runs["raw_warm"].append(walk(raw))
            spent = stats.spent_between(stats.fuse_requests(before_stats), stats.fuse_requests(after_stats))
            spent["pushed_bytes"] = raw_pushed(after_stats) - raw_pushed(before_stats)
            spent_requests.append(spent)
            report.log(f"rep {r}: backend {runs['backend'][-1]:.2f}s, raw/ cold {runs['raw_cold'][-1]:.2f}s "
                       f"warm {runs['raw_warm'][-1]:.2f}s, page cache +{runs['cached_growth'][-1] / 2**20:.1f} MiB")

    m = report.medians(runs)
    cold = report.paired_ratio(runs["raw_cold"], runs["backend"])
    warm = report.paired_ratio(runs["raw_warm"], runs["backend"])
    share = m["cached_growth"] / total
    print(f"\nstat walk of {a.count} files of {a.size} bytes, medians of {a.repeat}:")
    print(f"  backend {m['backend']:.2f}s; raw/ cold {m['raw_cold']:.2f}s ({cold:.2f}x, goal <= 2), "
          f"warm {m['raw_warm']:.2f}s ({warm:.2f}x, goal <= 2)")
    print(f"  page cache growth during the cold raw/ walk: {m['cached_growth'] / 2**20:.1f} MiB, "
          f"{100 * share:.2f}% of the data (goal < 1%)")
    print(f"  cost to dlfsd of the last cold walk: {spent_requests[-1]}")


if __name__ == "__main__":
    main()
