#!/usr/bin/env python3
"""Striping benchmarks: every figure printed is measured in this run.

  aggregate  1, 2 and 3 daemons, each in its own network namespace (veth pairs
             through a bridge, UCX over tcp), the dataset striped across them and
             fully resident; every node streams its rank's epoch view
             (epochs/<e>/<N>/<r>.tar, 1 MiB reads) at the same time. Aggregate
             MB/s = all bytes / the slowest node's time. Each repetition reads a
             new epoch, so the kernel's page cache never answers.
  remote     2 nodes: node 0 reads raw files that lie wholly in node 1's stripe
             (every byte a one-sided get), 1 MiB reads, page cache dropped, with 1
             and 4 readers; the same for files of its own stripe (resident: the
             FUSE path alone, the ceiling of any remote read through the mount);
             against ucx_perftest's ucp_get of 1 MiB between the same two
             namespaces with the daemons' UCX settings, 1 and 4 gets in flight.

All nodes share this machine's cores: the aggregate shows what the software
path costs, not what separate machines would reach.

usage: cluster_bench.py [--build DIR] [--workdir DIR] [--size 1G] [--nodes 1,2,3]
                        [--repeat 3] [--json out.json] [--plots DIR]
       cluster_bench.py --build new=DIR,main=DIR,... --rounds 5 --nodes 2 --size 256M
                        (A/B of the aggregate: the builds alternate within every
                        round, the order rotating; medians and per-round ratios)
Needs root (namespaces, FUSE mounts).
"""
import os
import re
import secrets
import statistics
import subprocess
import sys
import threading
import time

import plots
from benchlib import cli
from benchlib.daemons import Daemons, answers, dlfsd_argv
from benchlib.datasets import ensure_dataset
from benchlib.netns import netns
from benchlib.readers import MiB, drop_caches, read_stream
from benchlib.report import log, medians, paired_ratio, write_json
from benchlib.stats import mount_stats

def all_resident(mnt):
    try:
        s = mount_stats(mnt)
    except (OSError, ValueError):
        return False
    c = s.get("cluster")
    # Before its scan and join a dataset has no "load" (dlfsd mounts first).
    return (c is None or c["all_resident"]) and all(d.get("load", {}).get("state") == "done" for d in s["datasets"])


class Cluster:
    """n daemons in n namespaces, striping one dataset."""

    def __init__(self, a, n, daemons):
        self.n, self.tag = n, f"cb{os.getpid()}"
        self.names, self.addrs = netns("up", self.tag, n)
        self.mnts = [os.path.join(a.workdir, f"mnt-{n}-{i}") for i in range(n)]
        token = os.path.join(a.workdir, "token")
        with open(os.open(token, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(secrets.token_hex(32))
        port = 21000 + os.getpid() % 20000
        peers = ",".join(f"{ip}:{port}" for ip in self.addrs)
        env = dict(os.environ, UCX_TLS="tcp", UCX_NET_DEVICES="eth0", UCX_WARN_UNUSED_ENV_VARS="n")
        os.environ.update(env)  # Daemons.start inherits it
        for i in range(n):
            argv = dlfsd_argv(a.dlfsd, self.mnts[i], a.dataset, os.path.join(a.workdir, f"ctl-{n}-{i}.sock"),
                              ["--memory-budget", "4G"], seed=3)
            if n > 1:
                argv = ["nsenter", f"--net=/var/run/netns/{self.names[i]}", "--", *argv, "--token-file", token,
                        "--peers", peers, "--rank", str(i)]
            daemons.start(f"dlfsd {i}/{n}", argv, self.mnts[i], lambda m=self.mnts[i]: answers(m),
                          os.path.join(a.workdir, f"dlfsd-{n}-{i}.log"))
        deadline = time.time() + 300
        while not all(all_resident(m) for m in self.mnts):
            if time.time() > deadline:
                sys.exit(f"{n}-node cluster not resident after 300 s")
            time.sleep(0.2)

    def close(self, daemons):
        daemons.stop_all()
        netns("down", self.tag)


def bench_aggregate(a, n, daemons, results):
    c = Cluster(a, n, daemons)
    try:
        rates = []
        for rep in range(a.repeat):
            epoch = rep + 1
            got = [0] * n
            ends = [0.0] * n
            t0 = time.perf_counter()

            def run(i):
                got[i] = read_stream(f"{c.mnts[i]}/ds/epochs/{epoch}/{n}/{i}.tar")[0]
                ends[i] = time.perf_counter()

            ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            secs = max(ends) - t0
            rate = sum(got) / secs / 1e6
            rates.append(rate)
            log(f"aggregate {n} node(s) rep {rep}: {sum(got) / MiB:.0f} MiB in {secs:.2f} s = {rate:,.0f} MB/s")
        by = [mount_stats(m)["datasets"][0]["bytes_by_source"] for m in c.mnts]
        results["aggregate"][str(n)] = {"mb_s": statistics.median(rates), "runs": rates, "bytes_by_source": by}
    finally:
        c.close(daemons)


def perftest(a, names, addr, outstanding):
    """ucx_perftest ucp_get of 1 MiB from namespace 0 to namespace 1, MB/s (1e6 bytes).

    Same UCX settings as the daemons (UCX_TLS=tcp, eth0, and the 64 KiB TCP
    segments dlfsd sets by default). `outstanding` gets in flight (-O): with 1,
    ucx_perftest's target only progresses between 1 ms polls of its socket
    barrier, so every get pays ~1 ms (tools/bench/ucx_baseline.sh --help); the
    figure with several in flight is the link's real ceiling.
    """
    port = str(13000 + (os.getpid() + outstanding) % 10000)
    env = dict(os.environ, UCX_TLS="tcp", UCX_NET_DEVICES="eth0")
    env.setdefault("UCX_TCP_TX_SEG_SIZE", "64K")
    server = subprocess.Popen(["nsenter", f"--net=/var/run/netns/{names[1]}", "--", "ucx_perftest", "-p", port],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        out = subprocess.run(["timeout", "120", "nsenter", f"--net=/var/run/netns/{names[0]}", "--", "ucx_perftest",
                              addr, "-p", port, "-t", "ucp_get", "-s", str(MiB), "-n", str(a.perftest_iters),
                              "-O", str(outstanding)],
                             env=env, capture_output=True, text=True)
    finally:
        server.kill()
        server.wait()
    # The final line: "Final:  <iters> <lat...> <bw avg MB/s> <bw overall MB/s> ..."; take overall bandwidth.
    for line in out.stdout.splitlines():
        if line.strip().startswith("Final:"):
            nums = re.findall(r"[-+]?\d+\.?\d*", line)
            # columns: iterations, typical lat, avg lat, overall lat, avg bw, overall bw, avg mr, overall mr
            return float(nums[5]) * MiB / 1e6  # ucx_perftest's MB is 2^20 bytes
    sys.exit("ucx_perftest printed no final line:\n" + out.stdout + out.stderr)


def files_in(a, lo, hi):
    """Files wholly inside bytes [lo, hi) of the dataset (canonical order: byte-wise sorted paths)."""
    files = [os.path.relpath(os.path.join(d, f), a.dataset) for d, _, fs in os.walk(a.dataset) for f in fs]
    off, inside = 0, []
    for f in sorted(files, key=lambda p: p.encode()):
        size = os.path.getsize(os.path.join(a.dataset, f))
        if off >= lo and off + size <= hi:
            inside.append(f)
        off += size
    return inside


def read_files(mnt, files, threads):
    """Reads the files (1 MiB reads) with `threads` readers; returns (bytes, seconds)."""
    got = [0] * threads
    t0 = time.perf_counter()

    def run(t):
        got[t] = sum(read_stream(os.path.join(mnt, "ds/raw", f))[0] for f in files[t::threads])

    ts = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(got), time.perf_counter() - t0


def bench_remote(a, daemons, results):
    """Node 0 of 2 reads node 1's stripe (every byte a one-sided get) and its own
    (resident: the FUSE path alone), through its mount; ucx_perftest on the same link."""
    c = Cluster(a, 2, daemons)
    try:
        s1 = mount_stats(c.mnts[1])["datasets"][0]["stripe"]
        s0 = mount_stats(c.mnts[0])["datasets"][0]["stripe"]
        remote_files, local_files = files_in(a, s1["begin"], s1["end"]), files_in(a, s0["begin"], s0["end"])
        runs = {k: [] for k in ("remote_1", "remote_4", "local_1", "local_4", "perftest_1", "perftest_4")}
        for rep in range(a.repeat):
            for threads in (1, 4):
                drop_caches()
                before = mount_stats(c.mnts[0])["datasets"][0]["bytes_by_source"]
                n, secs = read_files(c.mnts[0], remote_files, threads)
                after = mount_stats(c.mnts[0])["datasets"][0]["bytes_by_source"]
                if after["remote"] - before["remote"] < n or after["backend"] != before["backend"]:
                    sys.exit(f"node 0's reads were not all remote gets: {before} -> {after} for {n} bytes")
                runs[f"remote_{threads}"].append(n / secs / 1e6)
                drop_caches()
                n, secs = read_files(c.mnts[0], local_files, threads)
                runs[f"local_{threads}"].append(n / secs / 1e6)
            for o in (1, 4):
                runs[f"perftest_{o}"].append(perftest(a, c.names, c.addrs[1], o))
            log("remote rep {}: node 1's stripe on node 0 {:,.0f} MB/s (1 reader) {:,.0f} (4); own stripe {:,.0f} / {:,.0f}; "
                "ucx_perftest ucp_get 1 MiB -O 1 {:,.0f}, -O 4 {:,.0f}".format(
                    rep, *(runs[k][-1] for k in ("remote_1", "remote_4", "local_1", "local_4", "perftest_1", "perftest_4"))))
        med = medians(runs)
        results["remote"] = {"median_mb_s": med, "runs": runs, "bytes": n}
    finally:
        c.close(daemons)


def parse_builds(spec):
    """"DIR" or "LABEL=DIR,LABEL=DIR,...": [(label, dir)], each with an fs/dlfsd."""
    builds = []
    for item in spec.split(","):
        label, _, path = item.rpartition("=")
        path = os.path.abspath(path)
        if not os.access(os.path.join(path, "fs/dlfsd"), os.X_OK):
            sys.exit(f"--build {item}: no executable fs/dlfsd under {path}")
        builds.append((label or os.path.basename(os.path.dirname(path)) or path, path))
    if len({b[0] for b in builds}) != len(builds):
        sys.exit(f"--build {spec}: two builds have the same label")
    return builds


def ab_aggregate(a, builds, daemons):
    """Each round runs every build once (a.repeat epochs each), the order
    rotating, so that a noisy neighbour hits all builds alike; a build's
    figure is the median of its round medians, its ratio to the first build
    the median of the per-round ratios."""
    n_list = [int(x) for x in a.nodes.split(",")]
    rounds = {b[0]: {n: [] for n in n_list} for b in builds}
    for r in range(a.rounds):
        for k in range(len(builds)):
            label, path = builds[(k + r) % len(builds)]
            a.dlfsd = os.path.join(path, "fs/dlfsd")
            for n in n_list:
                res = {"aggregate": {}}
                bench_aggregate(a, n, daemons, res)
                rounds[label][n].append(res["aggregate"][str(n)]["mb_s"])
                log(f"round {r}: {label} {n} node(s) {rounds[label][n][-1]:,.0f} MB/s")
    first = builds[0][0]
    print(f"\nA/B, aggregate MB/s ({a.rounds} rounds of {a.repeat} epochs; median of round medians; "
          f"ratio to {first}: median of per-round ratios):")
    for n in n_list:
        for label, _ in builds:
            runs = rounds[label][n]
            print(f"  {n} node(s)  {label:>12} {statistics.median(runs):8,.0f}   "
                  f"x{paired_ratio(runs, rounds[first][n]):.2f} of {first}   rounds: "
                  + ", ".join(f"{x:,.0f}" for x in runs))
    return rounds


def main():
    ap = cli.parser(__doc__, workdir="/tmp/dlfs-cluster-bench", repeat=3, json="write all results here",
                    only="aggregate,remote",
                    build="a build directory, or LABEL=DIR,LABEL=DIR,... for an A/B of the aggregate")
    ap.add_argument("--rounds", type=int, default=3, help="A/B rounds (several builds only)")
    ap.add_argument("--size", type=cli.size_arg, default=1 << 30, help="dataset size (files of 1 MiB)")
    ap.add_argument("--nodes", default="1,2,3")
    ap.add_argument("--perftest-iters", type=int, default=2000)
    ap.add_argument("--plots", help="directory for nodes_vs_throughput.png (default: --json's directory, else --workdir)")
    a = ap.parse_args()
    cli.require_root(ap, "network namespaces and FUSE mounts")
    builds = parse_builds(a.build)
    a.dlfsd = os.path.join(builds[0][1], "fs/dlfsd")
    os.makedirs(a.workdir, exist_ok=True)
    a.dataset = os.path.join(a.workdir, f"data-{a.size >> 20}M")
    ensure_dataset(a.dataset, a.size // MiB, MiB, 16)
    if len(builds) > 1:
        with Daemons() as daemons:
            rounds = ab_aggregate(a, builds, daemons)
        if a.json:
            write_json(a.json, {"ab_aggregate": {k: {str(n): v for n, v in r.items()} for k, r in rounds.items()}})
        return
    results = {"aggregate": {}}
    with Daemons() as daemons:
        if "aggregate" in a.only:
            for n in [int(x) for x in a.nodes.split(",")]:
                bench_aggregate(a, n, daemons, results)
        if "remote" in a.only:
            bench_remote(a, daemons, results)
    print("\nEpoch-view streams, every node at once (MB/s, median; all nodes share this machine's 2 cores):")
    base = results["aggregate"].get("1", {}).get("mb_s")
    for n, r in results["aggregate"].items():
        ratio = f"   {r['mb_s'] / base:.2f}x of 1 node" if base else ""
        remote = sum(b["remote"] for b in r["bytes_by_source"])
        backend = sum(b["backend"] for b in r["bytes_by_source"])
        print(f"  {n} node(s)  {r['mb_s']:8,.0f}{ratio}   remote {remote / MiB:,.0f} MiB, backend {backend / MiB:,.0f} MiB")
    if "remote" in results:
        m = results["remote"]["median_mb_s"]
        best = max(m["perftest_1"], m["perftest_4"])
        print("Remote-get path: node 0 reading node 1's stripe through its mount (1 MiB reads, MB/s, median):")
        for t in (1, 4):
            print(f"  {t} reader(s)  remote {m[f'remote_{t}']:8,.0f}   own stripe (FUSE path alone) {m[f'local_{t}']:8,.0f}"
                  f"   remote/own {m[f'remote_{t}'] / m[f'local_{t}']:.2f}x")
        print(f"  ucx_perftest ucp_get 1 MiB, same link and UCX settings: -O 1 {m['perftest_1']:,.0f}, -O 4 {m['perftest_4']:,.0f}")
        print(f"  remote path / ucx_perftest: 1 reader {m['remote_1'] / m['perftest_1']:.2f}x of -O 1; "
              f"4 readers {m['remote_4'] / best:.2f}x of the best ({best:,.0f})")
    if a.json:
        write_json(a.json, results)
    if results["aggregate"]:
        plots.save("nodes_vs_throughput", results["aggregate"], a.plots or plots.default_dir(a.json, a.workdir),
                   f"{a.size >> 20} MiB of 1 MiB files, {plots.machine()}")


if __name__ == "__main__":
    main()
