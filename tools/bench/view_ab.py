#!/usr/bin/python3
"""Two dlfsd builds side by side on the serving cost of an epoch view: every
figure printed is measured in this run.

Each build serves the same 3 KiB-sample dataset (fully loaded, so every
sample byte comes from memory); one reader streams `epochs/E/1/0.tar` of a
new epoch E with 1 MiB reads (each view read once, its page-cache copy given
back afterwards). The builds take turns, round after round, so that the
machine's noise falls on both alike. Printed per build: samples/s (median)
and the daemon's CPU time per sample (user + system, from /proc; less noisy
than wall time on a shared machine), and the ratio of the two builds.

Use it to show that a change to the read path costs nothing:

  tools/bench/view_ab.py --build build --against /path/to/old/build --rounds 6

usage: view_ab.py --build DIR --against DIR [--workdir DIR] [--rounds 6] [--count 50000]
"""
import os
import statistics

from benchlib import SRC, cli
from benchlib.daemons import Daemons
from benchlib.datasets import ensure_dataset
from benchlib.proc import thread_cpu_seconds
from benchlib.readers import read_stream


def one_epoch(p, mnt, epoch, count):
    """Streams one new epoch view; returns (samples/s, daemon CPU microseconds per sample)."""
    path = os.path.join(mnt, f"ds/epochs/{epoch}/1/0.tar")
    os.stat(path)  # plan and tar layout built before the clock starts
    c0 = thread_cpu_seconds(p.pid)
    _, dt = read_stream(path, give_back=True)
    return count / dt, (thread_cpu_seconds(p.pid) - c0) / count * 1e6


def main():
    ap = cli.parser(__doc__, workdir=os.path.join(SRC, "build-bench"), build="the build under test (meson build dir)")
    ap.add_argument("--against", required=True, help="the build to compare with (meson build dir)")
    ap.add_argument("--rounds", type=int, default=6, help="epochs streamed per build (medians)")
    ap.add_argument("--count", type=int, default=50000, help="samples of 3 KiB")
    a = ap.parse_args()
    dlfsd = {tag: cli.built(ap, b, "fs/dlfsd") for tag, b in (("build", a.build), ("against", a.against))}
    os.makedirs(a.workdir, exist_ok=True)
    data = os.path.join(a.workdir, f"meta-{a.count}x3K")
    ensure_dataset(data, a.count, 3072, 64)
    builds = {"build": a.build, "against": a.against}
    with Daemons() as daemons:
        served = {tag: daemons.serve(dlfsd[tag], a.workdir, tag, data, ["--log-level", "warn"], prefix="ab")
                  for tag in builds}
        runs = {tag: [] for tag in builds}
        for r in range(a.rounds):
            for tag, s in served.items():
                rate, us = one_epoch(s.proc, s.mnt, r + 1, a.count)
                runs[tag].append((rate, us))
                print(f"[ab] round {r} {tag}: {rate:,.0f} samples/s, {us:.2f} us daemon CPU/sample", flush=True)
    med = {tag: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for tag, v in runs.items()}
    print(f"\n3 KiB samples, {a.count} per epoch, {a.rounds} epochs each, medians:")
    for tag, (rate, us) in med.items():
        print(f"  {tag:8} {builds[tag]:40} {rate:>12,.0f} samples/s  {us:6.2f} us CPU/sample")
    print(f"  build / against: samples/s {med['build'][0] / med['against'][0]:.2f}x, "
          f"CPU/sample {med['build'][1] / med['against'][1]:.2f}x")


if __name__ == "__main__":
    main()
