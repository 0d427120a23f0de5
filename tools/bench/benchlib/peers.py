"""The loaders loaders_bench.py compares, as their users run them, each fed by a
PyTorch DataLoader (--workers processes, --batch samples a batch) except
where the library has its own (peers_dali.py, peers_ffcv.py). Run inside
loaders_peer.py, one loader per process.

A peer is made from the run's spec (loaders_peer.py writes what it holds) and
has epoch(e) for e = 1, 2: an iterator over the batches the training loop
gets, each given as the numpy int64 array of its samples' ids (storage
indices, benchlib/formats.py) in batch order. Each batch's bytes are packed
in the worker by collate_ids (benchlib/loaders.py's to_batch: one uint8
tensor in shared memory and the lengths) with the ids beside them. Anything
the loader reads before its first batch (an index, a header) is read inside
epoch 1: the caller times it.

  files           map-style Dataset over the backend's files, shuffle=True,
                  `open(path, "rb").read()` per sample (pipeline_bench's files)
  dlfs-raw        the same over a dlfsd's raw/, read with dlfs.read_file
                  (pipeline_bench's raw-rf)
  dlfs-views      DLFS epoch views with python/dlfs: worker k streams
                  `dlfs.TarView(ds, e, k, W).samples()` (pipeline_bench's views)
  dlfs-views-b    the same views read as whole batches: worker k yields
                  `dlfs.TarView(ds, e, k, W).batches(--batch)` (one pread per run of
                  samples, no per-sample Python step; pipeline_bench's views-b),
                  DataLoader batch_size=None
  dlfs-views-wds  the webdataset library over the same view files: worker k
                  reads <ds>/epochs/<e>/<W>/<k>.tar (split_by_worker), no shuffle
                  of its own (the view is the shuffle)
  mosaic          Mosaic Streaming: StreamingDataset(local=MDS dir, shuffle=True,
                  batch_size=--batch), its default shuffle (py1e), one dataset
                  for both epochs (it counts its epochs itself)
  wds-1k, wds-10k WebDataset over tar shards as its users run it: every shard
                  shuffled (shardshuffle = the shard count), shards split over
                  workers, then .shuffle(1000 or 10000) sample buffers; one
                  dataset for both epochs"""
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

from .client import dlfs
from .loaders import packed_to_batch, to_batch


class Catalog:
    """Sample ids from names: a name's generator index (img_<i>.bin) mapped to
    its position in the storage order (sorted relative paths)."""

    def __init__(self, names):
        self.by_gen = [0] * len(names)
        for pos, name in enumerate(names):
            self.by_gen[gen_index(name)] = pos

    def key_id(self, key):
        """The id of a sample key or member path (class_0001/img_000123[.bin])."""
        return self.by_gen[gen_index(key)]


def gen_index(name):
    """i of .../img_<i>[.ext] (tools/gen_dataset.py's names)."""
    base = name[name.rindex("_") + 1:]
    dot = base.find(".")
    return int(base[:dot] if dot >= 0 else base)


def collate_ids(samples):
    """collate_fn of (id, bytes) samples: (data, lengths, ids), data in shared
    memory when made in a worker (to_batch)."""
    data, lengths = to_batch([b for _, b in samples])
    return data, lengths, torch.tensor([i for i, _ in samples], dtype=torch.int64)


def _rank():
    info = get_worker_info()
    return (info.id, info.num_workers) if info else (0, 1)


def ids_of(loader):
    for _data, _lengths, ids in loader:
        yield ids.numpy()


class FileSamples(Dataset):
    """Map-style: item i is (i, the bytes of file names[i] under root)."""

    def __init__(self, root, names, whole_file=None):
        self.paths = [f"{root}/{n}" for n in names]
        self.whole_file = whole_file

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        if self.whole_file:
            return i, self.whole_file(self.paths[i])
        with open(self.paths[i], "rb") as f:
            return i, f.read()


class ViewSamples(IterableDataset):
    """Worker k of W streams rank k of a W-rank epoch view: (id, bytes)."""

    def __init__(self, ds_dir, epoch, catalog):
        self.ds_dir, self.epoch, self.catalog = ds_dir, epoch, catalog

    def __iter__(self):
        rank, world = _rank()
        for key, group in dlfs.TarView(self.ds_dir, self.epoch, rank, world, zero_copy=False).samples():
            yield self.catalog.key_id(key), next(iter(group.values()))  # one member per sample here


class ViewBatchIds(IterableDataset):
    """Worker k of W reads rank k of a W-rank view as whole batches:
    (bytes back to back, lengths, ids) of the one member per sample."""

    def __init__(self, ds_dir, epoch, batch, catalog):
        self.ds_dir, self.epoch, self.batch, self.catalog = ds_dir, epoch, batch, catalog

    def __iter__(self):
        rank, world = _rank()
        for batch in dlfs.TarView(self.ds_dir, self.epoch, rank, world, zero_copy=False).batches(self.batch):
            if len(batch.fields) != 1:
                raise ValueError(f"expected one member per sample, got extensions {sorted(batch.fields)}")
            blob, lengths = next(iter(batch.fields.values()))
            yield blob, lengths, [self.catalog.key_id(k) for k in batch.keys]


def packed_ids(packed):
    """collate_fn of ViewBatchIds: packed_to_batch's (data, lengths), and the ids."""
    blob, lengths, ids = packed
    data, lengths = packed_to_batch((blob, lengths))
    return data, lengths, torch.tensor(ids, dtype=torch.int64)


class _WdsPair:
    """WebDataset sample dict -> (id, bytes of its one member)."""

    def __init__(self, catalog):
        self.catalog = catalog

    def __call__(self, sample):
        data = [v for k, v in sample.items() if not k.startswith("__")]
        if len(data) != 1:
            raise ValueError(f"sample {sample['__key__']}: expected one member, got {sorted(sample)}")
        return self.catalog.key_id(sample["__key__"]), data[0]


def _mosaic_pairs(samples):
    return collate_ids([(s["id"], s["data"]) for s in samples])


class Peer:
    """What every DataLoader peer shares: the spec, the ids, a DataLoader made per epoch."""

    def __init__(self, spec):
        self.spec = spec
        self.batch, self.workers = spec["batch"], spec["workers"]
        self.names = spec["names"]
        self.catalog = Catalog(self.names)

    def loader(self, dataset, collate=collate_ids, **kw):
        return DataLoader(dataset, batch_size=self.batch, num_workers=self.workers, collate_fn=collate, **kw)

    def epoch(self, e):
        return ids_of(self.make(e))


class Files(Peer):
    def make(self, _e):
        return self.loader(FileSamples(self.spec["files_root"], self.names), shuffle=True)


class DlfsRaw(Peer):
    def make(self, _e):
        return self.loader(FileSamples(self.spec["ds_dir"] + "/raw", self.names, dlfs.read_file), shuffle=True)


class DlfsViews(Peer):
    def make(self, e):
        return self.loader(ViewSamples(self.spec["ds_dir"], self.spec["view_epochs"][e - 1], self.catalog))


class DlfsViewsB(Peer):
    def make(self, e):
        ds = ViewBatchIds(self.spec["ds_dir"], self.spec["view_epochs"][e - 1], self.batch, self.catalog)
        return DataLoader(ds, batch_size=None, num_workers=self.workers, collate_fn=packed_ids)


class DlfsViewsWds(Peer):
    def make(self, e):
        import webdataset as wds
        view = f"{self.spec['ds_dir']}/epochs/{self.spec['view_epochs'][e - 1]}/{self.workers}"
        urls = [f"{view}/{k}.tar" for k in range(self.workers)]
        ds = wds.WebDataset(urls, shardshuffle=False, empty_check=False).map(_WdsPair(self.catalog))
        return self.loader(ds)


class Mosaic(Peer):
    dataset = None

    def make(self, _e):
        if self.dataset is None:  # reads index.json: inside epoch 1
            from streaming import StreamingDataset
            self.dataset = StreamingDataset(local=self.spec["mds_dir"], shuffle=True, batch_size=self.batch)
        return self.loader(self.dataset, _mosaic_pairs)


class Wds(Peer):
    dataset = None

    def make(self, _e):
        if self.dataset is None:
            import webdataset as wds
            urls = self.spec["tar_shards"]
            self.dataset = (wds.WebDataset(urls, shardshuffle=len(urls)).shuffle(self.spec["shuffle_buffer"])
                            .map(_WdsPair(self.catalog)))
        return self.loader(self.dataset)


PEERS = {"files": Files, "dlfs-raw": DlfsRaw, "dlfs-views": DlfsViews, "dlfs-views-b": DlfsViewsB,
         "dlfs-views-wds": DlfsViewsWds,
         "mosaic": Mosaic, "wds-1k": Wds, "wds-10k": Wds}
