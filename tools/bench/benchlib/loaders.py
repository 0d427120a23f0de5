"""What pipeline_bench.py's DataLoader reads, one class per variant: the
map-style Dataset of files, the epoch views streamed or read as batches with
the Python client, the .bin batches and the no-I/O ceiling; and the collates
that hand a batch to the training process in shared memory, as PyTorch's
default_collate does. Needs PyTorch and numpy (python3-torch)."""
import math
import os
import time

import numpy
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from .client import dlfs


def to_batch(samples):
    """collate_fn: (data, lengths): the samples' bytes back to back in one uint8
    tensor, and their lengths. In a worker the data tensor is made in shared
    memory (as default_collate does), so it travels to the main process as a
    handle, not as pickled bytes."""
    total = sum(len(b) for b in samples)
    if get_worker_info() is not None:
        data = torch.empty(0, dtype=torch.uint8).set_(torch.UntypedStorage._new_shared(total))
    else:
        data = torch.empty(total, dtype=torch.uint8)
    out, at = data.numpy(), 0
    for b in samples:
        out[at:at + len(b)] = numpy.frombuffer(b, numpy.uint8)
        at += len(b)
    return data, torch.tensor([len(b) for b in samples], dtype=torch.int64)


class FilesDataset(Dataset):
    """Map-style: one open/read/close per sample, as user code does it
    (`whole_file` None), or with a function path -> bytes (dlfs.read_file)."""

    def __init__(self, root, names, whole_file=None):
        self.paths = [os.path.join(root, n) for n in names]
        self.whole_file = whole_file

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        if self.whole_file:
            return self.whole_file(self.paths[i])
        with open(self.paths[i], "rb") as f:
            return f.read()


def _worker_rank():
    info = get_worker_info()
    return (info.id, info.num_workers) if info else (0, 1)


class ViewStream(IterableDataset):
    """DataLoader worker k streams rank k of a W=num_workers epoch view with the client."""

    def __init__(self, ds_dir, epoch):
        self.ds_dir, self.epoch = ds_dir, epoch

    def __iter__(self):
        rank, world = _worker_rank()
        for _key, group in dlfs.TarView(self.ds_dir, self.epoch, rank, world, zero_copy=False).samples():
            yield from group.values()  # one member per sample in these datasets


class ViewBatches(IterableDataset):
    """DataLoader worker k reads rank k of a W=num_workers view as whole batches
    (dlfs.TarView.batches; use batch_size=None): (data, lengths) of the one
    member per sample these datasets have."""

    def __init__(self, ds_dir, epoch, batch):
        self.ds_dir, self.epoch, self.batch = ds_dir, epoch, batch

    def __iter__(self):
        rank, world = _worker_rank()
        for batch in dlfs.TarView(self.ds_dir, self.epoch, rank, world, zero_copy=False).batches(self.batch):
            if len(batch.fields) != 1:
                raise ValueError(f"expected one member per sample, got extensions {sorted(batch.fields)}")
            yield next(iter(batch.fields.values()))


class ZeroCopyBatches(IterableDataset):
    """DataLoader worker k reads rank k of a W=num_workers view through dlfsd's
    client socket (dlfs.SampleBatches; use batch_size=None): each batch's
    samples gathered from the mapped memory into one array, with their lengths."""

    def __init__(self, ds_dir, epoch, batch):
        self.ds_dir, self.epoch, self.batch = ds_dir, epoch, batch

    def __iter__(self):
        rank, world = _worker_rank()
        for batch in dlfs.SampleBatches(self.ds_dir, epoch=self.epoch, rank=rank, world_size=world,
                                        batch_size=self.batch):
            yield batch.packed()


def packed_to_batch(packed):
    """collate_fn for ViewBatches: (bytes back to back, lengths) -> the same
    (data, lengths) tensors as to_batch, data in shared memory in a worker."""
    blob, lengths = packed
    if get_worker_info() is not None:
        data = torch.empty(0, dtype=torch.uint8).set_(torch.UntypedStorage._new_shared(len(blob)))
    else:
        data = torch.empty(len(blob), dtype=torch.uint8)
    data.numpy()[:] = numpy.frombuffer(blob, numpy.uint8)
    return data, torch.tensor(lengths, dtype=torch.int64)


class NoIoBatches(IterableDataset):
    """The DataLoader's own ceiling: worker k yields its share of `count`
    samples as ready-made (bytes, lengths) batches; no storage is touched."""

    def __init__(self, count, size, batch):
        self.count, self.size, self.batch = count, size, batch

    def __iter__(self):
        rank, world = _worker_rank()
        share = math.ceil(self.count / world)
        blob = bytes(self.batch * self.size)
        for first in range(0, share, self.batch):
            n = min(self.batch, share - first)
            yield blob[:n * self.size] if n < self.batch else blob, [self.size] * n


class BinBatches(IterableDataset):
    """DataLoader worker k reads rank k's .bin, one pread per batch (use batch_size=None)."""

    def __init__(self, ds_dir, epoch, batch):
        self.ds_dir, self.epoch, self.batch = ds_dir, epoch, batch

    def __iter__(self):
        rank, world = _worker_rank()
        view = dlfs.BinView(self.ds_dir, self.epoch, rank, world, zero_copy=False)
        rs, n = view.record_size, len(view)
        fd = os.open(view.path, os.O_RDONLY)
        try:
            for first in range(0, n, self.batch):
                count = min(self.batch, n - first)
                data = os.pread(fd, count * rs, first * rs)
                if len(data) != count * rs:
                    raise OSError(f"{view.path}: short read at record {first}: {len(data)} of {count * rs} bytes")
                yield [data[i * rs:(i + 1) * rs] for i in range(count)]
        finally:
            os.close(fd)


def run_epoch(loader):
    """(samples, seconds) of one pass over a DataLoader."""
    t0 = time.perf_counter()
    n = 0
    for _data, lengths in loader:
        n += len(lengths)
    return n, time.perf_counter() - t0
