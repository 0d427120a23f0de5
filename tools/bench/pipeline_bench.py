#!/usr/bin/python3
"""PyTorch pipeline benchmark (issue 15): samples/s of a training input pipeline as a
user runs it, DLFS against plain files, on a local backend and on real network
filesystem mounts of the same directory (NFS, sshfs); every figure printed is
measured in this run.

Each measurement is one PyTorch DataLoader (num_workers=--workers, batch_size=--batch)
run for two epochs: `drop_caches` right before epoch 1 (the backend's and every
mount's page cache and dentries are gone; DLFS's memory is not), epoch 2 at once
after it. An epoch is timed from creating the loader's iterator to its last batch
(worker start-up included, as in training). Variants, per backend:

  files  map-style Dataset over the backend's files, shuffle=True: __getitem__ is
         `with open(path, "rb") as f: return f.read()`, the usual user code.
  raw    the same Dataset over a dlfsd's raw/ tree, the dlfsd mounted over that
         backend (the local directory, the NFS mount or the sshfs mount).
  files-rf, raw-rf  the same two with `dlfs.read_file(path)` as __getitem__
         (os.open/os.read). Python's open() before 3.14 calls isatty(), an
         ioctl the kernel forwards to a FUSE daemon at every open: one round
         trip per sample on raw/ that read_file does not make.
  views  streaming epoch views with the Python client (python/dlfs): an
         IterableDataset in which DataLoader worker k reads rank k of a W=workers view,
         `dlfs.TarView(ds, e, k, W).samples()` (epochs/<e>/<W>/<k>.tar); epoch 2 reads
         epoch e+1, a new shuffled view.
  views-b  the same views read as whole batches: worker k yields
         `dlfs.TarView(ds, e, k, W).batches(--batch)` (one pread per run of samples,
         member offsets from the view's .index, the bytes packed per extension),
         DataLoader batch_size=None: no per-sample Python step but a slice.
  zero-copy  the client socket (docs/client-protocol.md): worker k reads rank k of a
         W=workers view as `dlfs.SampleBatches(ds, e, k, W, --batch)`, whose
         `packed()` gathers each batch's samples straight from dlfsd's memory
         (mapped read-only) into one array; DataLoader batch_size=None. No FUSE
         request and no system call per sample.
  ceiling  no storage at all: worker k yields ready-made batches of --batch zero
         samples of the sample size (one bytes object reused), packed by the same
         collate as views-b: what the DataLoader itself (workers, shared memory,
         the queue to the training process) can move on this machine.
  bin    `.bin` batches: worker k reads rank k's `<k>.bin` (`dlfs.BinView` gives the
         path and record size) with one pread per batch of --batch records, split
         into per-sample bytes. `.bin` exists only for fixed-record datasets, so this
         variant reads a twin dataset of the same count and sample size in the fixed
         format (tools/gen_dataset.py fixed, ~256 MiB files, format=fixed); with
         --large-jitter > 0 the large samples vary in size and `bin` is n/a there.

Every variant yields the samples' bytes; the collate (`to_batch`) packs a batch
into one uint8 tensor (the samples back to back) plus a tensor of their lengths,
allocated in shared memory inside the worker as PyTorch's default_collate does, so
a batch reaches the training process without being pickled through a pipe (a list
of bytes would be: 28 MB per batch of 110 KiB samples, which then limits every
variant alike). No decoding: the benchmark measures I/O and the per-sample path
to Python. Sample counts are checked per epoch.

Datasets (cached under --workdir/data): --small-count files of --small-size (default
200,000 x 3 KiB) and --large-count of --large-size (60,000 x 110 KiB, fixed size by
default), tools/gen_dataset.py via benchlib/datasets.py. Shared backends serve
--workdir/data over loopback and are set up and torn down by this script:
  nfs    tools/bench/nfs_backend.py. Where the kernel has nfsd and an NFS client:
         nfs-kernel-server, NFSv4.2, read-only, nconnect=4, default attribute
         caching; --latency-ms adds netem delay in a network namespace. Elsewhere
         (ganesha mode): nfs-ganesha on 127.0.0.1 and the build's
         tools/bench/dlfs-bench-nfsmount (libnfs under FUSE, NFSv4.0, the Linux
         client's caching rules: an OPEN and CLOSE per file, attributes 3 s, names
         30 s, page cache kept while unchanged); no added latency there.
  sshfs  tools/bench/sshfs_backend.py: a private sshd on 127.0.0.1 and a read-only
         sshfs mount, every open an SFTP round trip, NFS-like attribute caching.
         Runs wherever FUSE does (the NFS stand-in on kernels without NFS).
By default the backends are local plus every shared backend this machine can run
(one line on stderr says why one is left out); a shared backend named in --backends
that cannot run is an error (exit 77).

Repetitions (--repeat, default 3) alternate the order of backends and of variants;
printed figures are medians, ratios are computed per repetition (against `files` of
the same backend and against `files` of the local backend) and then medianed. FUSE
requests per sample come from the dlfsd's stats ("fuse": {"requests": per-opcode
counts}, read with the build's dlfs-ctl over the control socket, else from
/.dlfs/stats) when it has them, else n/a. Each run in the JSON also says whether
the dlfsd had raw/ under its overlay ("raw_overlay": fs/kernel/raw_overlay.h, on by default
as root; --dlfsd-arg=--raw-overlay=off turns it off): Python's open() then sends
no isatty() ioctl, the overlay's lookup a getxattr instead.

usage: pipeline_bench.py [--build DIR] [--dlfsd-arg ARG]... [--workdir DIR] [--backends local,nfs,sshfs]
                         [--variants files,raw,views,bin] [--sizes small,large]
                         [--small-count 200000] [--small-size 3K] [--large-count 60000]
                         [--large-size 110K] [--large-jitter 0] [--repeat 3] [--workers 2]
                         [--batch 256] [--nfs-vers 4.2] [--latency-ms 0] [--quick] [--json FILE]
"""
import math
import os
import statistics
import sys
import time

from benchlib import backends as shared, cli
from benchlib.backends import SHARED
from benchlib.client import dlfs
from benchlib.daemons import Daemons, dlfsd_argv, loaded
from benchlib.datasets import ensure_dataset, ensure_fixed
from benchlib.readers import human, drop_caches, files_under, set_settle
from benchlib.report import log, write_json
from benchlib.stats import fuse_requests, per_sample, raw_under_overlay, try_stats
from benchlib.teardown import Teardown

try:
    import torch
    from torch.utils.data import DataLoader

    from benchlib.loaders import (BinBatches, FilesDataset, NoIoBatches, ViewBatches, ViewStream, ZeroCopyBatches,
                                  packed_to_batch, run_epoch, to_batch)
except ImportError:
    sys.exit("pipeline_bench.py: needs PyTorch: apt-get install python3-torch (tools/install-deps.sh)")

VARIANTS = ("files", "raw", "files-rf", "raw-rf", "views", "views-b", "zero-copy", "bin", "ceiling")
LABELS = {"files": "map-style files", "raw": "map-style raw/", "files-rf": "files, read_file", "raw-rf": "raw/, read_file",
          "views": "views (TarView)", "views-b": "views, batches()", "zero-copy": "client socket", "bin": ".bin batches",
          "ceiling": "no I/O (ceiling)"}
MAP_STYLE = ("files", "raw", "files-rf", "raw-rf")
ON_DLFS = ("raw", "raw-rf", "views", "views-b", "zero-copy", "bin")
BACKENDS = ("local",) + SHARED
# Issue 15's targets: (variant, backend or None for any, against, size key, epoch or None for both) -> minimum.
# The NFS targets apply to every shared backend (NFS, and sshfs as another network filesystem).
TARGETS = [
    ("raw", "local", "local_files", None, 1, 0.8),
    ("raw", "local", "local_files", None, 2, 1.0),
    ("raw-rf", "local", "local_files", None, 1, 0.8),
    ("raw-rf", "local", "local_files", None, 2, 1.0),
] + [t for v in ("views", "views-b") for t in (
    (v, None, "local_files", "small", None, 3.0),
    (v, None, "local_files", "large", None, 1.0),
)] + [t for v in ("views", "views-b") for b in SHARED for t in ((v, b, "backend_files", "small", None, 5.0),
                                                                 (v, b, "backend_files", "large", None, 2.0))] + [
    # Issue 34's: the client socket against local files and the no-I/O ceiling.
    ("zero-copy", None, "ceiling", "small", None, 0.8),
    ("zero-copy", None, "local_files", "small", 1, 3.0),
    ("zero-copy", None, "local_files", "small", 2, 2.0),
    ("zero-copy", None, "local_files", "large", None, 1.3),
]


class Size:
    """One sample-size dataset: the files, its fixed-record twin, and the names."""

    def __init__(self, key, count, size, jitter, data_dir):
        self.key, self.count, self.size, self.jitter = key, count, size, jitter
        self.label = f"{count} x {human(size)}" + (f" (+-{jitter:g})" if jitter else "")
        self.files_rel = f"files-{count}x{human(size)}" + (f"-j{jitter:g}" if jitter else "")
        self.fixed_rel = None if jitter else f"fixed-{count}x{human(size)}"
        self.data_dir = data_dir
        self.names = []

    def prepare(self, want_bin):
        path = os.path.join(self.data_dir, self.files_rel)
        ensure_dataset(path, self.count, self.size, 100, self.jitter)
        self.names = files_under(path)
        if len(self.names) != self.count:
            sys.exit(f"pipeline_bench.py: {path} has {len(self.names)} files, expected {self.count}: delete it and "
                     f"{path}.complete to regenerate")
        if want_bin and self.fixed_rel:
            ensure_fixed(os.path.join(self.data_dir, self.fixed_rel), self.count, self.size)


class DaemonSlot:
    """At most one dlfsd at a time (the large datasets take GBs of memory each)."""

    def __init__(self, a, daemons):
        self.a, self.daemons, self.key, self.mnt, self.sock = a, daemons, None, None, None

    def get(self, backend, root, size, fixed):
        key = (backend, size.key, fixed)
        if key == self.key:
            return self.mnt
        self.stop()
        rel = size.fixed_rel if fixed else size.files_rel
        tag = f"{backend}-{size.key}-{'fixed' if fixed else 'files'}"
        mnt, sock = os.path.join(self.a.workdir, f"mnt-{tag}"), os.path.join(self.a.workdir, f"{tag}.sock")
        extra = (["--format", "fixed", "--record-size", str(size.size)] if fixed else []) + self.a.dlfsd_arg
        argv = dlfsd_argv(self.a.dlfsd, mnt, os.path.join(root, rel), sock, extra, seed=1)
        t0 = time.time()
        self.daemons.start("dlfsd", self.a.run_prefix.get(backend, []) + argv, mnt, lambda: loaded(mnt),
                           os.path.join(self.a.workdir, f"dlfsd-{tag}.log"), timeout=1800)
        log(f"dlfsd over {backend} {rel} loaded in {time.time() - t0:.1f} s")
        self.key, self.mnt, self.sock = key, mnt, sock
        return mnt

    def stop(self):
        self.daemons.stop_all()
        self.key = self.mnt = self.sock = None


def measure(a, slot, backend, root, size, variant, rep):
    """Two epochs of one variant; returns [(epoch, samples, seconds, fuse per sample)]."""
    mnt = None
    if variant in ("raw", "raw-rf", "views", "views-b", "zero-copy"):
        mnt = slot.get(backend, root, size, fixed=False)
    elif variant == "bin":
        mnt = slot.get(backend, root, size, fixed=True)
    loader_kw = dict(num_workers=a.workers, collate_fn=to_batch)
    ds_dir = os.path.join(mnt, "ds") if mnt else None
    if variant in MAP_STYLE:
        on_backend = variant.startswith("files")
        base = os.path.join(root, size.files_rel) if on_backend else os.path.join(ds_dir, "raw")
        ds = FilesDataset(base, size.names, dlfs.read_file if variant.endswith("-rf") else None)
        make = lambda _e: DataLoader(ds, batch_size=a.batch, shuffle=True, **loader_kw)  # noqa: E731
        expect = size.count
    else:
        expect = a.workers * math.ceil(size.count / a.workers)  # ranks pad to ceil(N/W) (remainder = pad)
        if variant == "views":
            make = lambda e: DataLoader(ViewStream(ds_dir, e), batch_size=a.batch, **loader_kw)  # noqa: E731
        elif variant == "ceiling":
            make = lambda _e: DataLoader(NoIoBatches(size.count, size.size, a.batch), batch_size=None,  # noqa: E731
                                         num_workers=a.workers, collate_fn=packed_to_batch)
        elif variant == "zero-copy":
            make = lambda e: DataLoader(ZeroCopyBatches(ds_dir, e, a.batch), batch_size=None,  # noqa: E731
                                        num_workers=a.workers, collate_fn=packed_to_batch)
        elif variant == "views-b":
            make = lambda e: DataLoader(ViewBatches(ds_dir, e, a.batch), batch_size=None,  # noqa: E731
                                        num_workers=a.workers, collate_fn=packed_to_batch)
        else:
            # batch_size=None: the dataset yields whole batches, which collate_fn packs.
            make = lambda e: DataLoader(BinBatches(ds_dir, e, a.batch), batch_size=None, **loader_kw)  # noqa: E731
    out = []
    drop_caches()
    for epoch in (1, 2):
        view_epoch = 2 * rep + epoch - 1  # a view never read before in this daemon
        before = fuse_requests(try_stats(a.ctl, slot.sock, mnt)) if mnt else None
        n, dt = run_epoch(make(view_epoch))
        stats = try_stats(a.ctl, slot.sock, mnt) if mnt else None
        after = fuse_requests(stats)
        if n != expect:
            sys.exit(f"pipeline_bench.py: {backend} {variant} {size.label} epoch {epoch} yielded {n} samples, "
                     f"expected {expect}")
        out.append((epoch, n, dt, per_sample(before, after, n), raw_under_overlay(stats)))
    return out


def summarize(a, sizes, runs):
    """Medians of samples/s and of per-repetition ratios, per (size, backend, variant, epoch)."""
    by = {(r["size"], r["backend"], r["variant"], r["epoch"], r["rep"]): r for r in runs}
    summary = {}
    for s in sizes:
        for b in a.backends:
            for v in a.variants:
                for e in (1, 2):
                    reps = [r for r in runs if (r["size"], r["backend"], r["variant"], r["epoch"]) == (s.key, b, v, e)]
                    if not reps:
                        continue
                    cell = {"samples_s": statistics.median(r["samples_s"] for r in reps)}
                    for against, ref_backend, ref_variant in (("backend_files", b, "files"),
                                                              ("local_files", "local", "files"),
                                                              ("ceiling", b, "ceiling")):
                        ratios = []
                        for r in reps:
                            ref = by.get((s.key, ref_backend, ref_variant, e, r["rep"]))
                            if ref:
                                ratios.append(r["samples_s"] / ref["samples_s"])
                        cell[f"ratio_{against}"] = statistics.median(ratios) if ratios else None
                    fuse = [r["fuse_per_sample"] for r in reps if r["fuse_per_sample"]]
                    cell["fuse_per_sample"] = ({k: statistics.median(f.get(k, 0) for f in fuse) for k in fuse[0]}
                                               if fuse else None)
                    summary.setdefault(s.key, {}).setdefault(b, {}).setdefault(v, {})[f"epoch{e}"] = cell
    return summary


def targets_for(size_key, backend, variant, against, epoch):
    for v, b, ag, sk, ep, minimum in TARGETS:
        if v == variant and b in (None, backend) and ag == against and sk in (None, size_key) and ep in (None, epoch):
            return minimum
    return None


def fmt_ratio(x, target):
    if x is None:
        return f"{'n/a':>7}"
    s = f"{x:6.2f}x"
    if target is not None:
        s += f" (>={target:g} {'ok' if x >= target else 'MISS'})"
    return s


def fmt_fuse(f):
    if not f:
        return "n/a"
    return " ".join(f"{k} {v:.2f}" if v >= 0.1 else f"{k} {v:.3f}" for k, v in f.items() if v >= 0.0005) or "none"


def report(a, sizes, summary):
    print()
    print(f"PyTorch DataLoader, {a.workers} workers, batch {a.batch}, 2 epochs (drop_caches before epoch 1); "
          f"samples/s: median of {a.repeat}; ratios: median of per-repetition ratios")
    for s in sizes:
        print(f"\n== {s.label} samples ==")
        print(f"{'backend':<8}{'variant':<17}{'epoch':>5}{'samples/s':>11}  {'/ same-backend files':<27}"
              f"{'/ local files':<27}{'/ no-I/O ceiling':<27}FUSE requests per sample")
        for b in a.backends:
            for v in a.variants:
                cells = summary.get(s.key, {}).get(b, {}).get(v)
                if not cells:
                    if v == "bin" and not s.fixed_rel:
                        print(f"{b:<8}{LABELS[v]:<17}{'':>5}{'n/a':>11}  (variable-size samples: no .bin view)")
                    continue
                for e in (1, 2):
                    c = cells[f"epoch{e}"]
                    rb = fmt_ratio(c["ratio_backend_files"], targets_for(s.key, b, v, "backend_files", e))
                    rl = fmt_ratio(c["ratio_local_files"], targets_for(s.key, b, v, "local_files", e))
                    rc = fmt_ratio(c.get("ratio_ceiling"), targets_for(s.key, b, v, "ceiling", e))
                    print(f"{b:<8}{LABELS[v] if e == 1 else '':<17}{e:>5}{c['samples_s']:>11,.0f}  {rb:<27}{rl:<27}{rc:<27}"
                          f"{fmt_fuse(c['fuse_per_sample']) if v in ON_DLFS else ''}")


def parse_args():
    ap = cli.parser(__doc__, workdir="/tmp/dlfs-bench-pipeline", repeat=3, quick="tiny smoke run (seconds per backend)",
                    json="write every run and the summary here", build="the build directory whose fs/dlfsd runs")
    ap.add_argument("--dlfsd-arg", action="append", default=[], metavar="ARG",
                    help="one more dlfsd flag, e.g. --dlfsd-arg=--view-drop-behind=0 (repeatable): the same "
                         "build under another setting, in a second run")
    ap.add_argument("--backends", help="comma-separated, of local,nfs,sshfs (default: local and every shared "
                    "backend this machine can run)")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--sizes", default="small,large")
    ap.add_argument("--small-count", type=int, default=200000)
    ap.add_argument("--small-size", type=cli.size_arg, default=3 << 10)
    ap.add_argument("--large-count", type=int, default=60000)
    ap.add_argument("--large-size", type=cli.size_arg, default=110 << 10)
    ap.add_argument("--large-jitter", type=float, default=0.0,
                    help="large sample sizes vary by +-this fraction (then .bin is n/a for them)")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers (= W of the views)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--nfs-vers", default="4.2", choices=["4.2", "4.1", "4", "3"],
                    help="NFS version of the kernel mode (the ganesha mode's client speaks 4.0)")
    ap.add_argument("--latency-ms", type=float, default=0,
                    help="NFS: added round trip (netem in a netns; kernel mode only)")
    a = ap.parse_args()
    if a.quick:
        a.repeat, a.small_count, a.large_count = 1, 2000, 300
        set_settle(0.2)
    a.backends_given = a.backends is not None
    a.backends = [b for b in (a.backends or ",".join(BACKENDS)).split(",") if b]
    a.variants = [v for v in a.variants.split(",") if v]
    a.sizes = [s for s in a.sizes.split(",") if s]
    for name, got, allowed in (("--backends", a.backends, BACKENDS), ("--variants", a.variants, VARIANTS),
                               ("--sizes", a.sizes, ("small", "large"))):
        bad = [x for x in got if x not in allowed]
        if bad or not got:
            ap.error(f"{name}: {','.join(bad) or 'empty'} is not a list of {', '.join(allowed)}")
    if a.repeat < 1 or a.workers < 1 or a.batch < 1:
        ap.error("--repeat, --workers and --batch must be at least 1")
    if "files" not in a.variants:
        a.variants.insert(0, "files")  # every ratio is against it
    a.dlfsd = cli.built(ap, a.build, "fs/dlfsd")
    a.ctl = os.path.join(a.build, "tools/ctl/dlfs-ctl")
    a.ctl = a.ctl if os.access(a.ctl, os.X_OK) else None  # else stats through the mount
    cli.require_root(ap, "FUSE, NFS and sshfs mounts, drop_caches")
    a.workdir = os.path.abspath(a.workdir)
    return a


def choose_backends(a):
    """Named shared backends must run (else exit 77); by default the ones that cannot are left out."""
    for b in [b for b in a.backends if b in SHARED]:
        reason = shared.unavailable_reason(b, a.build, a.latency_ms)
        if not reason:
            continue
        if a.backends_given:
            print(f"pipeline_bench.py: {b} backend unavailable: {reason} (leave it out of --backends)",
                  file=sys.stderr)
            sys.exit(77)
        print(f"pipeline_bench.py: skipping the {b} backend: {reason}", file=sys.stderr)
        a.backends.remove(b)


def main():
    a = parse_args()
    choose_backends(a)
    if a.latency_ms > 0 and "nfs" not in a.backends:
        sys.exit("pipeline_bench.py: --latency-ms applies to the nfs backend only, which does not run here")
    data_dir = os.path.join(a.workdir, "data")
    os.makedirs(data_dir, exist_ok=True)
    specs = {"small": (a.small_count, a.small_size, 0.0), "large": (a.large_count, a.large_size, a.large_jitter)}
    sizes = [Size(k, *specs[k], data_dir) for k in a.sizes]
    for s in sizes:
        s.prepare("bin" in a.variants)
    torch.set_num_threads(1)
    runs = []
    # Left last-first, with signals held off: a signal or a dying DataLoader
    # worker must not cut short the daemons' stop and then the mounts' teardown.
    with Teardown() as td:
        roots = {"local": data_dir}
        a.run_prefix = {}
        a.mount_options = {}
        for b in [b for b in a.backends if b in SHARED]:
            m = td.enter_context(shared.mount(b, data_dir, os.path.join(a.workdir, f"mnt-{b}"), a.build, a.nfs_vers,
                                              a.latency_ms))
            roots[b], a.run_prefix[b] = m.mountpoint, m.run_prefix
            a.mount_options[b] = m.options
        slot = DaemonSlot(a, td.enter_context(Daemons()))
        for rep in range(a.repeat):
            backends = a.backends if rep % 2 == 0 else a.backends[::-1]
            variants = a.variants if rep % 2 == 0 else a.variants[::-1]
            for s in sizes:
                for b in backends:
                    for v in variants:
                        if v == "bin" and not s.fixed_rel:
                            continue
                        for epoch, n, dt, fuse, overlay in measure(a, slot, b, roots[b], s, v, rep):
                            runs.append({"rep": rep, "size": s.key, "backend": b, "variant": v, "epoch": epoch,
                                         "samples": n, "seconds": dt, "samples_s": n / dt, "fuse_per_sample": fuse,
                                         "raw_overlay": overlay})
                            log(f"rep {rep} {s.label} {b} {v} epoch {epoch}: {n / dt:,.0f} samples/s")
                    slot.stop()
    summary = summarize(a, sizes, runs)
    report(a, sizes, summary)
    if a.json:
        config = {k: getattr(a, k) for k in ("backends", "variants", "repeat", "workers", "batch", "nfs_vers",
                                             "latency_ms", "build")}
        config["sizes"] = {s.key: {"count": s.count, "size": s.size, "jitter": s.jitter, "label": s.label,
                                   "bin": bool(s.fixed_rel)} for s in sizes}
        config["mount_options"] = a.mount_options
        targets = [dict(zip(("variant", "backend", "against", "size", "epoch", "minimum"), t)) for t in TARGETS]
        write_json(a.json, {"config": config, "targets": targets, "runs": runs, "summary": summary})


if __name__ == "__main__":
    main()
