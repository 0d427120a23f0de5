#!/usr/bin/python3
"""Epoch-view benchmarks: every figure printed is measured in this run.

  small    3 KiB samples: streaming an epoch view (.tar, 1 MiB reads) against
           reading the same samples, in the same shuffled order, as individual
           files from the backend directory with open/read/close. Both cold
           (drop_caches first: the backend's page cache is gone; DLFS's
           memory is not, which is the point) and warm (backend in the page
           cache). Samples per second, medians, ratios.
  large    256 KiB samples: streaming an epoch view against the FUSE ceiling
           (tools/bench/ceiling_fs.cc, the same bytes as files), cold, with fio
           (1 and 2 streams: ranks 0 and 1 of W=2 against two halves of the
           ceiling's files). MB/s, medians, ratios.
  rounds   R = 0.5 and 0.25 over a page-cache-warm backend (faster than the
           reader): a paced reader streams an epoch view; the per-round timeline
           from stats shows whether the stream waited between rounds.

usage: views_bench.py [--build DIR] [--workdir DIR] [--repeat 3] [--only small,large,rounds]
                      [--small-count 50000] [--large-size 2G] [--quick] [--json FILE] [--plots DIR]
"""
import os
import subprocess
import sys
import time

import plots
from benchlib import cli, readers
from benchlib.daemons import run_parts
from benchlib.datasets import ensure_dataset
from benchlib.readers import MiB, drop_caches, read_files, read_index, read_stream
from benchlib.report import log, medians, write_json
from benchlib.stats import mount_stats


def bench_small(a, daemons, dlfsd):
    data = os.path.join(a.workdir, f"meta-{a.small_count}x3K")
    ensure_dataset(data, a.small_count, 3 << 10, 100)
    mnt = daemons.serve(dlfsd, a.workdir, "small", data).mnt
    rows = {"view_cold": [], "files_cold": [], "view_warm": [], "files_warm": []}
    n = 0
    for rep in range(a.repeat):
        view = os.path.join(mnt, f"ds/epochs/{rep}/1/0")
        names = [r[4] for r in read_index(view + ".index")]
        n = len(names)
        # Alternate which goes first; each is cold (drop_caches) then warm.
        order = ["view", "files"] if rep % 2 == 0 else ["files", "view"]
        for what in order:
            drop_caches()
            for phase in ("cold", "warm"):
                if what == "view":
                    _, s = read_stream(view + ".tar")
                else:
                    s = read_files(data, names)
                rows[f"{what}_{phase}"].append(n / s)
        log(f"small rep {rep}: view cold {rows['view_cold'][-1]:,.0f}/s, files cold {rows['files_cold'][-1]:,.0f}/s, "
            f"view warm {rows['view_warm'][-1]:,.0f}/s, files warm {rows['files_warm'][-1]:,.0f}/s")
    med = medians(rows)
    daemons.stop_all()
    return {"samples": n, "samples_per_s": med, "runs": rows,
            "ratio_cold": med["view_cold"] / med["files_cold"], "ratio_warm": med["view_warm"] / med["files_warm"]}


def fio_run(out_json, jobs):
    """fio, sequential reads, one job per entry of `jobs` (its fio options);
    aggregate bytes/s."""
    opts = ["--ioengine=psync", "--rw=read", "--invalidate=0", "--group_reporting"]
    for i, job in enumerate(jobs):
        opts += [f"--name=j{i}", *job]
    j = readers.fio(opts, out_json)
    if sum(job["read"]["io_bytes"] for job in j["jobs"]) == 0:
        sys.exit(f"fio read nothing: {out_json}")
    return sum(job["read"]["bw_bytes"] for job in j["jobs"])


def bench_large(a, daemons, dlfsd):
    ceiling = os.path.join(a.build, "tools/bench/dlfs-bench-ceiling")
    nfiles = a.large_size // (256 << 10)
    data = os.path.join(a.workdir, f"data-{nfiles}x262144")
    ensure_dataset(data, nfiles, 256 << 10, 16)
    mnt = daemons.serve(dlfsd, a.workdir, "large", data).mnt
    mnt_c = os.path.join(a.workdir, "mnt-views-ceiling")
    daemons.start("ceiling", [ceiling, "--files", str(nfiles), "--file-size", str(256 << 10), "--dirs", "16", mnt_c],
                  mnt_c, lambda: os.path.isdir(os.path.join(mnt_c, "d0000")),
                  os.path.join(a.workdir, "ceiling-views.log"))
    out = os.path.join(a.workdir, "fio-views.json")
    result = {}
    for streams in (1, 2):
        runs = {"view": [], "ceiling": []}
        for rep in range(a.repeat):
            epoch = 100 * streams + rep  # a new epoch each run: nothing of it is in the page cache
            views = [os.path.join(mnt, f"ds/epochs/{epoch}/{streams}/{r}.tar") for r in range(streams)]
            for v in views:
                os.stat(v)  # build the view (plan and tar layout) before the clock starts
            # Rank r of W streams its view; the ceiling runs W jobs over all its files (fio's opendir).
            # (fio reads nothing from a file smaller than bs: the ceiling's
            # 256 KiB files are read whole, with 256 KiB reads.)
            view_jobs = [[f"--filename={v}", "--bs=1M"] for v in views]
            ceiling_jobs = [[f"--opendir={mnt_c}", "--bs=256k"] for _ in range(streams)]
            order = ["view", "ceiling"] if rep % 2 == 0 else ["ceiling", "view"]
            for what in order:
                drop_caches()
                runs[what].append(fio_run(out, view_jobs if what == "view" else ceiling_jobs))
            log(f"large {streams} stream(s) rep {rep}: view {runs['view'][-1] / 1e6:,.0f} MB/s, "
                f"ceiling {runs['ceiling'][-1] / 1e6:,.0f} MB/s")
        med = medians(runs)
        result[f"{streams}_streams"] = {"bps": med, "runs": runs, "ratio": med["view"] / med["ceiling"]}
    daemons.stop_all()
    return result


def bench_rounds(a, daemons, dlfsd):
    data = os.path.join(a.workdir, f"rounds-{a.rounds_count}x64K")
    ensure_dataset(data, a.rounds_count, 64 << 10, 16)
    subprocess.run(["cat"] + [os.path.join(dp, f) for dp, _, fs in os.walk(data) for f in fs][:1], check=False,
                   stdout=subprocess.DEVNULL)
    result = {}
    for ratio in (0.5, 0.25):
        # The backend in the page cache: faster than the paced reader below.
        subprocess.run(f"find {data} -type f -exec cat {{}} + >/dev/null", shell=True, check=True)
        mnt = daemons.serve(dlfsd, a.workdir, f"r{ratio}", data,
                            ["--shuffle-ratio", str(ratio), "--round-chunk", "1MiB", "--loader-threads", "2"]).mnt
        total, t0 = 0, time.perf_counter()
        pace = a.pace_mb_s * 1e6
        for epoch in (0, 1):
            fd = os.open(os.path.join(mnt, f"ds/epochs/{epoch}/1/0.tar"), os.O_RDONLY)
            while True:
                b = os.read(fd, MiB)
                if not b:
                    break
                total += len(b)
                ahead = total / pace - (time.perf_counter() - t0)  # the "training step" between reads
                if ahead > 0:
                    time.sleep(ahead)
            os.close(fd)
        secs = time.perf_counter() - t0
        s = mount_stats(mnt)["datasets"][0]
        timeline = s["rounds"]["timeline"]
        result[str(ratio)] = {"plan": s["plan"], "timeline": timeline, "stalls": s["rounds"]["stalls"],
                              "stream_mb_s": total / secs / 1e6, "pace_mb_s": a.pace_mb_s}
        log(f"R={ratio}: {len(timeline)} round loads, {s['rounds']['stalls']} stalled acquires, "
            f"stream {total / secs / 1e6:.0f} MB/s at a pace of {a.pace_mb_s} MB/s")
        daemons.stop_all()
    return result


def report(res):
    print()
    if "small" in res:
        r = res["small"]
        m = r["samples_per_s"]
        print(f"3 KiB samples, {r['samples']} per epoch (samples/s, median):")
        print(f"  epoch view (.tar stream)   cold {m['view_cold']:>12,.0f}   warm {m['view_warm']:>12,.0f}")
        print(f"  backend files, shuffled    cold {m['files_cold']:>12,.0f}   warm {m['files_warm']:>12,.0f}")
        print(f"  view / files               cold {r['ratio_cold']:>11.1f}x   warm {r['ratio_warm']:>11.1f}x")
    if "large" in res:
        print("256 KiB samples, cold (MB/s, median):")
        for k, r in res["large"].items():
            print(f"  {k.replace('_', ' '):<10} view {r['bps']['view'] / 1e6:>7,.0f}   ceiling "
                  f"{r['bps']['ceiling'] / 1e6:>7,.0f}   view/ceiling {r['ratio']:.2f}x")
    if "rounds" in res:
        for ratio, r in res["rounds"].items():
            p = r["plan"]
            print(f"R = {ratio}: {p['rounds_per_epoch']} rounds per epoch, RL {p['randomization_level'] * 100:.2f}%, "
                  f"reader paced at {r['pace_mb_s']} MB/s, streamed at {r['stream_mb_s']:.0f} MB/s, "
                  f"{r['stalls']} stalled acquires")
            print(f"  {'epoch':>5} {'round':>5} {'MiB':>6} {'load start':>10} {'load end':>9} {'first read':>10} "
                  f"{'wait s':>7}")
            for e in r["timeline"]:
                print(f"  {e['epoch']:>5} {e['round']:>5} {e['bytes'] / MiB:>6.1f} {e['load_start_s']:>10.2f} "
                      f"{e['load_end_s']:>9.2f} {e['first_read_s']:>10.2f} {e['wait_s']:>7.3f}")


def main():
    ap = cli.parser(__doc__, workdir="/tmp/dlfs-bench-full", repeat=3, quick="tiny smoke run",
                    json="write all results here", only="small,large,rounds")
    ap.add_argument("--small-count", type=int, default=50000)
    ap.add_argument("--large-size", type=cli.size_arg, default=2 << 30)
    ap.add_argument("--rounds-count", type=int, default=4096, help="64 KiB files for the rounds run (256 MiB)")
    ap.add_argument("--pace-mb-s", type=float, default=150, help="rounds: the reader's pace (a training step)")
    ap.add_argument("--plots", help="directory for round_timeline.png (default: --json's directory, else --workdir)")
    a = ap.parse_args()
    if a.quick:
        a.repeat, a.small_count, a.large_size, a.rounds_count, a.workdir = 1, 2000, 64 * MiB, 256, "/tmp/dlfs-bench-quick"
    cli.require_root(ap, "FUSE mounts, drop_caches")
    dlfsd = cli.built(ap, a.build, "fs/dlfsd")
    os.makedirs(a.workdir, exist_ok=True)
    res = run_parts(a, {"small": bench_small, "large": bench_large, "rounds": bench_rounds}, dlfsd)
    report(res)
    if a.json:
        write_json(a.json, res)
    if "rounds" in res:
        plots.save("round_timeline", res["rounds"], a.plots or plots.default_dir(a.json, a.workdir),
                   f"{a.rounds_count} files of 64 KiB, {plots.machine()}")


if __name__ == "__main__":
    main()
