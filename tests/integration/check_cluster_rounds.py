#!/usr/bin/env python3
"""Checks the epoch views that the nodes of 39_cluster_rounds.sh streamed.

  check_cluster_rounds.py views BACKEND EPOCHS W TAR...   (TAR: <dir>/e<E>-r<R>.tar, one per epoch and rank)
      every member of every rank's .tar holds its backend file's bytes, and
      across the W ranks of an epoch every file appears at least once and
      only padding repeats one (at most W - 1 repeats);
  check_cluster_rounds.py bytes BACKEND TAR...
      every member of each .tar holds its backend file's bytes (no coverage:
      views of the ranks that were read);
  check_cluster_rounds.py stats TOTAL EPOCHS STATS...  [--per-node]      (each node's /.dlfs/stats, copied)
      rounds span every node, peers served chunks of rounds (round_remote_bytes
      > 0 on every node), and the backend bytes all nodes read for the views
      (round loads + reads that fell back) over the epochs are printed against
      the dataset's size; fails above 2x the dataset per epoch. --per-node:
      the same nodes with round_span = node (each loads whole rounds) only
      prints its figures, for the comparison.
"""
import json
import os
import re
import sys
import tarfile


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


def check_stats(total, epochs, stats_files, per_node=False):
    backend = remote = 0
    for path in stats_files:
        with open(path) as f:
            s = json.load(f)
        d = s["datasets"][0]
        want = 1 if per_node else len(stats_files)
        if d["plan"]["round_nodes"] != want:
            fail(f"{path}: rounds span {d['plan']['round_nodes']} nodes, not {want}")
        loaded = sum(ev["bytes"] for ev in d["rounds"]["timeline"])
        # Reads of the backend besides round loads: the readers' and their read-ahead rings' (the fetcher's).
        fell_back = d["bytes_by_source"]["backend"]
        got = d["views"]["epochs"]["round_remote_bytes"]
        if got <= 0 and not per_node:
            fail(f"{path}: no chunk of a round came from another node")
        print(f"{path}: R {d['plan']['shuffle_ratio']:.3f} RL {d['plan']['randomization_level']:.4f}, "
              f"{d['plan']['rounds_per_epoch']} rounds/epoch; loaded {loaded} bytes of rounds, "
              f"{fell_back} other bytes from the backend, {got} bytes from peers' rounds, "
              f"stalls {d['rounds']['stalls']}")
        loads = [f"{ev['epoch']}/{ev['round']}" for ev in d["rounds"]["timeline"]]
        print(f"  rounds loaded, in order: {' '.join(loads)}")
        backend += loaded + fell_back
        remote += got
    per_epoch = backend / epochs / total
    print(f"{'per-node rounds' if per_node else 'rounds over the nodes'}, all nodes: {backend} backend bytes over {epochs} epochs = {per_epoch:.2f}x the dataset per epoch; "
          f"{remote} bytes from peers' rounds")
    if per_epoch > 2.0 and not per_node:
        fail(f"the nodes read {per_epoch:.2f}x the dataset from the backend per epoch (rounds over their memory "
             "should read it about once)")


def main():
    if len(sys.argv) < 2:
        fail(__doc__)
    if sys.argv[1] == "views":
        check_views(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:])
    elif sys.argv[1] == "bytes":
        check_views(sys.argv[2], 0, 1, sys.argv[3:], coverage=False)
    elif sys.argv[1] == "stats":
        args = [a for a in sys.argv[4:] if a != "--per-node"]
        check_stats(int(sys.argv[2]), int(sys.argv[3]), args, per_node="--per-node" in sys.argv[4:])
    else:
        fail(__doc__)


if __name__ == "__main__":
    main()
