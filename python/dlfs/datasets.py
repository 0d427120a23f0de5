"""PyTorch datasets over DLFS epoch views (imports torch; the rest of the
package does not).

  ds = dlfs.TarViewDataset("/mnt/dlfs/imagenet", epoch=0)   # rank from torch.distributed or RANK/WORLD_SIZE
  loader = torch.utils.data.DataLoader(ds, batch_size=256, num_workers=4)

Each rank reads its own view (the server-side plan gives every rank its
samples: no DistributedSampler); each DataLoader worker reads its own blocks
of that view (docs/python.md)."""
import torch.utils.data

from .client import DEFAULT_RECONNECT_TIMEOUT
from .resume import check_seed, resume_spec
from .samplebatches import SampleBatches, require_socket
from .split import DEFAULT_BLOCK_BYTES, resolve_rank
from .tarstream import DEFAULT_CHUNK
from .view import BinView, TarView


class TarViewDataset(torch.utils.data.IterableDataset):
    """The samples of one rank's epoch view as (key, {ext: bytes}), or
    transform((key, {ext: bytes})) if a transform is given.

    set_epoch(e) picks the epoch for the next iteration, as with
    DistributedSampler (call it before `iter(loader)`; with
    persistent_workers=True the workers keep the epoch they started with).
    `start` resumes mid-epoch after that many samples of this rank; with
    `block_samples = batch_size` a DataLoader yields the samples in exactly
    the planned order, so batches x batch_size samples consumed is a valid
    `start`.

    With `batch_size`, each worker yields whole batches (dlfs.ViewBatch: keys,
    and per extension the bytes back to back with their lengths), read with
    one pread per run of samples: use DataLoader(ds, batch_size=None). Far
    fewer Python steps per sample; the transform then gets a ViewBatch.
    Such a dataset has no len(): each worker's last batch may be short.

    `zero_copy` (TarView's): "auto" reads through dlfsd's client socket when
    it serves one; each DataLoader worker opens its own connection.

    `seed`: this job's own seed (`<dataset>/seeds/<seed>/`), for jobs that
    share one dlfsd. `resume_from=(W, consumed)`: the rest of `epoch` after
    a run of W ranks read `consumed` samples each (one count, or W): this
    run's `rank` of `world_size` reads its share of what is left, each
    sample once across the ranks (TarView; docs/python.md). set_epoch()
    moves on to a whole epoch unless given one again."""

    def __init__(self, dataset_dir, epoch=0, rank=None, world_size=None, start=0, block_samples=None,
                 block_bytes=DEFAULT_BLOCK_BYTES, chunk=DEFAULT_CHUNK, transform=None, batch_size=None,
                 zero_copy="auto", seed=None, resume_from=None):
        super().__init__()
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be at least 1 (or None for single samples), got {batch_size}")
        self.batch_size = batch_size
        self.dataset_dir = dataset_dir
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self.epoch, self.start = epoch, start
        self.block_samples, self.block_bytes, self.chunk = block_samples, block_bytes, chunk
        self.transform = transform
        self.zero_copy = zero_copy
        self.seed = None if seed is None else check_seed(seed)
        self.resume_from = None if resume_from is None else resume_spec(resume_from)
        self._view = None

    def set_epoch(self, epoch, start=0, resume_from=None):
        self.epoch, self.start, self._view = epoch, start, None
        self.resume_from = None if resume_from is None else resume_spec(resume_from)

    def view(self):
        """The TarView of the current epoch (its index is read once per process)."""
        if self._view is None:
            self._view = TarView(self.dataset_dir, self.epoch, self.rank, self.world_size, self.start,
                                 self.block_samples, self.block_bytes, self.chunk, zero_copy=self.zero_copy,
                                 seed=self.seed, resume_from=self.resume_from)
        return self._view

    def __len__(self):
        if self.batch_size is not None:
            raise TypeError(f"a TarViewDataset with batch_size={self.batch_size} has no len(): how many batches "
                            f"depends on the DataLoader's workers (each one's last batch may be short); "
                            f"len(ds.view()) is the number of samples")
        return len(self.view())

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        if self.batch_size is not None:
            samples = self.view().batches(self.batch_size, worker, workers)
        else:
            samples = self.view().samples(worker, workers)
        return samples if self.transform is None else map(self.transform, samples)

    def __getstate__(self):  # workers read the index (and open their client socket) themselves
        state = dict(self.__dict__)
        state["_view"] = None
        return state


class BinViewDataset(torch.utils.data.Dataset):
    """A fixed-record dataset's `.bin` view, map-style: item k is
    (sample id, record bytes) of position k of this rank's epoch, or
    transform of that. Any sampler works on it (it only permutes the planned
    order further); for the planned order use shuffle=False. `zero_copy` as for BinView
    (each DataLoader worker opens its own client socket connection); `seed`
    and `resume_from` as for TarViewDataset."""

    def __init__(self, dataset_dir, epoch=0, rank=None, world_size=None, transform=None, zero_copy="auto",
                 seed=None, resume_from=None):
        super().__init__()
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self.bin = BinView(dataset_dir, epoch, self.rank, self.world_size, zero_copy=zero_copy, seed=seed,
                           resume_from=resume_from)
        self.transform = transform

    def __len__(self):
        return len(self.bin)

    def __getitem__(self, k):
        item = (self.bin.sample_id(k), self.bin.record(k))
        return item if self.transform is None else self.transform(item)


class SampleBatchDataset(torch.utils.data.IterableDataset):
    """dlfs.SampleBatches for a DataLoader: each worker yields its share of
    the rank's view as SampleBatch objects (read-only memoryviews of
    dlfsd's memory), or transform(batch); use DataLoader(ds,
    batch_size=None). Requires dlfsd's client socket (ClientUnavailable
    otherwise: read through TarViewDataset instead).

    A batch crossing from a worker process to the main process is pickled
    (packed into one bytes object and cut again); a transform that decodes,
    or returns batch.packed(), runs in the worker and sends its result
    instead. `seed` and `resume_from` as for TarViewDataset."""

    def __init__(self, dataset_dir, epoch=0, rank=None, world_size=None, batch_size=256, start=0,
                 block_samples=None, block_bytes=DEFAULT_BLOCK_BYTES, names=False, transform=None,
                 reconnect_timeout=DEFAULT_RECONNECT_TIMEOUT, seed=None, resume_from=None):
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        require_socket(dataset_dir)
        self.dataset_dir, self.batch_size = dataset_dir, batch_size
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self.epoch, self.start = epoch, start
        self.block_samples, self.block_bytes, self.names = block_samples, block_bytes, names
        self.transform, self.reconnect_timeout = transform, reconnect_timeout
        self.seed = None if seed is None else check_seed(seed)
        self.resume_from = None if resume_from is None else resume_spec(resume_from)

    def set_epoch(self, epoch, start=0, resume_from=None):
        self.epoch, self.start = epoch, start
        self.resume_from = None if resume_from is None else resume_spec(resume_from)

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        batches = SampleBatches(self.dataset_dir, self.epoch, self.rank, self.world_size, self.batch_size, worker,
                                workers, self.start, self.block_samples, self.block_bytes, self.names,
                                self.reconnect_timeout, seed=self.seed, resume_from=self.resume_from)
        return iter(batches) if self.transform is None else map(self.transform, batches)
