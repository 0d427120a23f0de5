#!/usr/bin/env python3
"""Rounds over the job's memory against each node's own rounds, and DeepIO's
Fig. 13 (epoch time against the training step time) on this machine's scale.
Every figure printed is measured in this run.

N daemons (default 3), each in its own network namespace (UCX over tcp), one
dataset of files larger than their memory. Every node runs one "rank": it
streams its epoch view (epochs/<e>/<N>/<r>.tar) member by member as a
training loop would, sleeping one training step after every batch of
samples. For each R (the aggregate memory over the dataset) and step time:

  R        DeepIO's: the job's memory (all budgets) over the dataset;
  cluster  round_span = cluster (the default): rounds of about R / 2 x the
           dataset (two slots: the next round loads while one is read),
           striped over the members' memory; every rank reads any sample of
           the round from the member that holds it;
  node     round_span = node: each node runs its own rounds over its own
           memory (R / 2N each), the same budget;
  R = 1    the dataset striped over the budgets, all resident: the
           ceiling, no rounds.

Printed per run (medians over --repeat epochs, each a new epoch so the page
cache never answers): samples/s per rank, the epoch time of the slowest rank
against the steps' own time (the compute), stalls per round (a rank waited
for a load, or for a slot other ranks still read), backend bytes per epoch
over the dataset (all nodes), bytes from peers' rounds, R and RL.

All nodes share this machine's cores and its one page cache (the backend is
a local directory): what the ratios show is the work the backend and the
network are spared, not what separate machines would reach.

usage: cluster_rounds_bench.py [--build DIR] [--workdir DIR] [--nodes 3]
           [--files 2400] [--file-size 50K] [--ratios 1,0.5,0.25]
           [--steps-ms 100,50,10,5] [--batch 16] [--repeat 2] [--json out.json]
Needs root (namespaces, FUSE mounts).
"""
import os
import secrets
import statistics
import sys
import tarfile
import threading
import time

from benchlib import cli
from benchlib.daemons import Daemons, answers, dlfsd_argv
from benchlib.datasets import ensure_dataset
from benchlib.netns import netns
from benchlib.readers import MiB
from benchlib.report import log, write_json
from benchlib.stats import mount_stats

def budget_for(ratio, total, n):
    """The per-node memory budget of DeepIO's R: the job's memory over the dataset.
    R = 1 holds the dataset striped; below 1, each node's two round slots are half
    its budget (double buffering), so rounds are about R / 2 of the dataset."""
    if ratio >= 1:
        return total // n + (16 << 20)  # this node's stripe, with room
    return int(ratio * total / n + 2 * CHUNK)  # a chunk per slot that packing may leave over


def joined(mnts, n):
    try:
        for m in mnts:
            s = mount_stats(m)
            if sum(x["state"] in ("up", "self") for x in s["cluster"]["members"]) != n:
                return False
            if any(d.get("load", {}).get("state") != "done" for d in s["datasets"]):
                return False
        return True
    except (OSError, ValueError, KeyError, TypeError):
        return False


def start(a, daemons, names, addrs, budget, span, tag):
    mnts = [os.path.join(a.workdir, f"mnt-{tag}-{i}") for i in range(a.nodes)]
    port = 22000 + os.getpid() % 20000
    peers = ",".join(f"{ip}:{port}" for ip in addrs)
    for i in range(a.nodes):
        argv = dlfsd_argv(a.dlfsd, mnts[i], a.dataset, os.path.join(a.workdir, f"ctl-{tag}-{i}.sock"),
                          ["--memory-budget", str(budget), "--extent-size", str(CHUNK), "--round-chunk", str(CHUNK),
                           "--round-span", span, "--token-file", a.token, "--peers", peers, "--rank", str(i)],
                          seed=7)
        argv = ["nsenter", f"--net=/var/run/netns/{names[i]}", "--", *argv]
        daemons.start(f"dlfsd {tag} {i}", argv, mnts[i], lambda m=mnts[i]: answers(m),
                      os.path.join(a.workdir, f"dlfsd-{tag}-{i}.log"))
    deadline = time.time() + 300
    while not joined(mnts, a.nodes):
        if time.time() > deadline:
            sys.exit(f"{tag}: the {a.nodes} nodes did not join and load within 300 s")
        time.sleep(0.2)
    return mnts


def train(path, batch, step_s):
    """Reads a view's members in order, one training step after every `batch`: (samples, seconds)."""
    t0 = time.perf_counter()
    samples = 0
    with open(path, "rb", buffering=0) as raw, tarfile.open(fileobj=raw, mode="r|") as t:
        for member in t:
            f = t.extractfile(member)
            if f is None:
                continue
            f.read()
            samples += 1
            if samples % batch == 0 and step_s > 0:
                time.sleep(step_s)
    return samples, time.perf_counter() - t0


def counters(mnts):
    """Per node: (round loads' bytes, other backend bytes, peers' round bytes, stalls, stalls held, plan)."""
    out = []
    for m in mnts:
        d = mount_stats(m)["datasets"][0]
        r = d.get("rounds") or {}
        loaded = sum(ev["bytes"] for ev in r.get("timeline", []))
        out.append({"loaded": loaded, "backend": d["bytes_by_source"]["backend"],
                    "peers": d["views"]["epochs"]["round_remote_bytes"], "stalls": r.get("stalls", 0),
                    "stalls_held": r.get("stalls_held", 0), "plan": d["plan"]})
    return out


def run_case(a, daemons, names, addrs, ratio, span, results):
    budget = budget_for(ratio, a.total, a.nodes)
    tag = f"{span}-{ratio}"
    mnts = start(a, daemons, names, addrs, budget, span, tag)
    try:
        plan = counters(mnts)[0]["plan"]
        rounds = plan.get("rounds_per_epoch", 1)
        log(f"{tag}: budget {budget / MiB:.1f} MiB a node; R {plan['shuffle_ratio']:.3f}, RL "
            f"{plan['randomization_level']:.4f}, {rounds} rounds/epoch, rounds over {plan.get('round_nodes', 1)} node(s)")
        epoch = 0
        for step_ms in a.steps:
            runs = []
            for _ in range(a.repeat):
                before = counters(mnts)
                got = [None] * a.nodes

                def rank(i, e=epoch):
                    got[i] = train(f"{mnts[i]}/ds/epochs/{e}/{a.nodes}/{i}.tar", a.batch, step_ms / 1000)

                ts = [threading.Thread(target=rank, args=(i,)) for i in range(a.nodes)]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()
                after = counters(mnts)
                d = {k: sum(x[k] - y[k] for x, y in zip(after, before))
                     for k in ("loaded", "backend", "peers", "stalls", "stalls_held")}
                slowest = max(s for _, s in got)
                compute = max(n // a.batch for n, _ in got) * step_ms / 1000
                runs.append({"epoch": epoch, "samples_s_rank": statistics.median(n / s for n, s in got),
                             "epoch_s": slowest, "compute_s": compute,
                             "backend_x": (d["loaded"] + d["backend"]) / a.total, "peers_mb": d["peers"] / 1e6,
                             "stalls_round": d["stalls"] / rounds, "stalls_held": d["stalls_held"]})
                epoch += 1
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k != "epoch"}
            med.update(R=plan["shuffle_ratio"], RL=plan["randomization_level"], runs=runs)
            results.setdefault(str(ratio), {}).setdefault(span, {})[str(step_ms)] = med
            log(f"{tag} step {step_ms} ms: {med['samples_s_rank']:,.0f} samples/s a rank, epoch {med['epoch_s']:.2f} s "
                f"(compute {med['compute_s']:.2f} s), backend {med['backend_x']:.2f}x the dataset, "
                f"{med['peers_mb']:.0f} MB from peers' rounds, {med['stalls_round']:.2f} stalls a round")
        # Each node's round timeline (loads, waits, releases), for a look at the stalls (--json).
        results[str(ratio)][span]["rounds"] = [mount_stats(m)["datasets"][0].get("rounds") for m in mnts]
    finally:
        daemons.stop_all()


def main():
    ap = cli.parser(__doc__, workdir="/tmp/dlfs-rounds-bench", repeat=2, json="write all results here")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--files", type=int, default=2400)
    ap.add_argument("--file-size", type=cli.size_arg, default=50 << 10)
    ap.add_argument("--ratios", default="1,0.5,0.25", help="aggregate R to run (1: all resident, no rounds)")
    ap.add_argument("--steps-ms", default="100,50,10,5", help="training step times (ms)")
    ap.add_argument("--batch", type=int, default=16, help="samples per training step")
    a = ap.parse_args()
    cli.require_root(ap, "network namespaces and FUSE mounts")
    a.dlfsd = os.path.join(a.build, "fs/dlfsd")
    a.steps = [float(x) for x in a.steps_ms.split(",")]
    os.makedirs(a.workdir, exist_ok=True)
    a.dataset = os.path.join(a.workdir, f"data-{a.files}x{a.file_size >> 10}K")
    ensure_dataset(a.dataset, a.files, a.file_size, 12, jitter=0.5)
    a.total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(a.dataset) for f in fs)
    a.token = os.path.join(a.workdir, "token")
    with open(os.open(a.token, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(secrets.token_hex(32))
    os.environ.update(UCX_TLS="tcp", UCX_NET_DEVICES="eth0", UCX_WARN_UNUSED_ENV_VARS="n")
    tag = f"rb{os.getpid() % 100000}"
    names, addrs = netns("up", tag, a.nodes, need_ucx=True)
    results = {}
    try:
        with Daemons() as daemons:
            for ratio in [float(x) for x in a.ratios.split(",")]:
                for span in (["cluster"] if ratio >= 1 else ["cluster", "node"]):
                    run_case(a, daemons, names, addrs, ratio, span, results)
    finally:
        netns("down", tag)
    print(f"\n{a.nodes} nodes, {a.total / 1e6:.0f} MB in {a.files} files, batches of {a.batch}; medians of "
          f"{a.repeat} epochs. Per R: rounds over the nodes (cluster) and each node's own (node), same budget.")
    print(f"{'R mem':>5} {'plan R':>6} {'rounds':>7} {'step ms':>7} {'samples/s/rank':>14} {'epoch s':>8} {'compute s':>9} "
          f"{'backend x':>9} {'peers MB':>8} {'stalls/rnd':>10} {'RL':>7}  cluster/node samples/s")
    for ratio, spans in results.items():
        for step in [str(s) for s in a.steps]:
            for span, by_step in spans.items():
                if step not in by_step:
                    continue
                m = by_step[step]
                ratio_txt = ""
                if span == "cluster" and "node" in spans:
                    ratio_txt = f"  {m['samples_s_rank'] / spans['node'][step]['samples_s_rank']:.2f}x"
                print(f"{float(ratio):5.2f} {m['R']:6.3f} {span:>7} {float(step):7.0f} {m['samples_s_rank']:14,.0f} {m['epoch_s']:8.2f} "
                      f"{m['compute_s']:9.2f} {m['backend_x']:9.2f} {m['peers_mb']:8.0f} {m['stalls_round']:10.2f} "
                      f"{m['RL']:7.4f}{ratio_txt}")
    if a.json:
        write_json(a.json, {"nodes": a.nodes, "dataset_bytes": a.total, "batch": a.batch, "results": results})


if __name__ == "__main__":
    main()
