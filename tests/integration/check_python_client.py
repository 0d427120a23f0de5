#!/usr/bin/env python3
"""The Python client (python/dlfs, installed on PYTHONPATH) against real views.

  check_python_client.py FILES_DS FILES_BACKEND FIXED_DS FIXED_BACKEND

FILES_DS is a files dataset's directory in a mount (MNT/NAME) served with
world size 2, FIXED_DS a fixed-record dataset's (record 1024, header 16).
Checks: TarViewDataset through DataLoaders with 2 workers gives, per epoch
(0 and 1), every backend file exactly once across the 2 ranks, with its
bytes, each rank in its .index order; byte-sized blocks give the same sets;
a resumed epoch gives the rest of the order; BinViewDataset gives every
record once across the ranks, with its bytes and sample id.
"""
import os
import sys
import warnings

from checklib import fail

W, BATCH = 2, 16


def as_list(batch):
    return batch


def backend_files(root):
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = f.read()
    return out


def read_rank(torch, dlfs, ds_dir, epoch, rank, **kw):
    ds = dlfs.TarViewDataset(ds_dir, epoch=epoch, rank=rank, world_size=W, **kw)
    loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=2, collate_fn=as_list)
    return [s for batch in loader for s in batch]


def check_samples(samples, files, what):
    """The member names (key.ext) of `samples`, each checked against the backend."""
    names = []
    for key, group in samples:
        for ext, data in group.items():
            name = f"{key}.{ext}" if ext else key
            if files.get(name) != data:
                fail(f"{what}: {name}: {len(data)} bytes differ from the backend file")
            names.append(name)
    return names


def check_tar_views(torch, dlfs, ds_dir, files):
    orders = {}
    for epoch in (0, 1):
        seen = []
        for rank in range(W):
            stem = dlfs.view_path(ds_dir, epoch, W, rank)
            planned = dlfs.ViewIndex(stem + ".index").names
            got = check_samples(read_rank(torch, dlfs, ds_dir, epoch, rank, block_samples=BATCH), files,
                                f"epoch {epoch} rank {rank}")
            if got != planned:
                fail(f"epoch {epoch} rank {rank}: the DataLoader's order is not the .index order")
            by_bytes = check_samples(read_rank(torch, dlfs, ds_dir, epoch, rank, block_bytes=64 << 10), files,
                                     f"epoch {epoch} rank {rank} (64 KiB blocks)")
            if sorted(by_bytes) != sorted(planned):
                fail(f"epoch {epoch} rank {rank}: 64 KiB blocks gave another set of samples")
            seen += got
            orders[epoch, rank] = got
        if sorted(seen) != sorted(files):
            missing = set(files) - set(seen)
            fail(f"epoch {epoch}: {len(seen)} samples read for {len(files)} files "
                 f"({len(missing)} missing, {len(seen) - len(set(seen))} twice)")
        if not any(len(n) > 256 for n in seen):
            fail(f"epoch {epoch}: no name longer than 256 bytes came through (the GNU long-name case)")
    if orders[0, 0] == orders[1, 0]:
        fail("epochs 0 and 1 have the same order")
    start = 101
    rest = check_samples(read_rank(torch, dlfs, ds_dir, 1, 0, block_samples=BATCH, start=start), files, "resume")
    if rest != orders[1, 0][start:]:
        fail(f"resuming epoch 1 rank 0 at {start} did not give the rest of its order")
    print(f"tar views: {len(files)} files once per epoch in 2 epochs, W={W}, 2 workers; resume at {start} ok")


def check_bin_views(torch, dlfs, ds_dir, backend, record=1024, header=16):
    records = []
    for name in sorted(os.listdir(backend), key=os.fsencode):  # canonical order: byte-wise by path
        with open(os.path.join(backend, name), "rb") as f:
            body = f.read()[header:]
        records += [body[i:i + record] for i in range(0, len(body), record)]
    ids = []
    for rank in range(W):
        ds = dlfs.BinViewDataset(ds_dir, epoch=2, rank=rank, world_size=W)
        loader = torch.utils.data.DataLoader(ds, batch_size=32, num_workers=2, collate_fn=as_list)
        got = [item for batch in loader for item in batch]
        planned = dlfs.ViewIndex(dlfs.view_path(ds_dir, 2, W, rank) + ".index").ids
        if [sid for sid, _ in got] != planned:
            fail(f".bin rank {rank}: sample ids are not the .index order")
        for sid, data in got:
            if data != records[sid]:
                fail(f".bin rank {rank}: record of sample {sid} differs from the backend")
        ids += planned
    if sorted(ids) != list(range(len(records))):
        fail(f".bin views: {len(ids)} records read for {len(records)}, not each once")
    print(f".bin views: {len(records)} records once, W={W}, 2 workers")


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    import torch.utils.data
    import dlfs
    print(f"dlfs {dlfs.__version__} from {os.path.dirname(dlfs.__file__)}")
    check_tar_views(torch, dlfs, sys.argv[1], backend_files(sys.argv[2]))
    check_bin_views(torch, dlfs, sys.argv[3], sys.argv[4])


if __name__ == "__main__":
    main()
