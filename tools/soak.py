#!/usr/bin/python3
"""A bounded soak of a two-node DLFS cluster on this host: every figure
printed is measured in this run. Run as root after `meson compile -C build`;
not part of CI (it runs for minutes).

Two dlfsd daemons stripe one generated dataset between them (UCX over TCP on
loopback, a job token). --readers threads (default 128) read for --minutes:
each picks a node and either a raw file (read whole) or a random member of a
random epoch view (epoch 0..--epochs-1, W in 1, 2, 4, any rank: many distinct
views are opened), and compares every byte with the backend. Every
--restart-every seconds node 1 is stopped (SIGTERM, or SIGKILL with --kill,
then its dead mount is unmounted) and started again; readers of node 1 wait
while it is down, node 0's readers go on (node 1's stripe then comes from the
backend). Reads that fail because node 1 was being stopped under them are
counted apart; a wrong byte is a failure, whenever it happens.

Printed: readers, minutes, reads and bytes checked, wrong bytes (must be 0),
each daemon's RSS, open fds and threads at start and end with the RSS curve,
and whether any mount or daemon was left behind.

usage: soak.py [--build DIR] [--workdir DIR] [--minutes 5] [--readers 128]
               [--restart-every 30] [--kill] [--files 2000] [--file-size 32K]
"""
import argparse
import errno
import hashlib
import os
import random
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "bench"))
from benchlib import SRC  # noqa: E402
from benchlib.cli import size_arg  # noqa: E402
from benchlib.daemons import Daemons  # noqa: E402
from benchlib.datasets import ensure_dataset  # noqa: E402
from benchlib.stats import mount_stats  # noqa: E402


def proc_figures(pid):
    """(RSS MiB, open fds, threads) of a live process."""
    rss = threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd")), threads


class Backend:
    """The dataset's files and their digests, read once from the backend."""

    def __init__(self, root):
        self.root = root
        self.digest = {}
        for d, _, names in os.walk(root):
            for n in names:
                rel = os.path.relpath(os.path.join(d, n), root)
                with open(os.path.join(d, n), "rb") as f:
                    self.digest[rel] = hashlib.blake2b(f.read(), digest_size=16).digest()
        self.names = sorted(self.digest)

    def same(self, rel, data):
        return hashlib.blake2b(data, digest_size=16).digest() == self.digest[rel]


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.reads = self.bytes = self.interrupted = 0
        self.wrong = []

    def add(self, n):
        with self.lock:
            self.reads += 1
            self.bytes += n


class Cluster:
    """Two daemons over loopback TCP; node 1 can be stopped and restarted."""

    def __init__(self, a, backend_dir):
        self.a = a
        self.backend_dir = backend_dir
        self.daemons = Daemons()
        port = 21000 + random.randrange(20000)
        self.peers = f"127.0.0.1:{port},127.0.0.1:{port + 1}"
        self.token = os.path.join(a.workdir, "soak.token")
        old = os.umask(0o077)
        with open(self.token, "w") as f:
            f.write(os.urandom(32).hex())
        os.umask(old)
        self.mnt = [os.path.join(a.workdir, f"mnt-soak{i}") for i in range(2)]
        self.proc = [None, None]
        self.up = [threading.Event(), threading.Event()]

    def start(self, i):
        env_tls = {"UCX_TLS": "tcp", "UCX_WARN_UNUSED_ENV_VARS": "n"}
        os.environ.update(env_tls)
        mnt = self.mnt[i]
        self.proc[i] = self.daemons.start(
            f"dlfsd{i}",
            [os.path.join(self.a.build, "fs/dlfsd"), "--mountpoint", mnt, "--backend", self.backend_dir,
             "--name", "d", "--seed", "7", "--extent-size", "1MiB", "--memory-budget", "1G", "--peers", self.peers,
             "--rank", str(i), "--token-file", self.token, "--epochs-listed", str(self.a.epochs),
             "--world-size", "4", "--control-socket", os.path.join(self.a.workdir, f"soak{i}.sock")],
            mnt, lambda: os.path.exists(os.path.join(mnt, ".dlfs/stats")),
            os.path.join(self.a.workdir, f"dlfsd-soak{i}.log"))
        self.up[i].set()

    def stop(self, i, sig):
        self.up[i].clear()
        time.sleep(0.2)  # readers see the flag; those already in a read may fail, counted apart
        p = self.proc[i]
        p.send_signal(sig)
        p.wait(60)
        with open("/proc/mounts") as f:
            if f" {self.mnt[i]} " in f.read():
                subprocess.run(["fusermount3", "-u", "-z", self.mnt[i]], check=False)
        self.daemons.procs = [x for x in self.daemons.procs if x[0] is not p]


def describe_wrong(backend, rel, data):
    """How bytes that differ from the backend differ: truncated or not."""
    with open(os.path.join(backend.root, rel), "rb") as f:
        want = f.read()
    if len(data) < len(want) and want.startswith(data):
        return f"{len(data)} of {len(want)} bytes (a truncated read)"
    first = next((i for i, (x, y) in enumerate(zip(data, want)) if x != y), min(len(data), len(want)))
    return f"{len(data)} bytes, {len(want)} expected, first difference at byte {first}"


def read_raw(mnt, backend, rng):
    rel = rng.choice(backend.names)
    with open(os.path.join(mnt, "d/raw", rel), "rb") as f:
        data = f.read()
    return rel, data


def read_view_member(mnt, backend, rng, epochs):
    w = rng.choice((1, 2, 4))
    view = os.path.join(mnt, f"d/epochs/{rng.randrange(epochs)}/{w}/{rng.randrange(w)}")
    with open(view + ".index") as f:
        rows = f.read().splitlines()[1:]
    _, _, off, length, name = rng.choice(rows).split("\t")
    fd = os.open(view + ".tar", os.O_RDONLY)
    try:
        data = pread_fully(fd, int(length), int(off))
    finally:
        os.close(fd)
    return name, data


def pread_fully(fd, length, off):
    """Reads as a careful reader does: a short count is not the end (the
    kernel returns the bytes it had, e.g. cached pages, before an I/O error,
    which the next call then reports); only 0 is."""
    parts, got = [], 0
    while got < length:
        b = os.pread(fd, length - got, off + got)
        if not b:
            break  # EOF inside the member: the view's size is wrong; the caller reports it
        parts.append(b)
        got += len(b)
    return b"".join(parts)


def reader(seed, cluster, backend, tally, stop_at, epochs):
    rng = random.Random(seed)
    node = seed % 2
    while time.time() < stop_at:
        if not cluster.up[node].wait(1):
            continue
        try:
            if rng.random() < 0.5:
                rel, data = read_raw(cluster.mnt[node], backend, rng)
            else:
                rel, data = read_view_member(cluster.mnt[node], backend, rng, epochs)
        except OSError as e:
            if node == 1 and not cluster.up[1].is_set():
                with tally.lock:
                    tally.interrupted += 1
                continue
            with tally.lock:
                tally.wrong.append(f"node {node}: {os.strerror(e.errno or errno.EIO)}: {e.filename}")
            continue
        if backend.same(rel, data):
            tally.add(len(data))
        else:
            with tally.lock:
                tally.wrong.append(f"node {node}: wrong bytes in {rel}: {describe_wrong(backend, rel, data)}"
                                   f"{'' if cluster.up[node].is_set() else ' (read across a planned stop)'}")


def sample_figures(cluster, curve, t0):
    row = [time.time() - t0]
    for p in cluster.proc:
        try:
            row.append(proc_figures(p.pid) if p.poll() is None else None)
        except OSError:
            row.append(None)
    curve.append(row)


def report(a, tally, curve, restarts, leftovers):
    print(f"\nsoak: {a.readers} readers, {a.minutes} min, 2 nodes, node 1 restarted {restarts} times "
          f"({'SIGKILL' if a.kill else 'SIGTERM'})")
    print(f"reads checked {tally.reads:,}, bytes checked {tally.bytes:,}, wrong {len(tally.wrong)}, "
          f"interrupted by node 1's planned stops {tally.interrupted:,}")
    for w in tally.wrong[:10]:
        print("  WRONG: " + w)
    print("\n  t (s)   node 0 RSS MiB  fds  threads   node 1 RSS MiB  fds  threads")
    for row in curve[:: max(1, len(curve) // 20)] + [curve[-1]]:
        cells = [f"{row[0]:7.0f}"]
        for fig in row[1:]:
            cells.append("     (down)          " if fig is None else f"{fig[0]:14.1f} {fig[1]:4d} {fig[2]:8d}")
        print("   ".join(cells))
    print(f"left behind: {leftovers or 'nothing'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--workdir", default=os.path.join(SRC, "build-soak"))
    ap.add_argument("--minutes", type=float, default=5)
    ap.add_argument("--readers", type=int, default=128)
    ap.add_argument("--restart-every", type=float, default=30, help="seconds between restarts of node 1")
    ap.add_argument("--kill", action="store_true", help="stop node 1 with SIGKILL instead of SIGTERM")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--file-size", type=size_arg, default="32K")
    ap.add_argument("--epochs", type=int, default=50, help="distinct epochs the readers open")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    data = os.path.join(a.workdir, f"soak-{a.files}x{a.file_size}")
    ensure_dataset(data, a.files, a.file_size, 20, jitter=0.5)
    backend = Backend(data)
    cluster = Cluster(a, data)
    tally, curve, restarts = Tally(), [], 0
    try:
        cluster.start(0)
        cluster.start(1)
        t0 = time.time()
        stop_at = t0 + a.minutes * 60
        threads = [threading.Thread(target=reader, args=(i, cluster, backend, tally, stop_at, a.epochs), daemon=True)
                   for i in range(a.readers)]
        for t in threads:
            t.start()
        next_restart = t0 + a.restart_every
        while time.time() < stop_at:
            sample_figures(cluster, curve, t0)
            if time.time() >= next_restart:
                cluster.stop(1, signal.SIGKILL if a.kill else signal.SIGTERM)
                cluster.start(1)
                restarts += 1
                next_restart = time.time() + a.restart_every
            time.sleep(1)
        for t in threads:
            t.join(60)
        sample_figures(cluster, curve, t0)
        stats = [mount_stats(m)["datasets"][0]["bytes_by_source"] for m in cluster.mnt]
        print("bytes by source per node: " + "; ".join(str(s) for s in stats))
    finally:
        cluster.daemons.stop_all()
    with open("/proc/mounts") as f:
        mounts = f.read()
    leftovers = [m for m in cluster.mnt if f" {m} " in mounts]
    report(a, tally, curve, restarts, leftovers)
    sys.exit(1 if tally.wrong or leftovers else 0)


if __name__ == "__main__":
    main()
