#!/usr/bin/env python3
"""WebDataset shards (format "tar") through real views and the Python client.

  check_webdataset.py make SHARDS_DIR
      writes shards with Python's tarfile: pax ones (a non-ASCII name, a name
      longer than 100 bytes, a directory entry) and GNU ones; keys unique.
  check_webdataset.py check DS_DIR SHARDS_DIR
      DS_DIR is the dataset's directory in a mount (MNT/NAME), world size 2.
      Through TarViewDataset and DataLoaders with 2 workers, per epoch (0, 1):
      every key of the shards exactly once across the 2 ranks with all its
      members' bytes; a full per-sample shuffle (adjacent samples mostly from
      different shards); epochs in different orders.
  check_webdataset.py header-offset SHARD NAME
      prints the byte offset of the header of the shard's member NAME, and
      its size.
"""
import io
import os
import random
import sys
import tarfile

from checklib import fail

W, SHARDS, KEYS_PER_SHARD = 2, 8, 40


def add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 1700000000, 0o644
    tar.addfile(info, io.BytesIO(data))


def make(out):
    rng = random.Random(11)
    os.makedirs(out)
    for s in range(SHARDS):
        fmt = tarfile.PAX_FORMAT if s % 2 == 0 else tarfile.GNU_FORMAT
        with tarfile.open(os.path.join(out, f"shard-{s:04d}.tar"), "w", format=fmt) as tar:
            d = tarfile.TarInfo(f"s{s}")
            d.type = tarfile.DIRTYPE
            tar.addfile(d)
            for k in range(KEYS_PER_SHARD):
                key = f"s{s}/sample{k:04d}"
                if k == 5:
                    key = f"s{s}/" + "long" * 30 + f"-{k}"
                if k == 7 and fmt == tarfile.PAX_FORMAT:
                    key = f"s{s}/caf\u00e9-\u00fcber-{k}"
                add(tar, key + ".jpg", rng.randbytes(rng.randint(1, 20000)))
                add(tar, key + ".cls", str(rng.randint(0, 9)).encode())
                if k % 3 == 0:
                    add(tar, key + ".meta.json", b'{"k": %d}' % k)
    return 0


def shard_samples(shards_dir):
    """key -> (shard, {ext: bytes}), by WebDataset's rule (first dot of the basename)."""
    out = {}
    for shard in sorted(n for n in os.listdir(shards_dir) if n.endswith(".tar")):
        with tarfile.open(os.path.join(shards_dir, shard)) as tar:
            for m in tar.getmembers():
                if not m.isfile():
                    continue
                base = m.name.rsplit("/", 1)[-1]
                cut = m.name.rfind("/") + 1 + base.index(".")
                key, ext = m.name[:cut], m.name[cut + 1:]
                out.setdefault(key, (shard, {}))[1][ext] = tar.extractfile(m).read()
    return out


def as_list(batch):
    return batch


def read_rank(torch, dlfs, ds_dir, epoch, rank):
    ds = dlfs.TarViewDataset(ds_dir, epoch=epoch, rank=rank, world_size=W)
    loader = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=2, collate_fn=as_list)
    return [s for batch in loader for s in batch]


def check(ds_dir, shards_dir):
    import torch
    import dlfs
    want = shard_samples(shards_dir)
    if len(want) % W:
        fail(f"the test wants a sample count divisible by {W}, has {len(want)}")
    if not any(len(k.encode()) > 100 for k in want) or not any(not k.isascii() for k in want):
        fail("the shards lack a long or a non-ASCII name")
    orders = {}
    for epoch in (0, 1):
        seen = []
        for rank in range(W):
            stem = dlfs.view_path(ds_dir, epoch, W, rank)
            planned = dlfs.ViewIndex(stem + ".index").names
            got = read_rank(torch, dlfs, ds_dir, epoch, rank)
            keys = [key for key, _ in got]
            if keys != planned:
                fail(f"epoch {epoch} rank {rank}: the DataLoader's order is not the .index order")
            for key, members in got:
                if key not in want:
                    fail(f"epoch {epoch} rank {rank}: key {key!r} is in no shard")
                if members != want[key][1]:
                    fail(f"epoch {epoch} rank {rank}: {key!r}: members {sorted(members)} differ from the shard's "
                         f"{sorted(want[key][1])} (names or bytes)")
            seen += keys
            orders[epoch, rank] = keys
        if sorted(seen) != sorted(want):
            fail(f"epoch {epoch}: {len(seen)} samples read, {len(set(seen))} distinct, for {len(want)} keys")
        order = orders[epoch, 0]
        switches = sum(want[a][0] != want[b][0] for a, b in zip(order, order[1:]))
        if switches < 0.6 * (len(order) - 1):
            fail(f"epoch {epoch}: only {switches} of {len(order) - 1} neighbours come from different shards: "
                 "not a per-sample shuffle across shards")
    if orders[0, 0] == orders[1, 0]:
        fail("epochs 0 and 1 have the same order")
    print(f"ok: {len(want)} samples from {SHARDS} shards, once per epoch across {W} ranks")
    return 0


def header_offset(shard, name):
    with tarfile.open(shard) as tar:
        m = tar.getmember(name)
        print(m.offset, m.size)
    return 0


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    sys.exit({"make": make, "check": check, "header-offset": header_offset}[cmd](*args))
