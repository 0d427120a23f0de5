#!/usr/bin/env python3
"""The child process of loaders_bench.py, run by the Python that has the
loader's library (the project's .venv; FFCV's own venv for ffcv). Not meant to
be run by hand, but it can be:

  loaders_peer.py convert FORMAT ROOT OUT --shard-size S
      writes the files dataset at ROOT in FORMAT (tar, mds, tfrecord, ffcv,
      filelist: benchlib/formats.py) to OUT, OUT.complete when done.
  loaders_peer.py run SPEC.json
      one loader (SPEC's "variant", benchlib/peers*.py), two epochs, timed
      on the parent's word. Protocol, one line each on stdout (the loader's
      own output goes to stderr): it says "ready" once imported; for e in 1, 2
      it waits for "go <e>" on stdin, runs epoch e (the clock starts at the
      word: whatever the loader reads or builds before its first batch counts),
      writes the delivered ids to <out_dir>/ids-<e>.npy and says
      "done <e> <samples> <seconds> <seconds to the first batch> <samples in it>".
"""
import argparse
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def convert(a):
    from benchlib import formats
    names = formats.sample_names(a.root)
    if not names:
        sys.exit(f"loaders_peer.py: {a.root} holds no files")
    marker = a.out + ".complete"
    if os.path.exists(marker):
        os.remove(marker)
    formats.WRITERS[a.format](a.root, names, a.out, a.shard_size)
    open(marker, "w").close()


def make_peer(spec):
    v = spec["variant"]
    if v.startswith("dali-"):
        from benchlib.peers_dali import PEERS
    elif v == "ffcv":
        from benchlib.peers_ffcv import PEERS
    else:
        from benchlib.peers import PEERS
    if v not in PEERS:
        sys.exit(f"loaders_peer.py: unknown variant {v!r}")
    return PEERS[v](spec)


def run(a):
    import numpy
    with open(a.spec) as f:
        spec = json.load(f)
    with open(spec["names_file"]) as f:
        spec["names"] = f.read().split("\n")[:-1]
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # libraries' prints go to the log, not into the protocol
    try:
        import torch
        torch.set_num_threads(1)
        peer = make_peer(spec)
    except Exception:
        traceback.print_exc()
        sys.exit(1)
    proto.write("ready\n")
    for e in (1, 2):
        word = sys.stdin.readline().split()
        if word != ["go", str(e)]:
            sys.exit(f"loaders_peer.py: expected 'go {e}', got {word!r}")
        t0 = time.perf_counter()
        first, n, parts = None, 0, []
        for ids in peer.epoch(e):
            if first is None:
                first = time.perf_counter() - t0
            parts.append(ids)
            n += len(ids)
        dt = time.perf_counter() - t0
        order = numpy.concatenate(parts) if parts else numpy.zeros(0, numpy.int64)
        numpy.save(os.path.join(spec["out_dir"], f"ids-{e}.npy"), order)
        first_n = len(parts[0]) if parts else 0
        proto.write(f"done {e} {n} {dt:.6f} {first if first is not None else dt:.6f} {first_n}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert")
    c.add_argument("format", choices=["tar", "mds", "tfrecord", "ffcv", "filelist"])
    c.add_argument("root")
    c.add_argument("out")
    c.add_argument("--shard-size", type=int, required=True)
    r = sub.add_parser("run")
    r.add_argument("spec")
    a = ap.parse_args()
    convert(a) if a.cmd == "convert" else run(a)


if __name__ == "__main__":
    main()
