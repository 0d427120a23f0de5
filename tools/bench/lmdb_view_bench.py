#!/usr/bin/python3
"""LMDB epoch views against python3-lmdb: every figure is measured in this run.

An LMDB dataset (Caffe-style: keys "%08d" put in key order with APPEND, a
commit every 1000, one value size) is read in one epoch's shuffled order:

  python3-lmdb   one process opens the environment read-only (lock=False) and
                 gets every value by key in the order of epochs/E/1/0.index,
                 copying it out (txn.get: B+tree descent + mmap page faults).
  dlfs view      the same samples in the same order, streamed from
                 epochs/E/1/0.tar on the mount with 1 MiB reads (the daemon
                 located the values from the sidecar, without B+tree seeks,
                 and loaded data.mdb with large coalesced reads).

  warm        python3-lmdb: data.mdb in the page cache (an untimed pass
              first). dlfs: the daemon loaded, reading a view it has not
              served before (so the kernel's cache of the mount holds none of
              it: the figure is the daemon's, not the page cache's).
  cold        page cache dropped (drop_caches) before each run; the daemon
              stays loaded (its memory is the point of the design).
  cold start  page cache dropped, then the daemon is started and the view read
              at once: locating, loading and serving all count, from the
              daemon's launch to the last byte.

Samples per second, medians of --repeat runs, and ratios dlfs / python3-lmdb.
Each epoch is a different order (epoch = run index) so no run reuses another's.

usage: lmdb_view_bench.py [--build DIR] [--workdir DIR] [--records 100000]
                          [--value-size 3072] [--repeat 3]
"""
import os
import statistics
import subprocess
import time

from benchlib import cli
from benchlib.daemons import Daemons, answers, dlfsd_argv, loaded
from benchlib.readers import MiB, drop_caches, read_stream
from benchlib.report import log, write_json
from benchlib.stats import mount_stats


def build_db(path, records, value_size, every):
    """Caffe-style build with python3-lmdb; the sidecar comes from dlfs-ctl."""
    import lmdb
    if os.path.exists(os.path.join(path, "data.mdb")):
        return
    os.makedirs(path, exist_ok=True)
    env = lmdb.open(path, map_size=max(1 << 30, records * (value_size + 4096) * 2), sync=False)
    payload = os.urandom(value_size + 4096)
    t0 = time.time()
    txn = env.begin(write=True)
    for i in range(records):
        txn.put(b"%08d" % i, payload[i % 4096:i % 4096 + value_size], append=True)
        if (i + 1) % every == 0:
            txn.commit()
            txn = env.begin(write=True)
    txn.commit()
    env.sync(True)
    env.close()
    log(f"built {path}: {records} records of {value_size} B in {time.time() - t0:.1f} s")


def read_order(index_path):
    with open(index_path) as f:
        f.readline()
        return [int(line.split("\t", 2)[1]) for line in f]


def python_lmdb_run(db, order):
    import lmdb
    t0 = time.perf_counter()
    env = lmdb.open(db, readonly=True, lock=False)
    n = 0
    with env.begin() as txn:
        for sid in order:
            v = txn.get(b"%08d" % sid)
            n += len(v)
    env.close()
    return time.perf_counter() - t0, n


def main():
    ap = cli.parser(__doc__, workdir="/tmp/dlfs-lmdb-bench", repeat=3, json="also write the figures here")
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--value-size", type=int, default=3072)
    ap.add_argument("--commit-every", type=int, default=1000)
    a = ap.parse_args()
    cli.require_root(ap, "FUSE mounts, drop_caches")
    dlfsd, ctl = cli.built(ap, a.build, "fs/dlfsd"), cli.built(ap, a.build, "tools/ctl/dlfs-ctl")
    db = os.path.join(a.workdir, f"lmdb-{a.records}x{a.value_size}")
    build_db(db, a.records, a.value_size, a.commit_every)
    if not os.path.exists(os.path.join(db, "data.mdb.dlfs")):
        subprocess.run([ctl, "lmdb", "sidecar", db], check=True)
    mnt = os.path.join(a.workdir, "mnt")
    results = {"python3-lmdb": {}, "dlfs view": {}}
    daemons = Daemons()

    def start():
        argv = dlfsd_argv(dlfsd, mnt, db, os.path.join(a.workdir, "bench.sock"), ["--format", "lmdb"], seed=1)
        t0 = time.perf_counter()
        daemons.start("dlfsd", argv, mnt, lambda: answers(mnt), os.path.join(a.workdir, "dlfsd.log"))
        return t0

    def view(e):
        return os.path.join(mnt, "ds", "epochs", str(e), "1", "0")

    with daemons:
        # Cold start first (nothing of the daemon's yet), one epoch per run.
        cold_start = []
        for r in range(a.repeat):
            drop_caches()
            t0 = start()
            read_stream(view(100 + r) + ".tar", give_back=True)
            cold_start.append(time.perf_counter() - t0)
            daemons.stop_all()
        results["dlfs view"]["cold start"] = cold_start

        start()
        while not loaded(mnt):
            time.sleep(0.1)
        lm = mount_stats(mnt)["datasets"][0]["lmdb"]
        log(f"values located by {lm['locations_from']} in {lm['locate_s']:.3f} s")
        for mode in ("cold", "warm"):
            for who in ("python3-lmdb", "dlfs view"):
                runs = []
                for r in range(a.repeat):
                    e = r + (0 if mode == "cold" else 50)
                    order = read_order(view(e) + ".index")
                    if mode == "cold":
                        drop_caches()
                    elif who == "python3-lmdb":  # warm: the same reads once before, untimed
                        python_lmdb_run(db, order)
                    if who == "python3-lmdb":
                        dt, _ = python_lmdb_run(db, order)
                    else:
                        _, dt = read_stream(view(e) + ".tar", give_back=True)
                    runs.append(dt)
                results[who][mode] = runs

    n = a.records
    print(f"\nLMDB dataset: {n} records of {a.value_size} B, commit every {a.commit_every}, "
          f"{os.path.getsize(os.path.join(db, 'data.mdb')) / MiB:.0f} MiB data.mdb; one epoch, W=1, shuffled")
    print(f"{'reader':<14}{'mode':<12}{'median s':>10}{'samples/s':>12}   runs (s)")
    med = {}
    for who, modes in results.items():
        for mode, runs in modes.items():
            m = statistics.median(runs)
            med[(who, mode)] = m
            print(f"{who:<14}{mode:<12}{m:>10.2f}{n / m:>12,.0f}   " + ", ".join(f"{x:.2f}" for x in runs))
    for mode in ("cold", "warm"):
        print(f"ratio dlfs view / python3-lmdb, {mode}: {med[('python3-lmdb', mode)] / med[('dlfs view', mode)]:.2f}x")
    print(f"ratio dlfs view cold start / python3-lmdb cold: "
          f"{med[('python3-lmdb', 'cold')] / med[('dlfs view', 'cold start')]:.2f}x")
    if a.json:
        write_json(a.json, {"records": n, "value_size": a.value_size,
                            "runs_s": {f"{w}/{m}": r for w, ms in results.items() for m, r in ms.items()}})


if __name__ == "__main__":
    main()
