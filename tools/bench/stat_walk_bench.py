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
cost dlfsd. Goals (docs/benchmark-notes.md): page cache growth under 1% of the
data; time at most 2x the backend's, cold and warm.

Then first reads: after drop_caches, Python's open().read() of a shuffled
sample of the files (--first-reads, one process), over the backend and over
raw/ of three dlfsd: under the overlay (a file is pushed into the page cache
at the overlay's getxattr once its reader has read a raw file), without it
(pushed at open()'s isatty() ioctl), and under the overlay with pushes off
(--raw-push-size 0: every first read is a READ round trip). What a file's
first open gains from the push is the time and the READs against that last
one.

  tools/bench/stat_walk_bench.py [--count 20000] [--size 100K] [--repeat 3] [--first-reads 5000]
"""
import os
import random
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
    ap.add_argument("--first-reads", type=int, default=5000, help="files read in the first-reads part (0: skip it)")
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
    if a.first_reads > 0:
        first_reads(a, dlfsd, ctl, data)


# The dlfsd of the first-reads part: name, extra flags.
FIRST_READ_VARIANTS = [
    ("overlay", []),
    ("no overlay", ["--raw-overlay", "off"]),
    ("overlay, no push", ["--raw-push-size", "0"]),
]


def first_reads(a, dlfsd, ctl, data):
    names = readers.files_under(data)
    names = random.Random(7).sample(names, min(a.first_reads, len(names)))
    runs = {"backend": []}
    spent = {}
    with daemons.Daemons() as d:
        served = {}
        for tag, extra in FIRST_READ_VARIANTS:
            served[tag] = d.serve(dlfsd, a.workdir, tag.replace(" ", "").replace(",", "-"), data,
                                  extra=extra + a.dlfsd_args.split(), prefix="first")
            runs[tag] = []
        for r in range(a.repeat):
            readers.drop_caches()
            runs["backend"].append(readers.read_shuffled(data, names, r)[1])
            for tag, sv in served.items():
                readers.drop_caches()
                before = stats.fuse_requests(stats.ctl_stats(ctl, sv.sock))
                runs[tag].append(readers.read_shuffled(os.path.join(sv.mnt, "ds", "raw"), names, r)[1])
                after = stats.fuse_requests(stats.ctl_stats(ctl, sv.sock))
                spent[tag] = stats.per_sample(before, after, len(names))
            report.log(f"first reads rep {r}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in runs.items()))
    m = report.medians(runs)
    print(f"\nfirst reads (Python open().read() after drop_caches) of {len(names)} files of {a.size} bytes, "
          f"medians of {a.repeat}:")
    print(f"  backend {m['backend']:.2f}s ({len(names) / m['backend']:,.0f} files/s)")
    for tag, _ in FIRST_READ_VARIANTS:
        per = {k: round(v, 2) for k, v in (spent.get(tag) or {}).items() if v >= 0.01}
        print(f"  raw/ {tag}: {m[tag]:.2f}s ({len(names) / m[tag]:,.0f} files/s, "
              f"{report.paired_ratio(runs[tag], runs['backend']):.2f}x the backend's time, "
              f"{report.paired_ratio(runs[tag], runs['overlay, no push']):.2f}x without pushes); requests per file {per}")


if __name__ == "__main__":
    main()
