#!/usr/bin/python3
"""The Python client (python/dlfs) against its baselines, side by side in one
run; every figure printed is measured in this run (medians of --repeat).

  large   256 KiB samples, cold (drop_caches before each run, and a new epoch
          for each run): the client streaming rank 0 of W=1 (TarView.samples,
          its .index read included) against `dd bs=1M` of a view of the same
          dataset, and against the quick start's raw-view line (every file of
          raw/ read with 1 MiB reads); tarfile "r|" (what the quick start used
          before) for reference. Targets: client/dd >= 0.8, client/raw >= 0.5.
  small   3 KiB samples: the client streaming an epoch view against the same
          samples read one by one in the view's (shuffled) order with
          open/read/close, from the backend directory and from the mount's
          raw/ tree; cold (drop_caches) and warm. Target: client/files >= 10
          (cold).
  zerocopy  3 KiB samples, warm (dlfsd holds them; the backend files are in the
          page cache, read once before): the client reading through dlfsd's
          client socket (TarView(zero_copy=True).samples(), docs/client-protocol.md),
          its batches (SampleBatches, every sample's memoryview touched), and the
          client through the mount (zero_copy=False), against open/read/close of
          the backend files in the view's order. FUSE requests per sample of the
          socket path (dlfsd's counters over the control socket). Target:
          zero-copy samples / backend files >= 3 (warm).

usage: python_client_bench.py [--build DIR] [--workdir DIR] [--repeat 3] [--only large,small,zerocopy]
                              [--large-size 1G] [--small-count 50000] [--zerocopy-count 60000]
                              [--quick] [--json FILE]
"""
import os
import subprocess
import tarfile
import time

from benchlib import cli
from benchlib.client import dlfs
from benchlib.daemons import run_parts
from benchlib.datasets import ensure_dataset
from benchlib.readers import MiB, drop_caches, read_files
from benchlib.report import log, medians, paired_ratio, write_json
from benchlib.stats import ctl_stats, fuse_requests


def client_read(ds_dir, epoch):
    """(samples, bytes, seconds) of streaming rank 0 of W=1 with the client."""
    t0 = time.perf_counter()
    n = total = 0
    for _key, group in dlfs.TarView(ds_dir, epoch, 0, 1, zero_copy=False).samples():
        n += 1
        for data in group.values():
            total += len(data)
    return n, total, time.perf_counter() - t0


def zero_copy_read(ds_dir, epoch):
    """Seconds to iterate rank 0 of W=1 through the client socket, as (key, {ext: bytes})."""
    t0 = time.perf_counter()
    n = 0
    for _key, _group in dlfs.TarView(ds_dir, epoch, 0, 1, zero_copy=True).samples():
        n += 1
    return n, time.perf_counter() - t0


def zero_copy_batches(ds_dir, epoch, batch=256):
    """Seconds to iterate rank 0 of W=1 as SampleBatches, each sample's memoryview touched."""
    t0 = time.perf_counter()
    n = first_bytes = 0
    for b in dlfs.SampleBatches(ds_dir, epoch=epoch, rank=0, world_size=1, batch_size=batch):
        for mv in b.samples:
            first_bytes += mv[0] if len(mv) else 0  # touches the sample's memory
            n += 1
    return n, time.perf_counter() - t0


def dd_read(path):
    """(bytes, seconds) of `dd bs=1M` of a file."""
    t0 = time.perf_counter()
    subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=1M"], check=True, stderr=subprocess.DEVNULL)
    return os.path.getsize(path), time.perf_counter() - t0


def tarfile_read(path):
    """(bytes, seconds) of tarfile's stream mode, as tools/quickstart.sh read views before."""
    t0 = time.perf_counter()
    total = 0
    with tarfile.open(path, mode="r|", bufsize=MiB) as t:
        for m in t:
            total += len(t.extractfile(m).read())
    return total, time.perf_counter() - t0


def tree_read(root):
    """(bytes, seconds) of every file under root read with 1 MiB reads, in
    sorted order: the quick start's raw-view line."""
    paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
    buf = bytearray(MiB)
    t0 = time.perf_counter()
    total = 0
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        while n := os.readv(fd, [buf]):
            total += n
        os.close(fd)
    return total, time.perf_counter() - t0


def bench_large(a, daemons, dlfsd):
    nfiles = a.large_size // (256 << 10)
    data = os.path.join(a.workdir, f"data-{nfiles}x262144")
    ensure_dataset(data, nfiles, 256 << 10, 16)
    mnt = daemons.serve(dlfsd, a.workdir, "pyclient-large", data).mnt
    ds = os.path.join(mnt, "ds")
    runs = {"client": [], "dd": [], "raw": [], "tarfile": []}
    dd_read(os.path.join(ds, "epochs/999/1/0.tar"))  # untimed: the first read after the load runs slow
    for rep in range(a.repeat):
        epochs = {"client": 10 * rep + 1, "dd": 10 * rep + 2, "tarfile": 10 * rep + 3}  # never read before: cold
        for e in epochs.values():
            os.stat(os.path.join(ds, f"epochs/{e}/1/0.tar"))  # the plan and the tar layout, before the clock
        order = ["client", "dd", "raw", "tarfile"] if rep % 2 == 0 else ["raw", "dd", "client", "tarfile"]
        for what in order:
            drop_caches()
            if what == "client":
                _, nbytes, secs = client_read(ds, epochs["client"])
            elif what == "raw":
                nbytes, secs = tree_read(os.path.join(ds, "raw"))
            else:
                fn = dd_read if what == "dd" else tarfile_read
                nbytes, secs = fn(os.path.join(ds, f"epochs/{epochs[what]}/1/0.tar"))
            runs[what].append(nbytes / secs)
        log("large rep %d: %s" % (rep, ", ".join(f"{k} {v[-1] / 1e6:,.0f} MB/s" for k, v in runs.items())))
    daemons.stop_all()
    med = medians(runs)
    paired = {f"client/{w}": paired_ratio(runs["client"], runs[w]) for w in ("dd", "raw")}
    return {"files": nfiles, "bps": med, "runs": runs, "ratios": paired}


def bench_small(a, daemons, dlfsd):
    data = os.path.join(a.workdir, f"meta-{a.small_count}x3K")
    ensure_dataset(data, a.small_count, 3 << 10, 100)
    mnt = daemons.serve(dlfsd, a.workdir, "pyclient-small", data).mnt
    ds = os.path.join(mnt, "ds")
    rows = {f"{w}_{p}": [] for w in ("client", "backend", "raw") for p in ("cold", "warm")}
    n = 0
    client_read(ds, 999)  # untimed: the first read after the load runs slow
    for rep in range(a.repeat):
        epoch = 100 + rep
        names = dlfs.ViewIndex(os.path.join(ds, f"epochs/{epoch}/1/0.index")).names  # the shuffled order
        n = len(names)
        for what in (["client", "backend", "raw"] if rep % 2 == 0 else ["raw", "backend", "client"]):
            drop_caches()
            for phase in ("cold", "warm"):
                if what == "client":
                    _, _, secs = client_read(ds, epoch)
                else:
                    secs = read_files(data if what == "backend" else os.path.join(ds, "raw"), names)
                rows[f"{what}_{phase}"].append(n / secs)
        log("small rep %d: %s" % (rep, ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in rows.items())))
    daemons.stop_all()
    return {"samples": n, "samples_per_s": medians(rows), "runs": rows,
            "ratios": {f"client/{w} {p}": paired_ratio(rows[f"client_{p}"], rows[f"{w}_{p}"])
                       for w in ("backend", "raw") for p in ("cold", "warm")}}


def bench_zerocopy(a, daemons, dlfsd):
    data = os.path.join(a.workdir, f"meta-{a.zerocopy_count}x3K")
    ensure_dataset(data, a.zerocopy_count, 3 << 10, 100)
    served = daemons.serve(dlfsd, a.workdir, "pyclient-zerocopy", data)
    ds = os.path.join(served.mnt, "ds")
    ctl = os.path.join(a.build, "tools/ctl/dlfs-ctl")
    rows = {w: [] for w in ("zero_copy", "zero_copy_batches", "mount", "backend")}
    zero_copy_read(ds, 999)  # untimed: the client's first epoch (maps the memory)
    names = dlfs.ViewIndex(os.path.join(ds, "epochs/999/1/0.index")).names
    read_files(data, names)  # untimed: the backend files into the page cache
    fuse = None
    for rep in range(a.repeat):
        epoch = 200 + rep
        names = dlfs.ViewIndex(os.path.join(ds, f"epochs/{epoch}/1/0.index")).names  # the shuffled order
        n = len(names)
        order = list(rows) if rep % 2 == 0 else list(reversed(rows))
        for what in order:
            if what == "zero_copy":
                before = fuse_requests(ctl_stats(ctl, served.sock))
                got, secs = zero_copy_read(ds, epoch)
                after = fuse_requests(ctl_stats(ctl, served.sock))
                fuse = {k: (after.get(k, 0) - before.get(k, 0)) / n for k in after if after.get(k, 0) != before.get(k, 0)}
            elif what == "zero_copy_batches":
                got, secs = zero_copy_batches(ds, epoch)
            elif what == "mount":
                got, _, secs = client_read(ds, epoch)
            else:
                got, secs = n, read_files(data, names)
            if got != n:
                raise SystemExit(f"python_client_bench.py: {what} read {got} samples of {n}")
            rows[what].append(n / secs)
        log("zerocopy rep %d: %s" % (rep, ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in rows.items())))
    daemons.stop_all()
    return {"samples": n, "samples_per_s": medians(rows), "runs": rows, "fuse_per_sample": fuse,
            "ratios": {f"{w}/backend": paired_ratio(rows[w], rows["backend"])
                       for w in ("zero_copy", "zero_copy_batches", "mount")}}


def report(res):
    print()
    if "large" in res:
        r, m = res["large"], res["large"]["bps"]
        print(f"256 KiB samples, {r['files']} per epoch, cold (MB/s, median):")
        print(f"  python client (dlfs.TarView)   {m['client'] / 1e6:>8,.0f}")
        print(f"  dd bs=1M of a view             {m['dd'] / 1e6:>8,.0f}")
        print(f"  raw/ tree, 1 MiB reads         {m['raw'] / 1e6:>8,.0f}   (quick start's raw-view line)")
        print(f"  tarfile 'r|' of a view         {m['tarfile'] / 1e6:>8,.0f}   (quick start's view line before)")
        print(f"  client / dd   {r['ratios']['client/dd']:.2f}x (target >= 0.8)   "
              f"client / raw  {r['ratios']['client/raw']:.2f}x (target >= 0.5)   (medians of per-run ratios)")
    if "small" in res:
        r, m = res["small"], res["small"]["samples_per_s"]
        print(f"3 KiB samples, {r['samples']} per epoch (samples/s, median):")
        print(f"  python client (dlfs.TarView)      cold {m['client_cold']:>10,.0f}   warm {m['client_warm']:>10,.0f}")
        print(f"  backend files, open/read/close    cold {m['backend_cold']:>10,.0f}   warm {m['backend_warm']:>10,.0f}")
        print(f"  raw/ files, open/read/close       cold {m['raw_cold']:>10,.0f}   warm {m['raw_warm']:>10,.0f}")
        for k, v in r["ratios"].items():
            print(f"  {k:<24} {v:>6.1f}x" + ("   (target >= 10)" if k.endswith("cold") else ""))
    if "zerocopy" in res:
        r, m = res["zerocopy"], res["zerocopy"]["samples_per_s"]
        print(f"3 KiB samples, {r['samples']} per epoch, warm (samples/s, median):")
        print(f"  client socket, TarView.samples()   {m['zero_copy']:>10,.0f}")
        print(f"  client socket, SampleBatches       {m['zero_copy_batches']:>10,.0f}")
        print(f"  client through the mount           {m['mount']:>10,.0f}")
        print(f"  backend files, open/read/close     {m['backend']:>10,.0f}   (page-cached)")
        for k, v in r["ratios"].items():
            print(f"  {k:<28} {v:>6.2f}x" + ("   (target >= 3)" if k == "zero_copy/backend" else ""))
        fuse = r["fuse_per_sample"]
        print(f"  FUSE requests per sample on the socket path: "
              f"{', '.join(f'{k} {v:.4f}' for k, v in fuse.items()) if fuse else '0'}")


def main():
    ap = cli.parser(__doc__, workdir="/tmp/dlfs-bench-full", repeat=3, quick="tiny smoke run",
                    json="write all results here", only="large,small,zerocopy")
    ap.add_argument("--large-size", type=cli.size_arg, default=1 << 30)
    ap.add_argument("--small-count", type=int, default=50000)
    ap.add_argument("--zerocopy-count", type=int, default=60000)
    a = ap.parse_args()
    if a.quick:
        a.repeat, a.small_count, a.large_size, a.workdir = 1, 3000, 64 * MiB, "/tmp/dlfs-bench-quick"
        a.zerocopy_count = 3000
    cli.require_root(ap, "FUSE mounts, drop_caches")
    dlfsd = cli.built(ap, a.build, "fs/dlfsd")
    os.makedirs(a.workdir, exist_ok=True)
    res = run_parts(a, {"large": bench_large, "small": bench_small, "zerocopy": bench_zerocopy}, dlfsd)
    report(res)
    if a.json:
        write_json(a.json, res)


if __name__ == "__main__":
    main()
