#!/usr/bin/python3
"""python/dlfs through dlfsd's client socket against the same classes through
the mount, on real mounts (50_python_zero_copy.sh).

  same DS_DIR [--fixed]   for W 1 and 2, every rank, 1 and 2 workers: TarView.samples()
                          and .batches(64) with zero_copy=True equal zero_copy=False;
                          SampleBatches equal TarView.batches through the mount; torch
                          datasets with 2 DataLoader workers (TarViewDataset,
                          SampleBatchDataset, and for --fixed BinView/BinViewDataset)
                          give the mount's samples
  fallback DS_DIR         a daemon without a client socket: auto reads the mount,
                          zero_copy=True and SampleBatches raise ClientUnavailable
  restart DS_DIR HALF GO  reads half a view through SampleBatches, writes HALF, waits
                          for GO (dlfsd restarted meanwhile), reads the rest: one
                          reconnect, every sample equal to the mount's
"""
import os
import sys
import time

import dlfs
import torch


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def as_bytes(x):
    return bytes(x) if isinstance(x, memoryview) else x


def norm_samples(it):
    return [(k, {e: as_bytes(v) for e, v in g.items()}) for k, g in it]


def norm_batch(b):
    return (list(b.keys), {e: (as_bytes(d), list(l)) for e, (d, l) in b.fields.items()})


def check_same(ds, fixed):
    compared = 0
    for world in (1, 2):
        for rank in range(world):
            epoch = 3 + world
            for workers in (1, 2):
                for w in range(workers):
                    zc = dlfs.TarView(ds, epoch, rank, world, zero_copy=True)
                    if zc.client_socket is None:
                        fail(f"{ds}: TarView(zero_copy=True) reads through the mount")
                    mount = dlfs.TarView(ds, epoch, rank, world, zero_copy=False)
                    a, b = norm_samples(zc.samples(w, workers)), norm_samples(mount.samples(w, workers))
                    if a != b:
                        bad = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                        fail(f"{ds} {epoch}/{world}/{rank} worker {w}/{workers}: samples() through the socket "
                             f"differ from the mount's at {bad} ({len(a)} vs {len(b)} samples)")
                    za = [norm_batch(x) for x in zc.batches(64, w, workers)]
                    mb = [norm_batch(x) for x in mount.batches(64, w, workers)]
                    if za != mb:
                        fail(f"{ds} {epoch}/{world}/{rank} worker {w}/{workers}: batches(64) differ")
                    grouped = zc.index.grouped
                    sb = list(dlfs.SampleBatches(ds, epoch=epoch, rank=rank, world_size=world, batch_size=64,
                                                 worker=w, num_workers=workers))
                    flat = [bytes(m) for s in sb for i in range(len(s.ids)) for m in s.member(i)] if grouped else \
                        [bytes(x) for s in sb for x in s.samples]
                    want = [d for _k, g in b for d in g.values()]
                    if sorted(flat) != sorted(want) or (not grouped and flat != want):
                        fail(f"{ds} {epoch}/{world}/{rank} worker {w}/{workers}: SampleBatches' bytes differ from "
                             f"the mount's ({len(flat)} vs {len(want)} members)")
                    compared += len(a)
    # PyTorch with 2 DataLoader workers, as training runs it.
    loader = torch.utils.data.DataLoader(dlfs.TarViewDataset(ds, epoch=9, rank=0, world_size=1, zero_copy=True),
                                         batch_size=None, num_workers=2)
    got = sorted((k, sorted((e, as_bytes(v)) for e, v in g.items())) for k, g in loader)
    want = sorted((k, sorted(g.items())) for k, g in dlfs.TarView(ds, 9, 0, 1, zero_copy=False).samples())
    if got != want:
        fail(f"{ds}: TarViewDataset(zero_copy=True) in 2 DataLoader workers differs from the mount's epoch")
    loader = torch.utils.data.DataLoader(dlfs.SampleBatchDataset(ds, epoch=9, rank=0, world_size=1, batch_size=32,
                                                                 transform=lambda b: b.packed()),
                                         batch_size=None, num_workers=2)
    total = sum(len(lengths) for _data, lengths in loader)
    if not zc.index.grouped and total != len(want):
        fail(f"{ds}: SampleBatchDataset in 2 workers gave {total} samples, the epoch has {len(want)}")
    if fixed:
        zb, mb = dlfs.BinView(ds, 9, 1, 2, zero_copy=True), dlfs.BinView(ds, 9, 1, 2, zero_copy=False)
        order = list(range(len(mb)))
        order = order[::7] + order[3::5] + order[::-1]  # random-ish access, and in order
        for k in order:
            if zb.record(k) != mb.record(k) or zb.sample_id(k) != mb.sample_id(k):
                fail(f"{ds}: BinView record {k} differs between the socket and the mount")
        loader = torch.utils.data.DataLoader(dlfs.BinViewDataset(ds, epoch=9, rank=1, world_size=2, zero_copy=True),
                                             batch_size=None, num_workers=2, shuffle=True)
        if sorted((i, bytes(r)) for i, r in loader) != sorted((mb.sample_id(k), mb.record(k)) for k in range(len(mb))):
            fail(f"{ds}: BinViewDataset(zero_copy=True) with 2 workers differs from the mount's records")
        nb = next(iter(dlfs.SampleBatches(ds, epoch=9, rank=1, world_size=2, batch_size=16))).numpy()
        if nb.shape != (16, len(mb.record(0))) or bytes(nb[3]) != mb.record(3):
            fail(f"{ds}: SampleBatch.numpy() is {nb.shape}, or its row 3 is not record 3")
    print(f"{ds}: {compared} samples equal through the socket and the mount (W 1, 2; 1, 2 workers; samples, "
          f"batches, SampleBatches), and in DataLoaders" + (" (and .bin records)" if fixed else ""))


def check_fallback(ds):
    v = dlfs.TarView(ds, 0, 0, 1)
    if v.client_socket is not None:
        fail(f"{ds}: zero_copy='auto' uses a socket though dlfsd serves none: {v.client_socket}")
    n = sum(1 for _ in v.samples())
    for what, make in (("TarView(zero_copy=True)", lambda: dlfs.TarView(ds, 0, 0, 1, zero_copy=True)),
                       ("SampleBatches", lambda: next(iter(dlfs.SampleBatches(ds))))):
        try:
            make()
            fail(f"{ds}: {what} worked without a client socket")
        except dlfs.ClientUnavailable as e:
            print(f"{what} without a socket: {e}")
    print(f"{ds}: zero_copy='auto' read {n} samples through the mount (no client socket)")


def check_restart(ds, half, go):
    mount = [d for _k, g in dlfs.TarView(ds, 0, 0, 1, zero_copy=False).samples() for d in g.values()]
    it = dlfs.SampleBatches(ds, epoch=0, rank=0, world_size=1, batch_size=50)
    got = []
    for b in it:
        got += [bytes(x) for x in b.samples]
        if len(got) >= len(mount) // 2 and not os.path.exists(half):
            with open(half, "w") as f:
                f.write("half\n")
            deadline = time.time() + 120
            while not os.path.exists(go):
                if time.time() > deadline:
                    fail(f"{go} did not appear within 120 s")
                time.sleep(0.1)
    if got != mount:
        fail(f"{ds}: {len(got)} samples read across dlfsd's restart, not the mount's {len(mount)}")
    print(f"{ds}: {len(got)} samples read through SampleBatches across dlfsd's restart, equal to the mount's")


def main():
    cmd, ds = sys.argv[1], sys.argv[2]
    if cmd == "same":
        check_same(ds, "--fixed" in sys.argv)
    elif cmd == "fallback":
        check_fallback(ds)
    elif cmd == "restart":
        check_restart(ds, sys.argv[3], sys.argv[4])
    else:
        fail(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
