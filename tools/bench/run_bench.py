#!/usr/bin/python3
"""DLFS benchmark harness: fio (and IOR when present) against the DLFS raw view,
the backend directory and a minimal memory-backed FUSE server (the ceiling),
in one run, with ratios. Every figure printed is measured in this run.

Cold = `echo 3 > /proc/sys/vm/drop_caches` before the run (evicts the backend's
and the FUSE mounts' page cache and dentries); warm = the same run repeated at
once (kernel page cache). Runs are repeated --repeat times (medians): the
DLFS mount and the ceiling alternate which goes first, the backend is measured
in a pass of its own after them.

usage: run_bench.py [--build DIR] [--workdir DIR] [--size 2G] [--file-size 256K]
                    [--jobs 1,2] [--repeat 3] [--runtime 5] [--metadata-files 50000]
                    [--quick] [--skip-random] [--skip-metadata] [--plots DIR]
"""
import os
import shutil
import subprocess
import time

import plots
from benchlib import cli, readers
from benchlib.daemons import Daemons, dlfsd_argv, loaded
from benchlib.datasets import ensure_dataset
from benchlib.readers import drop_caches
from benchlib.report import log, medians, write_json
from benchlib.stats import mount_stats


def fio(directory, rw, bs, jobs, runtime, out_json):
    """One fio run over every file under `directory`; returns aggregate bytes/s."""
    # invalidate=0: fio would otherwise drop each file's page cache before
    # reading it, and no run would ever be warm; cold comes from drop_caches.
    opts = ["--name=bench", "--ioengine=psync", f"--rw={rw}", f"--bs={bs}", f"--opendir={directory}",
            f"--numjobs={jobs}", "--invalidate=0", "--group_reporting"]
    if rw == "randread":
        opts += ["--time_based", f"--runtime={runtime}", "--norandommap"]
    return sum(job["read"]["bw_bytes"] for job in readers.fio(opts, out_json)["jobs"])


def walk_seconds(directory):
    """find + stat of the whole tree (find -printf stats every entry)."""
    t0 = time.perf_counter()
    subprocess.run(["find", directory, "-printf", "%s %T@ %m\n"], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def ior_read_mib_s(path, size, repeat):
    """IOR read of an existing file (-r -E -k: read only, keep it), 1 MiB transfers."""
    out = subprocess.run(["ior", "-a", "POSIX", "-r", "-E", "-k", "-o", path, "-t", "1m", "-b", str(size),
                          "-s", "1", "-i", str(repeat), "-C"], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():  # "Max Read:  1234.56 MiB/sec (1294.53 MB/sec)"
        if line.startswith("Max Read:"):
            return float(line.split()[2])
    raise RuntimeError("no 'Max Read' line in IOR output:\n" + out)


def run_ior(a, w, dlfsd, daemons):
    """IOR reads one large file through a DLFS mount and from the backend."""
    size = min(a.size, 1 << 30)
    d = os.path.join(w, f"ior-{size}")
    if not os.path.exists(os.path.join(d, "ior_file")):
        os.makedirs(d, exist_ok=True)
        subprocess.run(["dd", "if=/dev/urandom", f"of={os.path.join(d, 'ior_file')}", "bs=1M",
                        f"count={size >> 20}", "status=none"], check=True)
    mnt = os.path.join(w, "mnt-ior")
    daemons.start("dlfsd-ior", dlfsd_argv(dlfsd, mnt, d, os.path.join(w, "dlfsd-ior.sock"), name="i"),
                  mnt, lambda: loaded(mnt), os.path.join(w, "dlfsd-ior.log"))
    drop_caches()
    got = {"dlfs_mib_s": ior_read_mib_s(os.path.join(mnt, "i/raw/ior_file"), size, a.repeat)}
    drop_caches()
    got["backend_mib_s"] = ior_read_mib_s(os.path.join(d, "ior_file"), size, a.repeat)
    log(f"IOR read: dlfs {got['dlfs_mib_s']:.0f} MiB/s, backend {got['backend_mib_s']:.0f} MiB/s")
    return got


def fmt_rate(bps):
    return f"{bps / 1e6:9.0f}"


def main():
    ap = cli.parser(__doc__, workdir="/tmp/dlfs-bench",
                    quick="tiny smoke run (CI): 64 MiB, 2000 metadata files")
    ap.add_argument("--size", type=cli.size_arg, default=2 << 30, help="dataset bytes (default 2G)")
    ap.add_argument("--file-size", type=cli.size_arg, default=256 << 10, help="bytes per file (default 256K)")
    ap.add_argument("--jobs", default="1,2", help="fio numjobs values, comma-separated")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs per figure (median); even counts let the two mounts go first equally often")
    ap.add_argument("--runtime", type=int, default=5, help="seconds per random-read run")
    ap.add_argument("--metadata-files", type=int, default=50000, help="files of 3 KiB for the find+stat test")
    ap.add_argument("--skip-random", action="store_true")
    ap.add_argument("--skip-metadata", action="store_true")
    ap.add_argument("--plots", help="directory for throughput_vs_ceiling.png (default: --workdir, by results.json)")
    a = ap.parse_args()
    if a.quick:
        a.size, a.metadata_files, a.repeat, a.runtime, a.jobs = 64 << 20, 2000, 1, 1, "1"
        readers.set_settle(0.2)
    cli.require_root(ap, "FUSE mounts, drop_caches")
    cli.require_tools(ap, "fio", "fusermount3")
    dlfsd = cli.built(ap, a.build, "fs/dlfsd")
    ceiling = cli.built(ap, a.build, "tools/bench/dlfs-bench-ceiling")

    w = a.workdir
    os.makedirs(w, exist_ok=True)
    nfiles = max(1, a.size // a.file_size)
    data = os.path.join(w, f"data-{nfiles}x{a.file_size}")
    log(f"dataset: {nfiles} files of {a.file_size} bytes under {data}")
    ensure_dataset(data, nfiles, a.file_size, 16)
    jobs = [int(j) for j in a.jobs.split(",")]
    results = {"config": vars(a), "rows": []}
    with Daemons() as daemons:
        mnt_d, mnt_c = os.path.join(w, "mnt-dlfs"), os.path.join(w, "mnt-ceiling")
        daemons.start("dlfsd", dlfsd_argv(dlfsd, mnt_d, data, os.path.join(w, "dlfsd.sock")),
                      mnt_d, lambda: loaded(mnt_d), os.path.join(w, "dlfsd.log"))
        daemons.start("ceiling", [ceiling, "--files", str(nfiles), "--file-size", str(a.file_size), "--dirs", "16",
                                  mnt_c], mnt_c, lambda: os.path.isdir(os.path.join(mnt_c, "d0000")),
                      os.path.join(w, "ceiling.log"))
        targets = [("dlfs", os.path.join(mnt_d, "ds/raw")), ("ceiling", mnt_c), ("backend", data)]
        fio_json = os.path.join(w, "fio.json")

        workloads = [("seq", "read", min(1 << 20, a.file_size))]
        if not a.skip_random:
            workloads += [("rand4k", "randread", 4096), ("rand128k", "randread", min(128 << 10, a.file_size))]
        for name, rw, bs in workloads:
            for nj in jobs:
                cold = {t: [] for t, _ in targets}
                warm = {}
                fuse_targets, backend = targets[:2], targets[2]
                # The FUSE targets alternate which goes first; the backend is
                # measured in a pass of its own afterwards. (Measured here:
                # whatever ran right after the backend's gigabytes of page
                # cache were dropped used twice the CPU, so no FUSE target
                # may take that slot more often than the other.)
                for r in range(a.repeat):
                    order = fuse_targets if r % 2 == 0 else fuse_targets[::-1]
                    for t, d in order:
                        drop_caches()
                        cold[t].append(fio(d, rw, bs, nj, a.runtime, fio_json))
                        warm.setdefault(t, []).append(fio(d, rw, bs, nj, a.runtime, fio_json))
                for r in range(a.repeat):
                    t, d = backend
                    drop_caches()
                    cold[t].append(fio(d, rw, bs, nj, a.runtime, fio_json))
                    warm.setdefault(t, []).append(fio(d, rw, bs, nj, a.runtime, fio_json))
                warm, med = medians(warm), medians(cold)
                row = {"workload": f"{name} bs={bs} jobs={nj}", "cold_median_bps": med, "cold_runs_bps": cold,
                       "warm_bps": warm, "dlfs_over_ceiling_cold": med["dlfs"] / med["ceiling"],
                       "dlfs_over_backend_cold": med["dlfs"] / med["backend"]}
                results["rows"].append(row)
                log(f"{row['workload']}: cold dlfs {med['dlfs'] / 1e9:.2f} ceiling {med['ceiling'] / 1e9:.2f} "
                    f"backend {med['backend'] / 1e9:.2f} GB/s")

        if shutil.which("ior"):
            results["ior"] = run_ior(a, w, dlfsd, daemons)
        else:
            results["ior"] = "not on PATH, skipped"
            log("IOR: not on PATH, skipped")
        results["dlfs_memory"] = mount_stats(mnt_d)["memory"]

        if not a.skip_metadata:
            meta = os.path.join(w, f"meta-{a.metadata_files}x3K")
            ensure_dataset(meta, a.metadata_files, 3 << 10, 100)
            mnt_m = os.path.join(w, "mnt-meta")
            daemons.start("dlfsd-meta", dlfsd_argv(dlfsd, mnt_m, meta, os.path.join(w, "dlfsd-meta.sock"), name="m"),
                          mnt_m, lambda: loaded(mnt_m), os.path.join(w, "dlfsd-meta.log"))
            times = {"dlfs": [], "backend": []}
            for _ in range(a.repeat):
                for t, d in (("dlfs", os.path.join(mnt_m, "m/raw")), ("backend", meta)):
                    drop_caches()
                    times[t].append(walk_seconds(d))
            med = medians(times)
            results["metadata"] = {"files": a.metadata_files, "cold_seconds": times, "median_seconds": med,
                                   "dlfs_over_backend": med["dlfs"] / med["backend"]}
            log(f"find+stat of {a.metadata_files} files: dlfs {med['dlfs']:.2f}s backend {med['backend']:.2f}s")

    print()
    print(f"{'workload':<28} {'target':<8} {'cold MB/s':>10} {'warm MB/s':>10} {'dlfs/ceiling':>13} {'dlfs/backend':>13}")
    for row in results["rows"]:
        for t in ("dlfs", "ceiling", "backend"):
            extra = ""
            if t == "dlfs":
                extra = f" {row['dlfs_over_ceiling_cold']:13.2f} {row['dlfs_over_backend_cold']:13.2f}"
            print(f"{row['workload']:<28} {t:<8} {fmt_rate(row['cold_median_bps'][t]):>10} "
                  f"{fmt_rate(row['warm_bps'][t]):>10}{extra}")
    if "metadata" in results:
        m = results["metadata"]
        print(f"\nfind+stat, {m['files']} files of 3 KiB, cold: dlfs {m['median_seconds']['dlfs']:.2f}s, backend "
              f"{m['median_seconds']['backend']:.2f}s, ratio dlfs/backend {m['dlfs_over_backend']:.2f} (target <= 2)")
    mem = results["dlfs_memory"]
    print(f"dlfsd memory beyond the resident data: {mem['rss_beyond_resident_bytes'] / 2**20:.1f} MiB in all "
          f"(fixed overhead included); manifest and tables: {mem['metadata_bytes_per_sample']:.1f} B/sample")
    print(f"IOR: {results['ior']}")
    write_json(os.path.join(w, "results.json"), results, indent=2)
    print(f"results: {os.path.join(w, 'results.json')}")
    plots.save("throughput_vs_ceiling", results, a.plots or w,
               f"{nfiles} files of {a.file_size >> 10} KiB, {plots.machine()}")


if __name__ == "__main__":
    main()
