#!/usr/bin/python3
"""Loaders benchmark (issue 33): DLFS against the data loaders users would pick
instead, in one run, on the same samples, the same backends and the same
consumer as tools/bench/pipeline_bench.py: --workers workers (2), batch --batch
(256), two epochs, `drop_caches` right before epoch 1 (the backend's and every
mount's page cache and dentries are gone; a dlfsd's memory is not), epoch 2 at
once after it. Every figure printed is measured in this run.

Variants (benchlib/peers.py, peers_dali.py, peers_ffcv.py say how each is run):
  dlfs-views      DLFS epoch views through python/dlfs: DataLoader worker k
                  streams rank k of a W=workers view (dlfs.TarView.samples)
  dlfs-views-wds  the webdataset library reading the same view files, worker k rank k
  dlfs-raw        map-style Dataset over a dlfsd's raw/, shuffle=True, dlfs.read_file
  files           map-style Dataset over the backend's files, shuffle=True, open().read()
  mosaic          Mosaic Streaming: StreamingDataset(local=<MDS shards in the backend>,
                  shuffle=True), its default shuffle algorithm (py1e)
  wds-1k, wds-10k WebDataset over tar shards in the backend: every shard shuffled,
                  then a sample shuffle buffer of 1,000 / 10,000
  dali-file       DALI fn.readers.file over the backend's files, random_shuffle=True (CPU,
                  --workers threads, its own prefetching)
  dali-tfrecord   DALI fn.readers.tfrecord over TFRecord shards + .idx, random_shuffle=True
  ffcv            FFCV Loader over a .beton, OrderOption.RANDOM, --workers threads; runs
                  only with --ffcv-python (a Python with ffcv: see
                  tools/bench/README.md), else left out with one line saying so
"Peers" are the variants not on DLFS. The DLFS variants share one dlfsd per
(repetition, size, backend), serving the files dataset from that backend; it
loads the dataset into its memory before their epochs (after drop_caches:
cold), timed apart, and the report also gives their epoch 1 with that load
counted in. It is stopped before the peers run.

Datasets (cached under --workdir/data; tools/gen_dataset.py via
benchlib/datasets.py, as pipeline_bench): --small-count files of --small-size
(200,000 x 3 KiB) and --large-count of --large-size (60,000 x 110 KiB).
Converted once (benchlib/formats.py; a .complete marker each) into tar shards,
MDS shards, TFRecord shards with DALI .idx files, an FFCV .beton, all with
--shard-size samples per shard (1,000) in the same storage order (the files'
sorted paths), and DALI's file list. Each sample's id (its storage index) is
carried by its name or an id field, so the order each loader delivered is
recovered and measured.

Backends: local (the data directory) and, where it can run, nfs
(benchlib/backends, as pipeline_bench: the kernel's nfsd and client, else
nfs-ganesha and dlfs-bench-nfsmount from --build); sshfs when named.

Per (size, backend, variant, epoch), medians of --repeat repetitions
(repetitions alternate the order of backends and variants):
  samples/s       samples over the epoch's seconds, from the word to start
                  (the loader's index/header reads, pipeline builds and worker
                  start-up are inside) to the last batch
  / fastest peer  samples/s over the fastest peer's of the same repetition, size,
                  backend and epoch, per repetition, then the median; / uniform
                  peer: the same against the fastest peer whose order was
                  uniform (max |z| < 4)
  TTFB            seconds from the word to start to the first batch, and the
                  samples/s after it ("after 1st": without start-up and JIT)
  loader RSS      peak summed resident set of the loader's process tree (the
                  training process and its workers), sampled every 0.2 s
  dlfsd RSS       peak resident set of the dlfsd (DLFS variants)
  cache           growth of the page cache (Cached in /proc/meminfo) over the epoch
  shuffle         the delivered order's distance from a uniform permutation
                  (benchlib/shuffle_quality.py): same-shard neighbours over
                  their uniform expectation (1.00), Spearman rho against storage
                  order (0) and against the previous epoch (0), mean normalised
                  displacement (0.333), and max |z|: the largest of their
                  z-scores against a uniform permutation (below 4 for any
                  uniform shuffle at these sizes)
Goals (issue 33), marked ok/MISS on dlfs-views and dlfs-views-b, each epoch: samples/s at
least 1.5x the fastest peer's at the small size and 1x at the large size on
local, 2x on a shared backend; a shuffle at least as close to uniform as the
best peer's: max |z| no larger than the lowest peer's, or below 4.

The loaders run in a child process each (loaders_peer.py) under the Python
that has their libraries: --python (default $DLFS_VENV/bin/python, else
<tree>/.venv/bin/python, else $VENV_PYTHON; tools/install-deps.sh makes
.venv), and --ffcv-python for ffcv. This script itself runs under Debian's
/usr/bin/python3 (numpy, matplotlib) and needs root (mounts, drop_caches).

  /usr/bin/python3 tools/bench/loaders_bench.py --quick            # tiny smoke run, a minute or two
  /usr/bin/python3 tools/bench/loaders_bench.py --build build --ffcv-python /tmp/ffcv-venv/bin/python \\
      --json loaders.json --plots docs/img                          # the full run
"""
import json
import math
import os
import queue
import shutil
import statistics
import subprocess
import sys
import threading
import time

import numpy

from benchlib import SRC, backends as shared, cli
from benchlib.backends import SHARED
from benchlib.daemons import Daemons, dlfsd_argv, loaded
from benchlib.datasets import ensure_dataset
from benchlib.proc import PeakMemory
from benchlib.readers import MiB, human, drop_caches, files_under, set_settle
from benchlib.report import log, write_json
from benchlib.shuffle_quality import measure as shuffle_measure
from benchlib.stats import mount_stats
from benchlib.teardown import Teardown, stop_process

PROG = "loaders_bench.py"
PEER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loaders_peer.py")
VARIANTS = ("dlfs-views", "dlfs-views-b", "dlfs-views-wds", "dlfs-raw", "files", "mosaic", "wds-1k", "wds-10k",
            "dali-file", "dali-tfrecord", "ffcv")
ON_DLFS = ("dlfs-views", "dlfs-views-b", "dlfs-views-wds", "dlfs-raw")
VIEWS = ("dlfs-views", "dlfs-views-b", "dlfs-views-wds")
PEERS = tuple(v for v in VARIANTS if v not in ON_DLFS)
FORMAT = {"mosaic": "mds", "wds-1k": "tar", "wds-10k": "tar", "dali-file": "filelist", "dali-tfrecord": "tfrecord",
          "ffcv": "ffcv"}
MODULES = {"files": "torch", "dlfs-raw": "torch", "dlfs-views": "torch", "dlfs-views-b": "torch",
           "dlfs-views-wds": "webdataset",
           "mosaic": "streaming", "wds-1k": "webdataset", "wds-10k": "webdataset", "dali-file": "nvidia.dali",
           "dali-tfrecord": "nvidia.dali", "ffcv": "ffcv"}
BUFFER = {"wds-1k": 1000, "wds-10k": 10000}
BACKENDS = ("local",) + SHARED
GOAL_VARIANTS = ("dlfs-views", "dlfs-views-b")
Z_UNIFORM = 4.0  # max |z| below which an order is indistinguishable from uniform here


def speed_goal(size_key, backend):
    """Issue 33's minimum samples/s of dlfs-views over the fastest peer's."""
    if backend in SHARED:
        return 2.0
    return 1.5 if size_key == "small" else 1.0


def load_failed(mnt):
    """Whether a dataset of the dlfsd at `mnt` ended its load with extents it could not read."""
    try:
        return any(d.get("load", {}).get("state") == "failed" for d in mount_stats(mnt)["datasets"])
    except (OSError, ValueError, KeyError):
        return False


class Size:
    """One sample-size dataset: its files, its names, and where its formats go."""

    def __init__(self, key, count, size, a):
        self.key, self.count, self.size = key, count, size
        self.label = f"{count:,} x {human(size)}"
        self.rel = f"files-{count}x{human(size)}"
        self.a = a
        self.names = []

    def fmt_rel(self, fmt):
        """A format's path relative to the data directory (the file list is local, in the workdir)."""
        return f"{self.rel}-s{self.a.shard_size}.beton" if fmt == "ffcv" else f"{self.rel}-{fmt}-s{self.a.shard_size}"

    def prepare(self):
        data = self.a.data_dir
        ensure_dataset(os.path.join(data, self.rel), self.count, self.size, 100)
        self.names = files_under(os.path.join(data, self.rel))
        if len(self.names) != self.count:
            sys.exit(f"{PROG}: {os.path.join(data, self.rel)} has {len(self.names)} files, expected {self.count}: "
                     f"delete it and its .complete marker to regenerate")
        self.names_file = os.path.join(self.a.workdir, f"{self.rel}.names")
        with open(self.names_file, "w") as f:
            f.write("".join(n + "\n" for n in self.names))
        self.file_list = os.path.join(self.a.workdir, f"{self.rel}.filelist")
        for fmt in sorted({FORMAT[v] for v in self.a.variants if v in FORMAT}):
            out = self.file_list if fmt == "filelist" else os.path.join(data, self.fmt_rel(fmt))
            if os.path.exists(out + ".complete"):
                continue
            if os.path.isdir(out):
                shutil.rmtree(out)
            elif os.path.exists(out):
                os.remove(out)
            python = self.a.ffcv_python if fmt == "ffcv" else self.a.python
            t0 = time.time()
            log(f"writing {self.label} as {fmt} ({self.a.shard_size} samples a shard) into {out}")
            r = subprocess.run([python, PEER_SCRIPT, "convert", fmt, os.path.join(data, self.rel), out,
                                "--shard-size", str(self.a.shard_size)], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            if r.returncode != 0:
                sys.exit(f"{PROG}: converting {self.rel} to {fmt} failed ({r.returncode}):\n{r.stdout[-3000:]}")
            self.a.conversions[f"{self.key}/{fmt}"] = round(time.time() - t0, 1)

    def tar_shards(self, root):
        d = os.path.join(root, self.fmt_rel("tar"))
        return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".tar"))

    def tfrecords(self, root):
        d = os.path.join(root, self.fmt_rel("tfrecord"))
        return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".tfrecord"))


class DaemonSlot:
    """At most one dlfsd at a time (the large dataset takes GBs); new view epochs for every run."""

    def __init__(self, a, daemons):
        self.a, self.daemons = a, daemons
        self.key = self.mnt = self.proc = self.log_path = None
        self.load_s = None

    def get(self, backend, root, size):
        key = (backend, size.key)
        if key != self.key:
            self.stop()
            for attempt in (1, 2):
                if self._start(backend, root, size):
                    break
                self.stop()
                if attempt == 2:
                    sys.exit(f"{PROG}: dlfsd over {backend} failed to load {size.rel} twice (backend read errors); "
                             f"its log: {self.log_path}")
                log(f"dlfsd over {backend}: some extents of {size.rel} failed to load (backend read errors, "
                    f"{self.log_path}); starting it again")
            self.key = key
        return self.mnt

    def _start(self, backend, root, size):
        """Starts a dlfsd and waits for its load; False if the load failed (a
        backend read error: an NFS client's transient EIO, say), which would
        leave part of the dataset served from the backend."""
        tag = f"loaders-{backend}-{size.key}"
        mnt, sock = os.path.join(self.a.workdir, f"mnt-{tag}"), os.path.join(self.a.workdir, f"{tag}.sock")
        self.log_path = os.path.join(self.a.workdir, f"dlfsd-{tag}.log")
        argv = dlfsd_argv(self.a.dlfsd, mnt, os.path.join(root, size.rel), sock, self.a.dlfsd_arg, seed=1)
        drop_caches()  # a cold load: the backend's page cache does not serve it
        t0 = time.time()
        self.proc = self.daemons.start("dlfsd", self.a.run_prefix.get(backend, []) + argv, mnt,
                                       lambda: loaded(mnt) or load_failed(mnt), self.log_path, timeout=3600)
        self.load_s = time.time() - t0
        self.mnt = mnt
        if load_failed(mnt):
            return False
        log(f"dlfsd over {backend} {size.rel} loaded in {self.load_s:.1f} s")
        return True

    @staticmethod
    def epochs(rep, variant):
        """Two view epochs of their own for each (repetition, variant): never
        served before by this dlfsd (a new one serves each repetition), and
        each repetition measures other orders."""
        base = 2 * (rep * len(ON_DLFS) + ON_DLFS.index(variant))
        return [base, base + 1]

    def stop(self):
        self.daemons.stop_all()
        self.key = self.mnt = self.proc = None


class Child:
    """A loaders_peer.py run: its protocol lines read by a thread, waited for with a timeout."""

    def __init__(self, argv, log_path, timeout, what):
        self.what, self.timeout, self.log_path = what, timeout, log_path
        self.log = open(log_path, "w")
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                  cwd=os.path.dirname(log_path))
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def expect(self, first_word):
        try:
            line = self.lines.get(timeout=self.timeout)
        except queue.Empty:
            line = f"(nothing for {self.timeout:g} s: --epoch-timeout)"
        if line is None or not line.startswith(first_word):
            self.close()
            with open(self.log_path, errors="replace") as f:
                tail = f.read()[-4000:]
            sys.exit(f"{PROG}: {self.what}: expected '{first_word}', got {line or 'its exit'} "
                     f"(exit {self.p.returncode}); its log {self.log_path}:\n{tail}")
        return line.split()

    def say(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def close(self):
        stop_process(self.p, timeout=60)
        self.log.close()


def spec_for(a, slot, backend, root, size, variant, rep, out_dir):
    s = {"variant": variant, "batch": a.batch, "workers": a.workers, "names_file": size.names_file,
         "files_root": os.path.join(root, size.rel), "out_dir": out_dir}
    if variant in ON_DLFS:
        s["ds_dir"] = os.path.join(slot.get(backend, root, size), "ds")
        s["view_epochs"] = slot.epochs(rep, variant)
    fmt = FORMAT.get(variant)
    if fmt == "mds":
        s["mds_dir"] = os.path.join(root, size.fmt_rel("mds"))
    elif fmt == "tar":
        s["tar_shards"], s["shuffle_buffer"] = size.tar_shards(root), BUFFER[variant]
    elif fmt == "filelist":
        s["file_list"] = size.file_list
    elif fmt == "tfrecord":
        s["tfrecords"] = size.tfrecords(root)
    elif fmt == "ffcv":
        s["ffcv_file"] = os.path.join(root, size.fmt_rel("ffcv"))
    return s


def expected_count(a, size, variant):
    # a view's ranks pad to ceil(N/W) each (remainder = pad, dlfsd's default)
    return a.workers * math.ceil(size.count / a.workers) if variant in VIEWS else size.count


def measure(a, slot, backend, root, size, variant, rep):
    """Two epochs of one variant in a child process: one record per epoch."""
    out_dir = os.path.join(a.workdir, "runs", f"{size.key}-{backend}-{variant}-r{rep}")
    os.makedirs(out_dir, exist_ok=True)
    spec = spec_for(a, slot, backend, root, size, variant, rep, out_dir)
    with open(os.path.join(out_dir, "spec.json"), "w") as f:
        json.dump(spec, f)
    python = a.ffcv_python if variant == "ffcv" else a.python
    what = f"{variant} on {backend}, {size.label}, repetition {rep}"
    child = Child([python, PEER_SCRIPT, "run", os.path.join(out_dir, "spec.json")], os.path.join(out_dir, "log"),
                  a.epoch_timeout, what)
    others = [slot.proc.pid] if variant in ON_DLFS else []
    records, prev = [], None
    try:
        child.expect("ready")
        drop_caches()
        for e in (1, 2):
            watch = PeakMemory(child.p.pid, others)
            child.say(f"go {e}")
            _, _e, n, dt, ttfb, first_n = child.expect("done")
            watch.stop()
            n, dt, ttfb, first_n = int(n), float(dt), float(ttfb), int(first_n)
            path = os.path.join(out_dir, f"ids-{e}.npy")
            order = numpy.load(path)
            want = expected_count(a, size, variant)
            if n != want or len(order) != n:
                sys.exit(f"{PROG}: {what}: epoch {e} delivered {n} samples ({len(order)} ids), expected {want}")
            try:
                q = shuffle_measure(order, size.count, a.shard_size, prev)
            except ValueError as err:
                sys.exit(f"{PROG}: {what}: epoch {e}: {err}")
            prev = order
            if not a.keep_orders:
                os.remove(path)
            records.append({"rep": rep, "size": size.key, "backend": backend, "variant": variant, "epoch": e,
                            "samples": n, "seconds": dt, "samples_s": n / dt, "ttfb_s": ttfb,
                            "samples_s_after_first": (n - first_n) / (dt - ttfb) if dt > ttfb else None,
                            "loader_rss_peak": watch.tree_peak, "dlfsd_rss_peak": watch.others_peak or None,
                            "cache_growth": watch.cached_end - watch.cached_start,
                            "cache_peak_growth": watch.cached_peak - watch.cached_start,
                            "dlfsd_load_s": slot.load_s if variant in ON_DLFS else None, "shuffle": q})
        child.p.wait(timeout=120)
    finally:
        child.close()
    if child.p.returncode != 0:
        sys.exit(f"{PROG}: {what}: the loader exited with {child.p.returncode}; log {child.log_path}")
    return records


SHUFFLE_KEYS = ("shard_adjacency", "rho", "rho_prev", "displacement", "max_z")


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fastest_peers(cell_runs, uniform_only):
    """{rep: (samples/s, variant)} of the fastest peer in each repetition, of
    those whose order was uniform (max |z| < Z_UNIFORM) if `uniform_only`."""
    fastest = {}
    for r in cell_runs:
        if r["variant"] not in PEERS or (uniform_only and r["shuffle"]["max_z"] >= Z_UNIFORM):
            continue
        if r["samples_s"] > fastest.get(r["rep"], (0, None))[0]:
            fastest[r["rep"]] = (r["samples_s"], r["variant"])
    return fastest


def ratio_to(reps, fastest):
    """(median of per-repetition ratios, the peer most often fastest) against `fastest`."""
    ratios = [r["samples_s"] / fastest[r["rep"]][0] for r in reps if r["rep"] in fastest]
    who = [fastest[r["rep"]][1] for r in reps if r["rep"] in fastest]
    return med(ratios), (max(set(who), key=who.count) if who else None)


def with_load(reps, fastest):
    """Epoch 1 of a DLFS variant as if dlfsd's load (before the epochs) were part
    of it: samples over (load + epoch) seconds, and that over the fastest peer's."""
    rates = {r["rep"]: r["samples"] / (r["dlfsd_load_s"] + r["seconds"]) for r in reps}
    ratios = [rates[rep] / fastest[rep][0] for rep in rates if rep in fastest]
    return {"samples_s": med(rates.values()), "ratio_fastest_peer": med(ratios)}


def summarize(a, sizes, runs):
    """Medians per (size, backend, variant, epoch); ratios to the fastest peer
    (and to the fastest peer with a uniform order) per repetition first."""
    summary = {}
    for s in sizes:
        for b in a.backends:
            for e in (1, 2):
                cell_runs = [r for r in runs if (r["size"], r["backend"], r["epoch"]) == (s.key, b, e)]
                fastest, fastest_uniform = fastest_peers(cell_runs, False), fastest_peers(cell_runs, True)
                for v in a.variants:
                    reps = [r for r in cell_runs if r["variant"] == v]
                    if not reps:
                        continue
                    c = {"samples_s": med(r["samples_s"] for r in reps)}
                    c["ratio_fastest_peer"], c["fastest_peer"] = ratio_to(reps, fastest)
                    c["ratio_fastest_uniform_peer"], c["fastest_uniform_peer"] = ratio_to(reps, fastest_uniform)
                    c.update({"ttfb_s": med(r["ttfb_s"] for r in reps),
                              "samples_s_after_first": med(r["samples_s_after_first"] for r in reps),
                              "loader_rss_peak": med(r["loader_rss_peak"] for r in reps),
                              "dlfsd_rss_peak": med(r["dlfsd_rss_peak"] for r in reps),
                              "cache_growth": med(r["cache_growth"] for r in reps),
                              "dlfsd_load_s": med(r["dlfsd_load_s"] for r in reps),
                              "with_load": with_load(reps, fastest) if v in ON_DLFS and e == 1 else None,
                              "shuffle": {k: med(r["shuffle"][k] for r in reps) for k in SHUFFLE_KEYS},
                              "duplicates": max(r["shuffle"]["duplicates"] for r in reps),
                              "missing": max(r["shuffle"]["missing"] for r in reps)})
                    summary.setdefault(s.key, {}).setdefault(b, {}).setdefault(v, {})[f"epoch{e}"] = c
    for s in sizes:
        for b in a.backends:
            cells = summary.get(s.key, {}).get(b, {})
            for v in [v for v in GOAL_VARIANTS if v in cells]:
                for e in (1, 2):
                    c = cells[v][f"epoch{e}"]
                    peer_z = [cells[p][f"epoch{e}"]["shuffle"]["max_z"] for p in cells if p in PEERS]
                    best = min(peer_z) if peer_z else None
                    c["goal"] = {"min_ratio": speed_goal(s.key, b),
                                 "speed_ok": c["ratio_fastest_peer"] is not None
                                 and c["ratio_fastest_peer"] >= speed_goal(s.key, b),
                                 "best_peer_max_z": best,
                                 "shuffle_ok": best is not None and c["shuffle"]["max_z"] <= max(best, Z_UNIFORM)}
    return summary


def f_num(x, fmt, width):
    return f"{'n/a':>{width}}" if x is None else f"{x:{width}{fmt}}"


def mib(x):
    return None if x is None else x / MiB


def report_row(a, b, v, e, c):
    g = c.get("goal")
    ratio = f_num(c["ratio_fastest_peer"], ".2f", 6) + "x"
    if g:
        ratio += f" (>={g['min_ratio']:g} {'ok' if g['speed_ok'] else 'MISS'})"
    sh = c["shuffle"]
    line = (f"{b if v == a.variants[0] and e == 1 else '':<8}{v if e == 1 else '':<15}{e:>2}"
            f"{c['samples_s']:>10,.0f} {ratio:<20}{f_num(c['ratio_fastest_uniform_peer'], '.2f', 7)}x"
            f"{c['ttfb_s']:>7.2f}{f_num(c['samples_s_after_first'], ',.0f', 10)}"
            f"{f_num(mib(c['loader_rss_peak']), ',.0f', 8)}{f_num(mib(c['dlfsd_rss_peak']), ',.0f', 7)}"
            f"{f_num(mib(c['cache_growth']), ',.0f', 7)}{f_num(sh['shard_adjacency'], '.2f', 8)}"
            f"{f_num(sh['rho'], '.3f', 7)}{f_num(sh['rho_prev'], '.3f', 7)}"
            f"{f_num(sh['displacement'], '.3f', 7)}{f_num(sh['max_z'], '.1f', 8)}")
    if g:
        line += (f"  <= max({f_num(g['best_peer_max_z'], '.1f', 0)}, {Z_UNIFORM:g}) "
                 f"{'ok' if g['shuffle_ok'] else 'MISS'}")
    return line


def report(a, sizes, summary):
    print()
    print(f"Loaders, {a.workers} workers, batch {a.batch}, 2 epochs (drop_caches before epoch 1), {a.shard_size} "
          f"samples a shard; medians of {a.repeat}; ratios: medians of per-repetition ratios")
    print("/peer: to the fastest peer; /unif: to the fastest peer whose order was uniform (max |z| < "
          f"{Z_UNIFORM:g}); TTFB: to the first batch; after 1st: samples/s after it; loader, dlfsd: peak RSS, MiB; "
          "cache: page cache growth over the epoch, MiB")
    print("shuffle: adj = same-shard neighbours / uniform (1.00), rho vs storage order (0), rho vs the epoch "
          f"before (0), displacement (0.333), max |z| vs uniform (< {Z_UNIFORM:g}); goal: max |z| <= "
          f"max(the best peer's, {Z_UNIFORM:g})")
    for s in sizes:
        print(f"\n== {s.label} samples ==")
        print(f"{'backend':<8}{'variant':<15}{'ep':>2}{'samples/s':>10} {'/peer (goal)':<20}{'/unif':>8}"
              f"{'TTFB s':>7}{'after 1st':>10}{'loader':>8}{'dlfsd':>7}{'cache':>7}{'adj':>8}{'rho':>7}{'r prev':>7}"
              f"{'displ':>7}{'max|z|':>8}  shuffle goal")
        for b in a.backends:
            for v in a.variants:
                cells = summary.get(s.key, {}).get(b, {}).get(v)
                for e in ((1, 2) if cells else ()):
                    print(report_row(a, b, v, e, cells[f"epoch{e}"]))
        for b in a.backends:
            cells = summary.get(s.key, {}).get(b, {})
            if not cells:
                continue
            any_cell = next(iter(cells.values()))
            print(f"{b}: fastest peer " + ", ".join(
                f"epoch {e} {any_cell[f'epoch{e}']['fastest_peer']} (uniform: "
                f"{any_cell[f'epoch{e}']['fastest_uniform_peer'] or 'none'})" for e in (1, 2)))
            loads = [cells[v]["epoch1"]["dlfsd_load_s"] for v in ON_DLFS if v in cells]
            if loads:
                print(f"{b}: dlfsd loaded the dataset in {med(loads):.1f} s (cold) before the epochs, not in them; "
                      "counted in epoch 1: " + ", ".join(
                          f"{v} {cells[v]['epoch1']['with_load']['samples_s']:,.0f} samples/s "
                          f"({f_num(cells[v]['epoch1']['with_load']['ratio_fastest_peer'], '.2f', 0)}x the "
                          "fastest peer)"
                          for v in ON_DLFS if v in cells))


def find_python(ap, a):
    if a.python:
        return a.python
    for cand in ([os.path.join(os.environ["DLFS_VENV"], "bin/python")] if os.environ.get("DLFS_VENV") else []) + \
            [os.path.join(SRC, ".venv/bin/python"), os.environ.get("VENV_PYTHON", "")]:
        if cand and os.access(cand, os.X_OK):
            return cand
    ap.error("no Python with the loaders' libraries: make .venv with tools/install-deps.sh, or give --python "
             "or DLFS_VENV")


def check_imports(python, modules, what):
    """None if `python` imports every module, else the error line."""
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    r = subprocess.run([python, "-c", code, *modules], capture_output=True, text=True)
    if r.returncode != 0:
        err = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
        return f"{python} cannot import what {what} needs ({', '.join(modules)}): {err}"
    return None


def parse_args():
    ap = cli.parser(__doc__, workdir="/tmp/dlfs-bench-loaders", repeat=3,
                    quick="tiny smoke run: 2,000 and 300 samples, 100 a shard, one repetition",
                    json="write every run and the summary here", build="the build directory whose fs/dlfsd runs")
    ap.add_argument("--backends", help="comma-separated, of local,nfs,sshfs (default: local, and nfs where it "
                    "can run)")
    ap.add_argument("--variants", help=f"comma-separated, of {','.join(VARIANTS)} (default: all; ffcv only with "
                    "--ffcv-python)")
    ap.add_argument("--sizes", default="small,large", help="small,large or one of them")
    ap.add_argument("--small-count", type=int, default=200000, help="samples of the small dataset (200000)")
    ap.add_argument("--small-size", type=cli.size_arg, default=3 << 10, help="their size (3K)")
    ap.add_argument("--large-count", type=int, default=60000, help="samples of the large dataset (60000)")
    ap.add_argument("--large-size", type=cli.size_arg, default=110 << 10, help="their size (110K)")
    ap.add_argument("--shard-size", type=int, default=1000, help="samples per shard in every sharded format")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers, DALI and FFCV threads, W of the views")
    ap.add_argument("--batch", type=int, default=256, help="samples a batch (256)")
    ap.add_argument("--python", help="the Python with torch, webdataset, streaming and DALI (default: "
                    "$DLFS_VENV/bin/python, <tree>/.venv/bin/python, $VENV_PYTHON)")
    ap.add_argument("--ffcv-python", default=os.environ.get("DLFS_FFCV_PYTHON"),
                    help="a Python with ffcv for the ffcv variant (default $DLFS_FFCV_PYTHON)")
    ap.add_argument("--dlfsd-arg", action="append", default=[], metavar="ARG", help="one more dlfsd flag (repeatable)")
    ap.add_argument("--nfs-vers", default="4.2", choices=["4.2", "4.1", "4", "3"],
                    help="NFS version of the kernel mode (the ganesha mode's client speaks 4.0)")
    ap.add_argument("--epoch-timeout", type=float, default=3600, help="seconds a loader may take for one step")
    ap.add_argument("--keep-orders", action="store_true", help="keep each run's delivered ids (runs/*/ids-*.npy)")
    ap.add_argument("--plots", help="directory for loaders_vs_peers.png (default: the --json file's, else the workdir)")
    a = ap.parse_args()
    if a.quick:
        a.repeat, a.small_count, a.large_count, a.shard_size = 1, 2000, 300, 100
        set_settle(0.2)
    if min(a.repeat, a.workers, a.batch, a.shard_size, a.small_count, a.large_count) < 1:
        ap.error("--repeat, --workers, --batch, --shard-size and the counts must be at least 1")
    a.backends_given = a.backends is not None
    a.backends = [b for b in (a.backends or "local,nfs").split(",") if b]
    a.sizes = [s for s in a.sizes.split(",") if s]
    a.variants_given = a.variants is not None
    a.variants = [v for v in (a.variants or ",".join(VARIANTS)).split(",") if v]
    for name, got, allowed in (("--backends", a.backends, BACKENDS), ("--variants", a.variants, VARIANTS),
                               ("--sizes", a.sizes, ("small", "large"))):
        bad = [x for x in got if x not in allowed]
        if bad or not got:
            ap.error(f"{name}: {','.join(bad) or 'empty'} is not a list of {', '.join(allowed)}")
    cli.require_root(ap, "FUSE and NFS mounts, drop_caches")
    a.dlfsd = cli.built(ap, a.build, "fs/dlfsd") if any(v in ON_DLFS for v in a.variants) else None
    a.python = find_python(ap, a)
    if "ffcv" in a.variants:
        if not a.ffcv_python:
            if a.variants_given:
                ap.error("the ffcv variant needs --ffcv-python (or DLFS_FFCV_PYTHON): a Python with ffcv")
            print(f"{PROG}: leaving out ffcv: no --ffcv-python (tools/bench/README.md says how to build one)",
                  file=sys.stderr)
            a.variants.remove("ffcv")
        else:
            why = check_imports(a.ffcv_python, ["ffcv", "torch"], "ffcv")
            if why:
                sys.exit(f"{PROG}: {why}")
    modules = sorted({MODULES[v] for v in a.variants if v != "ffcv"} | {"torch", "numpy"})
    why = check_imports(a.python, modules, "the variants")
    if why:
        sys.exit(f"{PROG}: {why}")
    a.workdir = os.path.abspath(a.workdir)
    a.data_dir = os.path.join(a.workdir, "data")
    a.conversions = {}
    return ap, a


def choose_backends(a):
    for b in [b for b in a.backends if b in SHARED]:
        reason = shared.unavailable_reason(b, a.build)
        if not reason:
            continue
        if a.backends_given:
            print(f"{PROG}: {b} backend unavailable: {reason} (leave it out of --backends)", file=sys.stderr)
            sys.exit(77)
        print(f"{PROG}: skipping the {b} backend: {reason}", file=sys.stderr)
        a.backends.remove(b)


def check_space(a, sizes):
    """Exits naming the bytes needed if the data directory's filesystem cannot hold the datasets and formats."""
    need = 0
    for s in sizes:
        parts = [os.path.join(a.data_dir, s.rel)] + [os.path.join(a.data_dir, s.fmt_rel(FORMAT[v]))
                                                     for v in a.variants if FORMAT.get(v) not in (None, "filelist")]
        need += sum(int(s.count * (s.size + 1024)) for p in set(parts) if not os.path.exists(p + ".complete"))
    free = shutil.disk_usage(a.data_dir).free
    if need > free:
        sys.exit(f"{PROG}: {a.data_dir} needs about {need / (1 << 30):.1f} GiB more for the datasets and their "
                 f"formats, its filesystem has {free / (1 << 30):.1f} GiB free (use --workdir elsewhere)")


def config_of(a, sizes):
    config = {k: getattr(a, k) for k in ("backends", "variants", "repeat", "workers", "batch", "shard_size", "build",
                                         "python", "ffcv_python", "quick")}
    config["sizes"] = {s.key: {"count": s.count, "size": s.size, "label": s.label} for s in sizes}
    config["mount_options"] = getattr(a, "mount_options", {})
    config["conversions_s"] = a.conversions
    return config


def main():
    ap, a = parse_args()
    choose_backends(a)
    os.makedirs(a.data_dir, exist_ok=True)
    specs = {"small": (a.small_count, a.small_size), "large": (a.large_count, a.large_size)}
    sizes = [Size(k, *specs[k], a) for k in a.sizes]
    check_space(a, sizes)
    for s in sizes:
        s.prepare()
    runs = []
    t_start = time.time()
    with Teardown() as td:
        roots = {"local": a.data_dir}
        a.run_prefix, a.mount_options = {}, {}
        for b in [b for b in a.backends if b in SHARED]:
            m = td.enter_context(shared.mount(b, a.data_dir, os.path.join(a.workdir, f"mnt-{b}"), a.build, a.nfs_vers))
            roots[b], a.run_prefix[b], a.mount_options[b] = m.mountpoint, m.run_prefix, m.options
        slot = DaemonSlot(a, td.enter_context(Daemons()))
        for rep in range(a.repeat):
            backends = a.backends if rep % 2 == 0 else a.backends[::-1]
            variants = a.variants if rep % 2 == 0 else a.variants[::-1]
            for s in sizes:
                for b in backends:
                    for v in variants:
                        if v not in ON_DLFS:
                            slot.stop()  # the peers run without a dlfsd holding the dataset in memory
                        for r in measure(a, slot, b, roots[b], s, v, rep):
                            runs.append(r)
                            if a.json:  # what is measured so far survives an interrupted run
                                write_json(a.json, {"config": config_of(a, sizes), "partial": True, "runs": runs})
                            q = r["shuffle"]
                            log(f"rep {rep} {s.label} {b} {v} epoch {r['epoch']}: {r['samples_s']:,.0f} samples/s, "
                                f"first batch {r['ttfb_s']:.2f} s, shard adjacency {q['shard_adjacency']:.2f}, "
                                f"max |z| {q['max_z']:.1f}")
                    slot.stop()
    summary = summarize(a, sizes, runs)
    report(a, sizes, summary)
    print(f"\nmeasured in {time.time() - t_start:.0f} s")
    config = config_of(a, sizes)
    goals = {"variants": list(GOAL_VARIANTS), "min_ratio_fastest_peer": {f"{k}/{b}": speed_goal(k, b) for k in a.sizes
                                                                  for b in a.backends},
             "max_z_uniform": Z_UNIFORM}
    results = {"config": config, "goals": goals, "runs": runs, "summary": summary}
    if a.json:
        write_json(a.json, results)
    import plots
    plots.save("loaders_vs_peers", results, a.plots or plots.default_dir(a.json, a.workdir))


if __name__ == "__main__":
    main()
