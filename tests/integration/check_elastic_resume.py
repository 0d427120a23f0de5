#!/usr/bin/env python3
"""Resumed epochs on a real mount (51_elastic_resume.sh):

  check_elastic_resume.py MNT DATASET BACKEND --epoch E --grid W:W2,... [--remainder pad|drop] [--zero-copy]

For each (W, W') of the grid and several consumed counts (uniform, uneven,
none, all), reads MNT/DATASET/epochs/E/W/resume/<consumed>/W'/<r'>.index and
.tar and checks, from the first run's own views only (epochs/E/W/<r>.index:
what each of its ranks read; epochs/E/1/0.index: the epoch order):
  - the .tar's members are the .index's names, each with the backend file's bytes;
  - no consumed sample again; the remainder (every sample not consumed, in the
    order of the epoch) dealt to the W' ranks at positions r', r'+W', ...:
    pad: every sample left once, plus the wrap of the remainder and only that;
    drop: each once, the last M mod W' left out;
  - with --zero-copy, python/dlfs's TarView through dlfsd's client socket
    yields the same samples as through the mount.
Prints one line per (W, W') with the cases checked."""
import argparse
import os
import random
import sys

from checklib import fail, read

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import dlfs  # noqa: E402
from dlfs.resume import consumed_name  # noqa: E402


def index(path):
    """(ids, names) of a .index view."""
    v = dlfs.ViewIndex(path)
    return v.ids, v.names


def tar_members(path):
    """(name, bytes) of each member of a view's tar, with the stdlib's tarfile."""
    import tarfile
    with tarfile.open(path, "r:") as t:
        return [(m.name, t.extractfile(m).read()) for m in t]


def check(a, w, w2, counts, order, names_of, views, backend_bytes):
    where = f"epoch {a.epoch}, W {w} -> W' {w2}, consumed {counts}"
    consumed = set()
    for r in range(w):
        consumed.update(views[r][:counts[r]])
    left = [s for s in order if s not in consumed]
    m = len(left)
    per = 0 if m == 0 else (m + w2 - 1) // w2 if a.remainder == "pad" else m // w2
    stem = os.path.join(a.mnt, a.dataset, "epochs", str(a.epoch), str(w), "resume", consumed_name(counts), str(w2))
    seen = {}
    for r2 in range(w2):
        ids, names = index(f"{stem}/{r2}.index")
        want = [left[(r2 + k * w2) % m] for k in range(per)]
        if ids != want:
            fail(f"{where}: rank {r2}'s index holds {ids[:8]}..., the remainder's positions r'+kW' are {want[:8]}...")
        members = tar_members(f"{stem}/{r2}.tar")
        if [n for n, _ in members] != names:
            fail(f"{where}: rank {r2}'s tar members are not its index's names")
        for (name, data), sid in zip(members, ids):
            if name != names_of[sid] or data != backend_bytes(name):
                fail(f"{where}: rank {r2}: member {name} (sample {sid}) is not the backend file's bytes")
            if sid in consumed:
                fail(f"{where}: rank {r2} reads sample {sid} ({name}) again: it was consumed")
            seen[sid] = seen.get(sid, 0) + 1
        if a.zero_copy:
            v = dlfs.TarView(os.path.join(a.mnt, a.dataset), a.epoch, r2, w2, resume_from=(w, counts), zero_copy=True)
            if v.client_socket is None:
                fail(f"{where}: zero_copy=True, but TarView reads the mount")
            got = [(key, g) for key, g in v.samples()]
            mount = list(dlfs.TarView(os.path.join(a.mnt, a.dataset), a.epoch, r2, w2, resume_from=(w, counts),
                                      zero_copy=False).samples())
            if got != mount:
                fail(f"{where}: rank {r2} through the client socket differs from the mount")
    if a.remainder == "pad":
        if set(seen) != set(left):
            fail(f"{where}: {len(set(left) - set(seen))} samples left were read by no rank")
        # The extras are the wrap of the remainder, and only that (M < W' wraps more than once).
        want = {}
        for g in range(per * w2):
            want[left[g % m]] = want.get(left[g % m], 0) + 1
        if seen != want:
            extra = sorted(s for s in seen if seen[s] != want.get(s))
            fail(f"{where}: samples {extra[:8]} read {[seen[s] for s in extra[:8]]} times; the remainder wrapped "
                 f"gives {[want.get(s, 0) for s in extra[:8]]}")
    else:
        if any(n != 1 for n in seen.values()) or len(seen) != m - m % w2:
            fail(f"{where}: drop: {len(seen)} samples read (want {m - m % w2}, each once)")
    return len(seen)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mnt")
    ap.add_argument("dataset")
    ap.add_argument("backend")
    ap.add_argument("--epoch", type=int, default=0)
    ap.add_argument("--grid", required=True, help="W:W' pairs, comma-separated")
    ap.add_argument("--remainder", default="pad", choices=("pad", "drop"))
    ap.add_argument("--zero-copy", action="store_true")
    a = ap.parse_args()
    base = os.path.join(a.mnt, a.dataset, "epochs", str(a.epoch))
    order, names = index(f"{base}/1/0.index")  # W 1: the epoch order itself
    if a.remainder == "pad" and sorted(order) != list(range(len(order))):
        fail(f"{base}/1/0.index is not a permutation of the samples")
    names_of = dict(zip(order, names))
    cache = {}

    def backend_bytes(name):
        if name not in cache:
            cache[name] = read(os.path.join(a.backend, name))
        return cache[name]

    rng = random.Random(a.epoch)
    for pair in a.grid.split(","):
        w, w2 = map(int, pair.split(":"))
        views = [index(f"{base}/{w}/{r}.index")[0] for r in range(w)]
        per = len(views[0])
        grid = [[0] * w, [per] * w, [per // 3] * w, [min(per, 1 + per // 2)] * w,
                [rng.randrange(per + 1) for _ in range(w)], [per - r for r in range(w)]]
        total = 0
        for counts in grid:
            total += check(a, w, w2, counts, order, names_of, views, backend_bytes)
        policy = " (and its wrap)" if a.remainder == "pad" else " (less its last M mod W')"
        socket = " (and through the client socket)" if a.zero_copy else ""
        print(f"W {w} -> W' {w2}: {len(grid)} consumed cases, {total} samples read, the remainder once each"
              f"{policy}{socket}")


if __name__ == "__main__":
    main()
