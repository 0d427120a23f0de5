#!/usr/bin/env python3
"""Checks the epoch views that the nodes of 39_cluster_rounds.sh streamed.

  check_cluster_rounds.py views BACKEND EPOCHS W TAR...   (TAR: <dir>/e<E>-r<R>.tar, one per epoch and rank)
      every member of every rank's .tar holds its backend file's bytes, and
      across the W ranks of an epoch every file appears at least once and
      only padding repeats one (at most W - 1 repeats);
  check_cluster_rounds.py follow EPOCH STATS [--caught-up]
      the node of STATS, whose rank read nothing of epoch EPOCH, loaded every
      round of it anyway, in order, and the other nodes read its part of them;
      --caught-up (a node that joined late): the rounds from some round on,
      through the epoch's last, in order;
  check_cluster_rounds.py bytes BACKEND TAR...
      every member of each .tar holds its backend file's bytes (no coverage:
      views of the ranks that were read);
  check_cluster_rounds.py stats TOTAL EPOCHS STATS...  [--per-node]      (each node's /.dlfs/stats, copied)
      rounds span every node, each node loaded every round of the epochs once
      and in order, peers served chunks of rounds (round_remote_bytes > 0 on
      every node), and the backend bytes all nodes read for the views
      (round loads + reads that fell back) over the epochs are printed against
      the dataset's size; fails above MAX_PER_EPOCH x the dataset per epoch,
      if R is not the aggregate's or the RL printed is not DeepIO's formula's
      for that R. --per-node:
      the same nodes with round_span = node (each loads whole rounds) only
      prints its figures, for the comparison.
"""
import json
import math
import os
import re
import sys
import tarfile


# Backend bytes per epoch, all nodes together, over the dataset's size: rounds
# that move together read it once; a rank that stalls past the release bound
# (RoundPipeline::kReleaseIdle) sends some samples to the backend again.
MAX_PER_EPOCH = 1.3


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def check_views(backend, epochs, w, tars, coverage=True):
    files = sorted(os.path.relpath(os.path.join(d, f), backend) for d, _, fs in os.walk(backend) for f in fs)
    by_epoch = {}
    for path in tars:
        m = re.search(r"e(\d+)-r(\d+)\.tar$", path)
        if not m:
            fail(f"{path}: not named e<E>-r<R>.tar")
        e = int(m.group(1))
        with tarfile.open(path) as t:
            for member in t.getmembers():
                data = t.extractfile(member).read()
                # Members are <k>-<relative path> or the path itself: find the backend file.
                name = member.name
                rel = name if name in files or "-" not in name else name.split("-", 1)[1]
                if rel not in files:
                    fail(f"{path}: member {name} names no backend file")
                with open(os.path.join(backend, rel), "rb") as f:
                    if f.read() != data:
                        fail(f"{path}: member {name} differs from the backend file {rel}")
                by_epoch.setdefault(e, []).append(rel)
    if not coverage:
        print(f"{sum(len(v) for v in by_epoch.values())} members of {len(tars)} views, every byte the backend's")
        return
    for e in range(epochs):
        seen = by_epoch.get(e, [])
        missing = set(files) - set(seen)
        if missing:
            fail(f"epoch {e}: {len(missing)} files in no rank's view, e.g. {sorted(missing)[:3]}")
        repeats = len(seen) - len(set(seen))
        if repeats > w - 1:
            fail(f"epoch {e}: {repeats} repeated samples across the ranks (padding allows {w - 1})")
        print(f"epoch {e}: {len(set(seen))} files once across {w} ranks ({repeats} padding), every byte the backend's")


def deepio_rl(rounds, chunks):
    """DeepIO's RL (eq. 1-5) of an epoch served in `rounds`, [(n_j samples, c_j chunks)]
    out of `chunks` chunks: P(i) = c_j / C_j x 1 / (n_j - t), Q(i) = 1 / (N - i),
    RL = -sum Q log2 P / -sum Q log2 Q (with even rounds, c_j / C_j = N_c / (N_f - N_c r))."""
    n = sum(s for s, _ in rounds)
    if len(rounds) <= 1 or n <= 1:
        return 1.0
    h = h_fully = 0.0
    i, left = 0, chunks
    for n_j, c_j in rounds:
        for t in range(n_j):
            q = 1.0 / (n - i)
            h -= q * math.log2(c_j / left / (n_j - t))
            h_fully -= q * math.log2(q)
            i += 1
        left -= c_j
    return h / h_fully


def check_stats(total, epochs, stats_files, per_node=False):
    backend = ahead = remote = 0
    for path in stats_files:
        with open(path) as f:
            s = json.load(f)
        d = s["datasets"][0]
        plan = d["plan"]
        want = 1 if per_node else len(stats_files)
        if plan["round_nodes"] != want:
            fail(f"{path}: rounds span {plan['round_nodes']} nodes, not {want}")
        # R is the aggregate's: the members' slots (half a budget each, less
        # the largest chunk that packing may leave over) over the dataset.
        slot = plan["round_memory_bytes"] // 2 - plan["round_chunk_bytes"]
        if plan["shuffle_ratio"] * total < 0.9 * want * slot:
            fail(f"{path}: R = {plan['shuffle_ratio']:.3f} is not that of {want} nodes' memory "
                 f"({want} x {slot} bytes of {total})")
        timeline = d["rounds"]["timeline"]
        # The RL printed (the plan's, of epoch 0) against DeepIO's formula over epoch 0's rounds as loaded.
        first = {ev["round"]: (ev["samples"], ev["chunks"]) for ev in timeline if ev["epoch"] == 0}
        complete = sorted(first) == list(range(plan["rounds_per_epoch"]))
        if not complete and not per_node:
            fail(f"{path}: epoch 0's rounds loaded were {sorted(first)}, not the {plan['rounds_per_epoch']} planned")
        rl = deepio_rl([first[r] for r in sorted(first)], plan["chunks"]) if complete else float("nan")
        if complete and abs(rl - plan["randomization_level"]) > 1e-6:
            fail(f"{path}: RL {plan['randomization_level']:.6f} printed, DeepIO's formula gives {rl:.6f} "
                 f"for the {plan['rounds_per_epoch']} rounds of epoch 0 over {plan['chunks']} chunks")
        loaded = sum(ev["bytes"] for ev in timeline if ev["epoch"] < epochs)
        # The first round of the epoch after the last one read, loaded ahead.
        ahead += sum(ev["bytes"] for ev in timeline if ev["epoch"] >= epochs)
        # Reads of the backend besides round loads: the readers' and their read-ahead rings' (the fetcher's).
        fell_back = d["bytes_by_source"]["backend"]
        got = d["views"]["epochs"]["round_remote_bytes"]
        if got <= 0 and not per_node:
            fail(f"{path}: no chunk of a round came from another node")
        released = {}
        for ev in timeline:
            if ev.get("release"):
                released[ev["release"]] = released.get(ev["release"], 0) + 1
        print(f"{path}: R {plan['shuffle_ratio']:.3f} RL {plan['randomization_level']:.4f} (DeepIO's formula: "
              f"{rl:.4f}), {plan['rounds_per_epoch']} rounds/epoch; loaded {loaded} bytes of rounds, "
              f"{fell_back} other bytes from the backend, {got} bytes from peers' rounds, "
              f"stalls {d['rounds']['stalls']} ({d['rounds'].get('stalls_held', 0)} for a slot others read)"
              + (f"; rounds released: {released}" if released else ""))
        loads = [f"{ev['epoch']}/{ev['round']}" for ev in timeline]
        print(f"  rounds loaded, in order: {' '.join(loads)}")
        # Rounds move together: every member loads each round once, in one sequence.
        sequence = [(ev["epoch"], ev["round"]) for ev in timeline if ev["epoch"] < epochs]
        planned = [(e, r) for e in range(epochs) for r in range(plan["rounds_per_epoch"])]
        if not per_node and sequence != planned:
            fail(f"{path}: rounds loaded {loads}, not each round of the {epochs} epochs once, in order")
        backend += loaded + fell_back
        remote += got
    per_epoch = backend / epochs / total
    print(f"{'per-node rounds' if per_node else 'rounds over the nodes'}, all nodes: {backend} backend bytes over "
          f"{epochs} epochs = {per_epoch:.2f}x the dataset per epoch (and {ahead} bytes of the next epoch loaded "
          f"ahead); {remote} bytes from peers' rounds")
    if per_epoch > MAX_PER_EPOCH and not per_node:
        fail(f"the nodes read {per_epoch:.2f}x the dataset from the backend per epoch (rounds over their memory "
             f"read it about once; at most {MAX_PER_EPOCH}x passes)")


def check_follow(epoch, path, caught_up=False):
    with open(path) as f:
        d = json.load(f)["datasets"][0]
    timeline = d["rounds"]["timeline"]
    loaded = [ev["round"] for ev in timeline if ev["epoch"] == epoch]
    want = list(range(loaded[0] if caught_up and loaded else 0, d["plan"]["rounds_per_epoch"]))
    if loaded != want:
        fail(f"{path}: rounds of epoch {epoch} loaded {loaded}, not {want}")
    read = sum(ev.get("read_bytes", 0) for ev in timeline if ev["epoch"] == epoch)
    if read <= 0:
        fail(f"{path}: no other node read its part of epoch {epoch}'s rounds")
    print(f"{path}: no reader, loaded rounds {loaded} of epoch {epoch} following the others; "
          f"{read} bytes of them read by the other nodes")


def main():
    if len(sys.argv) < 2:
        fail(__doc__)
    if sys.argv[1] == "views":
        check_views(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:])
    elif sys.argv[1] == "follow":
        check_follow(int(sys.argv[2]), sys.argv[3], caught_up="--caught-up" in sys.argv[4:])
    elif sys.argv[1] == "bytes":
        check_views(sys.argv[2], 0, 1, sys.argv[3:], coverage=False)
    elif sys.argv[1] == "stats":
        args = [a for a in sys.argv[4:] if a != "--per-node"]
        check_stats(int(sys.argv[2]), int(sys.argv[3]), args, per_node="--per-node" in sys.argv[4:])
    else:
        fail(__doc__)


if __name__ == "__main__":
    main()
