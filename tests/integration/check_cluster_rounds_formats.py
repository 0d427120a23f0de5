#!/usr/bin/env python3
"""Datasets of every format in rounds over the job's memory, for
40_cluster_rounds_formats.sh: makes them, checks the views the nodes
streamed, checks and prints each dataset's rounds from the nodes' stats.

  check_cluster_rounds_formats.py make KIND DIR
      KIND: tfrecord (3 TFRecord files; --empty-every N: every Nth record
      empty; CRC32C from
      python3-crcmod, or a table here: independent of DLFS), lmdb (python3-lmdb:
      16_lmdb_views' mixed sizes, in-leaf and overflow values), wds (WebDataset
      shards as check_webdataset.py makes them, more), files (plain files:
      gen_dataset.py's layout), groups (files of several extensions per key, for group_by
      first-dot: x.jpg, x.cls, some x.seg.png).
  check_cluster_rounds_formats.py views KIND SRC EPOCHS W DIR [--window N]
      DIR/epochs/<e>/<W>/<r>.{tar,tfrecord,index,order}: what rank r read of
      epoch e (the stream), its .index and the stream's user.dlfs.order. Every sample served is the source's, byte
      for byte, by the method of that format's single-node scenario: TFRecord
      views parsed with every CRC checked (26_tfrecord), LMDB values against
      python3-lmdb's (16_lmdb_views), WebDataset and groups through the Python
      client's TarView as (key, {ext: bytes}) (27_webdataset), files against
      the backend file; an opportunistic stream (--window: the dataset's
      opportunistic_window) holds each planned sample of the rank once, fewer
      than N positions from its place in the .index (14_opportunistic). Across
      the W ranks of an epoch every sample appears, and only padding repeats
      one (at most W - 1).
  check_cluster_rounds_formats.py stats NAME EPOCHS STATS... [--budget BYTES --before NAME...] [--ratio R] [--strict]
      the dataset NAME in each node's stats (copies of /.dlfs/stats): rounds
      span every node (plan.round_nodes), several rounds per epoch, R the
      nodes' slots together (--ratio: R is its shuffle_ratio); each node
      loaded rounds in one sequence, each once; the nodes together loaded
      every round of each epoch (holding every sample), the same rounds on
      every node, and the RL printed is DeepIO's formula's for epoch 0's
      rounds; the nodes read at least MIN_REMOTE_SHARE of their share of
      the other nodes' parts from them (views.epochs.round_remote_bytes,
      summed over the nodes; a node that read none, or did not load its part
      of a round, is noted, --strict: fails).
      With --budget: its round memory is what the datasets before it
      (--before) left of the budget. Prints R, RL, rounds per epoch, the
      backend bytes all nodes read per epoch against the dataset's size, the
      bytes from peers; fails above MAX_PER_EPOCH x the dataset per epoch
      (MAX_PER_EPOCH_SKIPPED when a node skipped rounds).
"""
import argparse
import collections
import io
import json
import os
import random
import subprocess
import sys
import tarfile

from checklib import fail
from tfrecord_frames import frame, parse
from check_cluster_rounds import deepio_rl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(1, os.path.join(HERE, "..", "..", "python"))

# Backend bytes per epoch, all nodes together, over the dataset's size: rounds
# over the nodes read it about once; rounds per node read it 2-4x. Here five
# datasets stream at once on the machine's cores and a rank's share of a
# round (about 0.5 MB) is below the kernel's 1 MiB read-ahead, so a read
# spans rounds and some samples go to the backend (1.1-1.5x seen): the bound
# is looser than 39_cluster_rounds' 1.3x, which measures the claim.
MAX_PER_EPOCH = 1.8
MAX_PER_EPOCH_SKIPPED = 2.0
MIN_REMOTE_SHARE = 0.25

# ---------------------------------------------------------------- TFRecord


def tf_parse(blob, what):
    return parse(blob, what, fail)


def tf_source(src):
    """{(file, record index): data} of the TFRecord files in SRC."""
    out = {}
    for name in sorted(os.listdir(src)):
        if name.endswith(".idx"):
            continue
        with open(os.path.join(src, name), "rb") as f:
            for k, data in enumerate(tf_parse(f.read(), name)):
                out[name, k] = data
    return out


# ---------------------------------------------------------------- making


def make(kind, d, empty_every=0):
    """About 6 MB of samples of each kind."""
    rng = random.Random(40)
    if kind == "tfrecord":
        os.makedirs(d)
        for f in range(3):
            with open(os.path.join(d, f"train-{f:05d}-of-00003"), "wb") as out:
                for i in range(351):
                    empty = empty_every and i % empty_every == 5
                    out.write(frame(b"" if empty else rng.randbytes(rng.randrange(1, 12000))))
    elif kind == "lmdb":
        subprocess.run([sys.executable, os.path.join(HERE, "lmdb_build.py"), "make", d, "380", "shuffled", "mixed",
                        "50"], check=True)
    elif kind == "wds":
        # As check_webdataset.py's shards (pax ones with a non-ASCII and a long
        # name, GNU ones, a directory entry each), more of them.
        os.makedirs(d)
        for s in range(15):
            fmt = tarfile.PAX_FORMAT if s % 2 == 0 else tarfile.GNU_FORMAT
            with tarfile.open(os.path.join(d, f"shard-{s:04d}.tar"), "w", format=fmt) as tar:
                info = tarfile.TarInfo(f"s{s}")
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
                for k in range(40):
                    key = f"s{s}/sample{k:04d}"
                    if k == 5:
                        key = f"s{s}/" + "long" * 30 + f"-{k}"
                    if k == 7 and fmt == tarfile.PAX_FORMAT:
                        key = f"s{s}/caf\u00e9-\u00fcber-{k}"
                    members = {"jpg": rng.randbytes(rng.randint(1, 20000)), "cls": str(rng.randint(0, 9)).encode()}
                    if k % 3 == 0:
                        members["meta.json"] = b'{"k": %d}' % k
                    for ext, data in members.items():
                        info = tarfile.TarInfo(f"{key}.{ext}")
                        info.size, info.mtime, info.mode = len(data), 1700000000, 0o644
                        tar.addfile(info, io.BytesIO(data))
    elif kind == "files":
        for i in range(601):
            path = os.path.join(d, f"class_{i % 6:04d}", f"img_{i:06d}.bin")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(rng.randbytes(rng.randint(5000, 15000)))
    elif kind == "groups":
        for i in range(550):
            stem = os.path.join(d, f"n{i % 5:04d}", f"x{i:05d}")
            os.makedirs(os.path.dirname(stem), exist_ok=True)
            members = {"jpg": rng.randbytes(rng.randint(1, 20000)), "cls": str(rng.randint(0, 9)).encode()}
            if i % 4 == 0:
                members["seg.png"] = rng.randbytes(rng.randint(100, 3000))
            for ext, data in members.items():
                with open(f"{stem}.{ext}", "wb") as f:
                    f.write(data)
    else:
        fail(f"make: no kind {kind!r}")


# ---------------------------------------------------------------- views


def tar_members(path):
    with tarfile.open(path) as t:
        return [(m.name, t.extractfile(m).read()) for m in t.getmembers()]


def index_names(path):
    from dlfs.index import ViewIndex
    return ViewIndex(path).names


def client_samples(d, epoch, w, rank):
    """(key, {ext: bytes}) of the streamed .tar, read by the Python client's TarView."""
    from dlfs.view import TarView
    return list(TarView(d, epoch, rank, w).samples())


def group_source(src):
    """key -> {ext: bytes}: the files of SRC grouped by the first dot of the basename."""
    out = {}
    for root, _, files in os.walk(src):
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), src)
            key = os.path.join(os.path.dirname(rel), name.split(".", 1)[0])
            ext = name.split(".", 1)[1] if "." in name else ""
            with open(os.path.join(root, name), "rb") as f:
                out.setdefault(key, {})[ext] = f.read()
    return out


def check_views(kind, src, epochs, w, d, window):
    if kind == "tfrecord":
        source = tf_source(src)
        everything = list(source)
    elif kind == "lmdb":
        import lmdb  # python3-lmdb: the reference reader
        env = lmdb.open(src, readonly=True, lock=False, subdir=True)
        with env.begin() as txn:
            values = [bytes(v) for _, v in txn.cursor()]
        env.close()
        everything = list(range(len(values)))
    elif kind == "wds":
        from check_webdataset import shard_samples
        groups = {k: members for k, (_, members) in shard_samples(src).items()}
        everything = list(groups)
    elif kind == "groups":
        groups = group_source(src)
        everything = list(groups)
    else:
        everything = sorted(os.path.relpath(os.path.join(r, f), src) for r, _, fs in os.walk(src) for f in fs)
    moved = 0
    for e in range(epochs):
        seen = []
        for r in range(w):
            stem = os.path.join(d, "epochs", str(e), str(w), str(r))
            what = f"epoch {e} rank {r}"
            if kind == "tfrecord" and os.path.exists(stem + ".tfrecord"):
                # Record k of the .tfrecord view is the .index's position k, named <file>/<record>.bin.
                with open(stem + ".tfrecord", "rb") as f:
                    records = tf_parse(f.read(), stem + ".tfrecord")
                names = index_names(stem + ".index")
                if len(records) != len(names):
                    fail(f"{what}: {len(records)} records in the .tfrecord view, {len(names)} in the .index")
                for k, (data, name) in enumerate(zip(records, names)):
                    f_name, rec = name.rsplit("/", 1)
                    sid = (f_name, int(rec.split(".")[0]))
                    if source.get(sid) != data:
                        fail(f"{what}: record {k} ({name}) is not the source's record {sid}")
                    seen.append(sid)
            elif kind == "tfrecord":
                members = tar_members(stem + ".tar")
                for name, data in members:
                    f_name, rec = name.rsplit("/", 1)
                    sid = (f_name, int(rec.split(".")[0]))
                    if source.get(sid) != data:
                        fail(f"{what}: member {name} is not the source's record {sid}")
                    seen.append(sid)
                if [name for name, _ in members] != index_names(stem + ".index"):
                    fail(f"{what}: the members are not the .index's records in its order")
            elif kind == "lmdb":  # "data.mdb/00000042.bin": the value of key rank 42
                members = tar_members(stem + ".tar")
                for name, data in members:
                    k = int(name.rsplit("/", 1)[1].split(".")[0])
                    if not 0 <= k < len(values) or values[k] != data:
                        fail(f"{what}: member {name} is not python3-lmdb's value {k}")
                    seen.append(k)
                if [name for name, _ in members] != index_names(stem + ".index"):
                    fail(f"{what}: the members are not the .index's values in its order")
            elif kind in ("wds", "groups"):
                got = client_samples(d, e, w, r)
                planned = index_names(stem + ".index")
                if [key for key, _ in got] != planned:
                    fail(f"{what}: the samples read are not the .index's, in its order")
                for key, members in got:
                    if groups.get(key) != members:
                        fail(f"{what}: sample {key!r}: members {sorted(members)} differ from the source's "
                             f"{sorted(groups.get(key, {}))} (names or bytes)")
                    seen.append(key)
            else:
                members = tar_members(stem + ".tar")
                for name, data in members:
                    with open(os.path.join(src, name), "rb") as f:
                        if f.read() != data:
                            fail(f"{what}: member {name} differs from the backend file")
                planned = index_names(stem + ".index")
                names = [name for name, _ in members]
                if window:
                    with open(stem + ".order", "rb") as f:  # the stream's user.dlfs.order
                        order = f.read()
                    if order != b"opportunistic":
                        fail(f"{what}: the stream is not opportunistic (user.dlfs.order)")
                    if sorted(names) != sorted(planned):
                        fail(f"{what}: not every planned sample of the rank exactly once")
                    at = {n: k for k, n in enumerate(planned)}
                    for j, n in enumerate(names):
                        if not abs(j - at[n]) < window:
                            fail(f"{what}: {n}, planned at {at[n]}, served at {j} (window {window})")
                        moved += j != at[n]
                elif names != planned:
                    fail(f"{what}: the members are not the .index's samples in its order")
                seen += names
        count = collections.Counter(seen)
        missing = set(everything) - set(count)
        if missing:
            fail(f"epoch {e}: {len(missing)} samples in no rank's view, e.g. {sorted(missing)[:3]}")
        if set(count) - set(everything):
            fail(f"epoch {e}: samples not in the source: {sorted(set(count) - set(everything))[:3]}")
        repeats = len(seen) - len(count)
        if repeats > w - 1:
            fail(f"epoch {e}: {repeats} repeated samples across the ranks (padding allows {w - 1})")
        print(f"  epoch {e}: {len(count)} samples once across {w} ranks ({repeats} padding), every byte the source's"
              + (f"; {moved} served out of plan order so far (window {window})" if window else ""))


# ---------------------------------------------------------------- stats


def check_stats(name, epochs, files, budget=None, before=(), ratio=None, strict=False):
    nodes = len(files)
    backend = remote = ahead = 0
    rounds = {}      # (epoch, round) -> (samples, chunks): the plan's, the same on every node
    loaded_by = []   # per node: the rounds it loaded, in order
    remote_by = []   # per node: bytes of rounds read from the other nodes
    for node, path in enumerate(files):
        with open(path) as f:
            s = json.load(f)
        by_name = {d["name"]: d for d in s["datasets"]}
        if name not in by_name:
            fail(f"{path}: no dataset {name!r}")
        d = by_name[name]
        plan = d["plan"]
        total = d["total_bytes"]
        what = f"{path}: [{name}]"
        if plan["round_nodes"] != nodes:
            fail(f"{what} rounds span {plan['round_nodes']} nodes, not {nodes} (plan {plan})")
        if plan["rounds_per_epoch"] < 2:
            fail(f"{what} {plan['rounds_per_epoch']} round per epoch: not in rounds")
        if budget is not None:
            # Config order: the datasets before this one took their part, this one its two slots of what was left.
            taken = sum(by_name[b]["capacity_bytes"] + by_name[b]["plan"]["round_memory_bytes"] for b in before)
            left = budget - taken
            if not left - 2 * 4096 <= plan["round_memory_bytes"] <= left + 2 * 4096:
                fail(f"{what} {plan['round_memory_bytes']} bytes of round memory, not the {left} the datasets "
                     f"before it ({', '.join(before)}: {taken} bytes) left of the budget of {budget}")
        slot = plan["round_memory_bytes"] // 2 - plan["round_chunk_bytes"]
        if ratio is not None:
            if abs(plan["shuffle_ratio"] - ratio) > 1e-3:
                fail(f"{what} R = {plan['shuffle_ratio']:.3f}, not its shuffle_ratio {ratio}")
        elif plan["shuffle_ratio"] * total < 0.8 * nodes * slot:
            fail(f"{what} R = {plan['shuffle_ratio']:.3f} is not that of {nodes} nodes' memory "
                 f"({nodes} x {slot} bytes of {total})")
        timeline = d["rounds"]["timeline"]
        # Rounds move together: a node loads them in one sequence, each once, never going back.
        sequence = [(ev["epoch"], ev["round"]) for ev in timeline if ev["epoch"] < epochs]
        if any(not a < b for a, b in zip(sequence, sequence[1:])):
            fail(f"{what} rounds loaded {[f'{e}/{r}' for e, r in sequence]}: not one sequence, each once")
        loaded_by.append(sequence)
        for ev in timeline:
            shape = (ev["samples"], ev["chunks"])
            if rounds.setdefault((ev["epoch"], ev["round"]), shape) != shape:
                fail(f"{what} round {ev['round']} of epoch {ev['epoch']} has {shape} (samples, chunks) here, "
                     f"{rounds[ev['epoch'], ev['round']]} on another node")
        got = d["views"]["epochs"]["round_remote_bytes"]
        loaded = sum(ev["bytes"] for ev in timeline if ev["epoch"] < epochs)
        ahead += sum(ev["bytes"] for ev in timeline if ev["epoch"] >= epochs)
        fell_back = d["bytes_by_source"]["backend"]
        backend += loaded + fell_back
        remote += got
        remote_by.append(got)
        released = collections.Counter(ev.get("release") or "-" for ev in timeline if ev["epoch"] < epochs)
        print(f"  node {node}: loaded {loaded} bytes of rounds, {fell_back} "
              f"other bytes from the backend, {got} bytes from peers' rounds; stalls {d['rounds']['stalls']}; "
              f"rounds released: {dict(released)}")
        # Each round loaded: epoch/round, how it was released, the share of its bytes here read.
        print("    " + " ".join(f"{ev['epoch']}/{ev['round']}:{ev.get('release') or '-'}:"
                                f"{100 * ev.get('read_bytes', 0) // max(1, ev.get('expected_bytes', 0))}%"
                                for ev in timeline))
    # The rounds the nodes loaded together: every round of each epoch, holding every sample. An
    # epoch's round count is its own (plan.rounds_per_epoch is epoch 0's).
    counts = []
    for e in range(epochs):
        numbers = sorted(r for (ep, r) in rounds if ep == e)
        held = sum(rounds[e, r][0] for r in numbers)
        if not numbers or numbers != list(range(len(numbers))) or held != d["samples"]:
            fail(f"[{name}] epoch {e}: the nodes loaded rounds {numbers} holding {held} samples, not every round "
                 f"of the epoch ({d['samples']} samples)")
        counts.append(len(numbers))
    if counts[0] != plan["rounds_per_epoch"]:
        fail(f"[{name}] epoch 0 has {counts[0]} rounds, the plan says {plan['rounds_per_epoch']}")
    rl = deepio_rl([rounds[0, r] for r in range(counts[0])], plan["chunks"])
    if abs(rl - plan["randomization_level"]) > 1e-6:
        fail(f"[{name}] RL {plan['randomization_level']:.6f} printed, DeepIO's formula gives {rl:.6f} for the "
             f"{counts[0]} rounds of epoch 0 over {plan['chunks']} chunks")
    # Every node holds its part of every round. A node whose readers start after the others' first
    # heartbeat that names round 1 starts there, and its part of round 0 is never loaded (see
    # 40_cluster_rounds_formats.sh, DLFS_ROUNDS_LATE): noted here; fatal with --strict.
    planned = [(e, r) for e in range(epochs) for r in range(counts[e])]
    together = True
    for node, sequence in enumerate(loaded_by):
        skipped = [f"{e}/{r}" for e, r in planned if (e, r) not in sequence]
        if skipped:
            msg = f"[{name}] node {node} did not load its part of rounds {' '.join(skipped)} (epoch/round)"
            if strict:
                fail(msg)
            print(f"NOTE: {msg}")
            together = False
    # Peers' rounds served bytes, over all nodes: at least MIN_REMOTE_SHARE of what a rank would read
    # from the other nodes' parts if every read found its round held ((nodes-1)/nodes of the dataset
    # per epoch). Per node it is only noted (fatal with --strict): a node whose readers fall behind
    # under load finds the peers' parts released as idle and reads those samples from the backend
    # (slower, never wrong; measured: one node of three read 3% of its share from peers, once none).
    share = (nodes - 1) / nodes * total * epochs
    if remote < MIN_REMOTE_SHARE * share:
        fail(f"[{name}] the nodes read {remote} bytes of rounds from each other, under {MIN_REMOTE_SHARE:.0%} of "
             f"the {share:.0f} bytes their ranks read of the other nodes' parts")
    if together and min(remote_by) <= 0:
        msg = (f"[{name}] node {remote_by.index(min(remote_by))} read no byte of a round from another node "
               f"(bytes from peers' rounds per node: {remote_by})")
        if strict:
            fail(msg)
        print(f"NOTE: {msg}")
    per_epoch = backend / epochs / total
    bound = MAX_PER_EPOCH if together else MAX_PER_EPOCH_SKIPPED
    print(f"[{name}] R {plan['shuffle_ratio']:.3f}, RL {plan['randomization_level']:.4f}, "
          f"rounds per epoch {'/'.join(map(str, counts))} (epochs 0-{epochs - 1}) over {nodes} nodes; "
          f"backend, all nodes: {backend / epochs:.0f} "
          f"bytes per epoch = {per_epoch:.2f}x the dataset ({total} bytes; {ahead} bytes of epoch {epochs} loaded "
          f"ahead); {remote} bytes from peers' rounds")
    if per_epoch > bound:
        fail(f"[{name}] the nodes read {per_epoch:.2f}x the dataset from the backend per epoch (rounds over their "
             f"memory read it about once; at most {bound}x passes"
             + ("" if together else ", with the parts of rounds nodes did not load") + ")")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("kind")
    m.add_argument("dir")
    m.add_argument("--empty-every", type=int, default=0, help="tfrecord: every Nth record empty")
    v = sub.add_parser("views")
    v.add_argument("kind")
    v.add_argument("src")
    v.add_argument("epochs", type=int)
    v.add_argument("w", type=int)
    v.add_argument("dir")
    v.add_argument("--window", type=int, default=0)
    s = sub.add_parser("stats")
    s.add_argument("name")
    s.add_argument("epochs", type=int)
    s.add_argument("stats", nargs="+")
    s.add_argument("--budget", type=int)
    s.add_argument("--before", nargs="*", default=[])
    s.add_argument("--ratio", type=float)
    s.add_argument("--strict", action="store_true")
    a = ap.parse_args()
    if a.cmd == "make":
        make(a.kind, a.dir, a.empty_every)
    elif a.cmd == "views":
        check_views(a.kind, a.src, a.epochs, a.w, a.dir, a.window)
    else:
        check_stats(a.name, a.epochs, a.stats, a.budget, a.before, a.ratio, a.strict)


if __name__ == "__main__":
    main()
