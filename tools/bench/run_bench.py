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
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

import plots

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size_arg(text):
    t = text.upper().removesuffix("IB").removesuffix("B")
    return int(float(t[:-1]) * UNITS[t[-1]]) if t[-1] in UNITS else int(t)


def log(msg):
    print(f"[bench] {msg}", flush=True)


SETTLE_S = 2.0  # seconds to wait after dropping caches (0.2 in --quick)


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    # Freeing gigabytes of page cache leaves the kernel busy for a moment
    # (measured here: whichever target ran right after the backend's cache
    # was dropped used twice the CPU); let it settle before measuring.
    time.sleep(SETTLE_S)


class Daemons:
    """Starts FUSE servers, always stops them and unmounts (also on errors/signals)."""

    def __init__(self):
        self.procs = []  # (Popen, mountpoint, name)

    def start(self, name, argv, mnt, ready, log_path, timeout=120):
        os.makedirs(mnt, exist_ok=True)
        logf = open(log_path, "w")
        p = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT)
        self.procs.append((p, mnt, name))
        deadline = time.time() + timeout
        while time.time() < deadline:
            if p.poll() is not None:
                sys.exit(f"{name} exited with {p.returncode} before it was ready; log:\n" + open(log_path).read())
            if ready():
                return p
            time.sleep(0.1)
        sys.exit(f"{name} not ready after {timeout}s; log:\n" + open(log_path).read())

    def stop_all(self):
        for p, mnt, name in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
            with open("/proc/mounts") as f:
                if f" {mnt} " in f.read():
                    subprocess.run(["fusermount3", "-u", "-z", mnt], check=False)
        self.procs = []


def dlfs_loaded(mnt):
    try:
        with open(os.path.join(mnt, ".dlfs/stats")) as f:
            s = json.load(f)
        # A dataset still scanning has no "load" yet (dlfsd mounts before it scans).
        if not all(d.get("load", {}).get("state") == "done" for d in s["datasets"]):
            return False
        return raw_overlays_settled(s)
    except (OSError, ValueError):
        return False


def raw_overlays_settled(stats):
    """Whether dlfsd is done with the overlays over raw/ (fs/kernel/raw_overlay.h): where
    its stats say the overlay is in effect ("mode" not "off"), it mounts one per
    dataset just after the dataset's load, and a measurement must not start with
    raw/ changing under it."""
    o = (stats.get("fuse") or {}).get("raw_overlay")
    if not isinstance(o, dict) or o.get("mode") == "off":  # off in effect: not root, allow_other off, or asked
        return True
    return len(o.get("mounted", [])) + o.get("failures", 0) >= len(stats["datasets"])


def dlfs_stats(mnt):
    with open(os.path.join(mnt, ".dlfs/stats")) as f:
        return json.load(f)


def fio(directory, rw, bs, jobs, runtime, out_json):
    """One fio run over every file under `directory`; returns aggregate bytes/s."""
    # invalidate=0: fio would otherwise drop each file's page cache before
    # reading it, and no run would ever be warm; cold comes from drop_caches.
    cmd = ["fio", "--name=bench", "--ioengine=psync", f"--rw={rw}", f"--bs={bs}", f"--opendir={directory}",
           f"--numjobs={jobs}", "--invalidate=0", "--group_reporting", "--output-format=json",
           f"--output={out_json}"]
    if rw == "randread":
        cmd += ["--time_based", f"--runtime={runtime}", "--norandommap"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out_json) as f:
        j = json.load(f)
    return sum(job["read"]["bw_bytes"] for job in j["jobs"])


def walk_seconds(directory):
    """find + stat of the whole tree (find -printf stats every entry)."""
    t0 = time.perf_counter()
    subprocess.run(["find", directory, "-printf", "%s %T@ %m\n"], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def ensure_dataset(path, count, size, dirs, jitter=0.0):
    marker = path + ".complete"
    if os.path.exists(marker):
        return
    shutil.rmtree(path, ignore_errors=True)
    cmd = ["/usr/bin/python3", os.path.join(SRC, "tools/gen_dataset.py"), "files", path, "--count", str(count),
           "--size", str(size), "--dirs", str(dirs), "--seed", "1"]
    if jitter:
        cmd += ["--size-jitter", str(jitter)]
    subprocess.run(cmd, check=True)
    open(marker, "w").close()


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
    daemons.start("dlfsd-ior", [dlfsd, "--mountpoint", mnt, "--backend", d, "--name", "i",
                                "--control-socket", os.path.join(w, "dlfsd-ior.sock")],
                  mnt, lambda: dlfs_loaded(mnt), os.path.join(w, "dlfsd-ior.log"))
    drop_caches()
    got = {"dlfs_mib_s": ior_read_mib_s(os.path.join(mnt, "i/raw/ior_file"), size, a.repeat)}
    drop_caches()
    got["backend_mib_s"] = ior_read_mib_s(os.path.join(d, "ior_file"), size, a.repeat)
    log(f"IOR read: dlfs {got['dlfs_mib_s']:.0f} MiB/s, backend {got['backend_mib_s']:.0f} MiB/s")
    return got


def fmt_rate(bps):
    return f"{bps / 1e6:9.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(SRC, "build"), help="meson build directory")
    ap.add_argument("--workdir", default="/tmp/dlfs-bench")
    ap.add_argument("--size", type=size_arg, default=2 << 30, help="dataset bytes (default 2G)")
    ap.add_argument("--file-size", type=size_arg, default=256 << 10, help="bytes per file (default 256K)")
    ap.add_argument("--jobs", default="1,2", help="fio numjobs values, comma-separated")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs per figure (median); even counts let the two mounts go first equally often")
    ap.add_argument("--runtime", type=int, default=5, help="seconds per random-read run")
    ap.add_argument("--metadata-files", type=int, default=50000, help="files of 3 KiB for the find+stat test")
    ap.add_argument("--quick", action="store_true", help="tiny smoke run (CI): 64 MiB, 2000 metadata files")
    ap.add_argument("--skip-random", action="store_true")
    ap.add_argument("--skip-metadata", action="store_true")
    ap.add_argument("--plots", help="directory for throughput_vs_ceiling.png (default: --workdir, by results.json)")
    a = ap.parse_args()
    if a.quick:
        a.size, a.metadata_files, a.repeat, a.runtime, a.jobs = 64 << 20, 2000, 1, 1, "1"
        global SETTLE_S
        SETTLE_S = 0.2
    if os.geteuid() != 0:
        sys.exit("run_bench.py: needs root (FUSE mounts, drop_caches)")
    for tool in ("fio", "fusermount3"):
        if not shutil.which(tool):
            sys.exit(f"run_bench.py: '{tool}' not found (run tools/install-deps.sh)")
    dlfsd = os.path.join(a.build, "fs/dlfsd")
    ceiling = os.path.join(a.build, "tools/bench/dlfs-bench-ceiling")
    for b in (dlfsd, ceiling):
        if not os.access(b, os.X_OK):
            sys.exit(f"run_bench.py: {b} not built (meson compile -C {a.build})")

    w = a.workdir
    os.makedirs(w, exist_ok=True)
    nfiles = max(1, a.size // a.file_size)
    data = os.path.join(w, f"data-{nfiles}x{a.file_size}")
    log(f"dataset: {nfiles} files of {a.file_size} bytes under {data}")
    ensure_dataset(data, nfiles, a.file_size, 16)
    jobs = [int(j) for j in a.jobs.split(",")]
    results = {"config": vars(a), "rows": []}
    daemons = Daemons()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        mnt_d, mnt_c = os.path.join(w, "mnt-dlfs"), os.path.join(w, "mnt-ceiling")
        daemons.start("dlfsd", [dlfsd, "--mountpoint", mnt_d, "--backend", data, "--name", "ds",
                                "--control-socket", os.path.join(w, "dlfsd.sock")],
                      mnt_d, lambda: dlfs_loaded(mnt_d), os.path.join(w, "dlfsd.log"))
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
                warm = {t: statistics.median(v) for t, v in warm.items()}
                med = {t: statistics.median(v) for t, v in cold.items()}
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
        results["dlfs_memory"] = dlfs_stats(mnt_d)["memory"]

        if not a.skip_metadata:
            meta = os.path.join(w, f"meta-{a.metadata_files}x3K")
            ensure_dataset(meta, a.metadata_files, 3 << 10, 100)
            mnt_m = os.path.join(w, "mnt-meta")
            daemons.start("dlfsd-meta", [dlfsd, "--mountpoint", mnt_m, "--backend", meta, "--name", "m",
                                         "--control-socket", os.path.join(w, "dlfsd-meta.sock")],
                          mnt_m, lambda: dlfs_loaded(mnt_m), os.path.join(w, "dlfsd-meta.log"))
            times = {"dlfs": [], "backend": []}
            for _ in range(a.repeat):
                for t, d in (("dlfs", os.path.join(mnt_m, "m/raw")), ("backend", meta)):
                    drop_caches()
                    times[t].append(walk_seconds(d))
            med = {t: statistics.median(v) for t, v in times.items()}
            results["metadata"] = {"files": a.metadata_files, "cold_seconds": times, "median_seconds": med,
                                   "dlfs_over_backend": med["dlfs"] / med["backend"]}
            log(f"find+stat of {a.metadata_files} files: dlfs {med['dlfs']:.2f}s backend {med['backend']:.2f}s")
    finally:
        daemons.stop_all()

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
    with open(os.path.join(w, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    print(f"results: {os.path.join(w, 'results.json')}")
    plots.save("throughput_vs_ceiling", results, a.plots or w,
               f"{nfiles} files of {a.file_size >> 10} KiB, {plots.machine()}")


if __name__ == "__main__":
    main()
