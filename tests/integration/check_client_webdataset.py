#!/usr/bin/env python3
"""The webdataset library (1.0.2), unchanged, reads DLFS epoch views (issue 33).

  check_client_webdataset.py make-files DIR
      a grouped tree of plain files, c<k>/img<nnn>.{cls,jpg|png[,txt]}, real
      JPEG and PNG images of various sizes made with PIL (dlfsd --group-by
      first-dot makes each key one sample).
  check_client_webdataset.py make-shards DIR
      other samples of the same shape in 4 WebDataset tar shards (dlfsd
      --format tar).
  check_client_webdataset.py check --ds MNT/NAME --backend DIR --kind files|shards
      Runs as the unprivileged user. Per epoch (0, 1) and rank of W = 2:
      wds.WebDataset over the rank's <r>.tar yields the keys of the rank's
      <r>.index in its order, each with the backend's members byte for byte
      (no decoding), and decoded ("pil" for files, "rgb8" for shards) the
      backend's pixels and labels; every key once per epoch across the ranks;
      with RANK/WORLD_SIZE set (as torchrun sets them) webdataset's default
      node splitter refuses, hence nodesplitter=None in the recipes.
      Then wds.WebLoader with 2 workers: one view file is one shard, so a
      second worker gets no shard and webdataset raises (fewer shards than
      workers), or, with empty_check=False, one worker reads it all; the
      recipe (recipe_webloader: per worker the view of world size W x
      workers) yields exactly the rank's samples in its .index order.
      Shards also: wds.WebDataset over the original shards in raw/ yields
      the backend's samples in shard order.
"""
import argparse
import codecs
import gc
import io
import os
import random
import sys
import tarfile
import warnings

from checklib import fail

W, WORKERS = 2, 2
CLASSES, PER_CLASS = 3, 40  # make-files: 120 samples
SHARDS, PER_SHARD = 4, 40   # make-shards: 160 samples
META = ("__key__", "__url__", "__local_path__")


# --- The recipes (docs/clients.md quotes them) ------------------------------------------------

def recipe_webdataset(view_path):
    """One rank's epoch view, read by WebDataset as one shard: (key, RGB image, label) in the
    view's order. DLFS already split the epoch among the ranks: no node splitter (webdataset's
    default refuses to run when RANK/WORLD_SIZE or torch.distributed say there are several)."""
    import webdataset as wds
    ds = wds.WebDataset(view_path, shardshuffle=False, nodesplitter=None)
    return ds.decode("pil").to_tuple("__key__", "jpg;png", "cls")


def recipe_webloader(dataset_dir, epoch, rank, world_size, workers):
    """Rank `rank` of `world_size` with `workers` DataLoader workers: worker k reads the view
    of rank rank + k*world_size of world_size*workers, which holds every workers-th sample of
    this rank's view (from sample k on). The loader takes a sample from each worker in turn,
    so it yields exactly this rank's view, in its order (sample count a multiple of
    world_size*workers; else the views' padding differs at the end)."""
    import webdataset as wds
    views = [f"{dataset_dir}/epochs/{epoch}/{world_size * workers}/{rank + k * world_size}.tar"
             for k in range(workers)]
    ds = wds.WebDataset(views, shardshuffle=False, nodesplitter=None)  # split_by_worker: a view each
    ds = ds.decode("pil").to_tuple("__key__", "jpg;png", "cls")
    return wds.WebLoader(ds, batch_size=None, num_workers=workers)


# --- Making the backends ----------------------------------------------------------------------

def image_bytes(rng, fmt):
    """A real image of a random size: a gradient with noise, as JPEG or PNG."""
    from PIL import Image
    w, h = rng.randint(16, 72), rng.randint(16, 72)
    mode = "RGB" if fmt == "jpg" else rng.choice(["RGB", "RGBA", "L"])
    img = Image.new(mode, (w, h))
    chans = len(mode)
    img.putdata([tuple((x * 7 + y * 3 + c * 50 + rng.randint(0, 40)) % 256 for c in range(chans))
                 if chans > 1 else (x * 5 + y * 9 + rng.randint(0, 40)) % 256
                 for y in range(h) for x in range(w)])
    out = io.BytesIO()
    img.save(out, format="JPEG" if fmt == "jpg" else "PNG", **({"quality": rng.randint(60, 95)} if fmt == "jpg" else {}))
    return out.getvalue()


def sample_members(rng, label):
    """{ext: bytes} of one sample: a JPEG or a PNG, its class, sometimes a caption."""
    fmt = "jpg" if rng.random() < 0.6 else "png"
    members = {"cls": str(label).encode(), fmt: image_bytes(rng, fmt)}
    if rng.random() < 0.3:
        members["txt"] = f"a picture of class {label} \u00e9t\u00e9".encode()
    return members


def make_files(out):
    rng = random.Random(41)
    for c in range(CLASSES):
        os.makedirs(os.path.join(out, f"c{c}"))
        for k in range(PER_CLASS):
            for ext, data in sample_members(rng, c).items():
                with open(os.path.join(out, f"c{c}", f"img{k:03d}.{ext}"), "wb") as f:
                    f.write(data)
    return 0


def make_shards(out):
    rng = random.Random(42)
    os.makedirs(out)
    for s in range(SHARDS):
        with tarfile.open(os.path.join(out, f"train-{s:04d}.tar"), "w", format=tarfile.GNU_FORMAT) as tar:
            for k in range(PER_SHARD):
                label = rng.randrange(CLASSES)
                for ext, data in sorted(sample_members(rng, label).items()):
                    info = tarfile.TarInfo(f"part{s}/s{k:03d}.{ext}")
                    info.size, info.mtime, info.mode = len(data), 1700000000, 0o644
                    tar.addfile(info, io.BytesIO(data))
    return 0


# --- What the backend holds -------------------------------------------------------------------

def split_key(path):
    """WebDataset's key rule, written out: the path up to the first dot of its base name."""
    slash = path.rfind("/") + 1
    dot = path.index(".", slash)
    return path[:dot], path[dot + 1:]


def add_member(out, path, data):
    key, ext = split_key(path)
    if ext in out.setdefault(key, {}):
        fail(f"backend: key {key!r} has two .{ext} members")
    out[key][ext] = data


def backend_samples(backend, kind):
    """key -> {ext: bytes}, read from the backend with os/tarfile (not webdataset)."""
    out = {}
    if kind == "files":
        for top, dirs, files in os.walk(backend):
            for name in files:
                path = os.path.join(top, name)
                with open(path, "rb") as f:
                    add_member(out, os.path.relpath(path, backend), f.read())
    else:
        for shard in sorted(n for n in os.listdir(backend) if n.endswith(".tar")):
            with tarfile.open(os.path.join(backend, shard)) as tar:
                for m in tar:
                    if m.isfile():
                        add_member(out, m.name, tar.extractfile(m).read())
    return out


def index_keys(path):
    """The keys of a view's .index (docs/views.md): position, id, offset, length, name."""
    with open(path, "rb") as f:
        head, *lines = f.read().split(b"\n")
    if not head.startswith(b"# dlfs view ") or b" group_by=first-dot" not in head:
        fail(f"{path}: header {head[:200]!r} is not a grouped view's")
    keys = []
    for pos, line in enumerate(l for l in lines if l):
        fields = line.split(b"\t", 4)
        if len(fields) != 5 or int(fields[0]) != pos:
            fail(f"{path}: line {pos + 2} {line[:120]!r} is not position {pos} and 4 fields")
        keys.append(codecs.escape_decode(fields[4])[0].decode())
    return keys


def view(ds_dir, epoch, world, rank):
    return f"{ds_dir}/epochs/{epoch}/{world}/{rank}"


# --- Checks -----------------------------------------------------------------------------------

def as_rank(rank, world):
    """Sets what torchrun would set for this rank (webdataset's pytorch_worker_info reads it)."""
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(world)


def no_wds_warnings(what, make):
    """make() builds a pipeline; webdataset must not warn (shardshuffle, nodesplitter, ...)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = make()
    ours = [w for w in caught if "webdataset" in (w.filename or "")]
    if ours:
        fail(f"{what}: webdataset warned: {[str(w.message) for w in ours]}")
    return out


def check_members(where, key, members, want):
    if key not in want:
        fail(f"{where}: key {key!r} is in no backend sample")
    if members != want[key]:
        diff = sorted(e for e in set(members) | set(want[key]) if members.get(e) != want[key].get(e))
        fail(f"{where}: {key!r}: members .{', .'.join(diff)} differ from the backend's (names or bytes)")


def check_raw_pass(wds, where, tar_path, planned, want):
    """No decoding: every member's bytes as the backend has them, keys in the .index order."""
    ds = no_wds_warnings(where, lambda: wds.WebDataset(tar_path, shardshuffle=False, nodesplitter=None))
    keys = []
    for sample in ds:
        key = sample["__key__"]
        if sample["__url__"] != tar_path:
            fail(f"{where}: sample {key!r} says it came from {sample['__url__']!r}")
        check_members(where, key, {k: v for k, v in sample.items() if k not in META}, want)
        keys.append(key)
    if keys != planned:
        fail(f"{where}: webdataset yields {len(keys)} keys, the .index lists {len(planned)}; "
             f"first difference at {next((i for i, (a, b) in enumerate(zip(keys, planned)) if a != b), None)}")


def expected_image(data):
    import numpy as np
    from PIL import Image
    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("RGB"))


def check_decoded(where, got, planned, want, spec):
    """(key, image, label) tuples against PIL's decoding of the backend's bytes."""
    import numpy as np
    keys = []
    for key, img, label in got:
        members = want[key]
        pixels = np.asarray(img) if spec == "pil" else img
        if spec == "pil" and img.mode != "RGB":
            fail(f"{where}: {key!r}: decoded to mode {img.mode}, want RGB")
        if not isinstance(pixels, np.ndarray) or pixels.dtype != np.uint8:
            fail(f"{where}: {key!r}: decoded to {type(img).__name__}, want uint8 pixels")
        ref = expected_image(members.get("jpg", members.get("png")))
        if pixels.shape != ref.shape or not np.array_equal(pixels, ref):
            fail(f"{where}: {key!r}: pixels {pixels.shape} differ from the backend image's {ref.shape}")
        if not isinstance(label, int) or label != int(members["cls"]):
            fail(f"{where}: {key!r}: label {label!r}, the backend's .cls says {members['cls']!r}")
        keys.append(key)
    if keys != planned:
        fail(f"{where}: decoded keys are not the .index order ({len(keys)} vs {len(planned)})")


def check_default_nodesplitter(wds, ds_dir):
    """In a job of several ranks (RANK and WORLD_SIZE set, as torchrun does) webdataset's default
    node splitter refuses to run: the recipes pass nodesplitter=None."""
    as_rank(1, W)
    try:
        n = sum(1 for _ in wds.WebDataset(view(ds_dir, 0, W, 1) + ".tar", shardshuffle=False))
        fail(f"RANK=1 WORLD_SIZE={W}: the default nodesplitter let {n} samples through; webdataset 1.0.2 refuses")
    except ValueError as e:
        if "explicit nodesplitter" not in str(e):
            raise
    print(f"  (a) RANK=1 WORLD_SIZE={W}: the default nodesplitter raises 'add an explicit nodesplitter'; "
          "nodesplitter=None reads the rank's view")


def check_epochs(wds, ds_dir, want, spec):
    """(a): each rank's view as one shard, raw and decoded; the epoch covers every key once."""
    check_default_nodesplitter(wds, ds_dir)
    orders = []
    for epoch in (0, 1):
        seen = []
        for rank in range(W):
            as_rank(rank, W)
            stem = view(ds_dir, epoch, W, rank)
            where = f"epoch {epoch} rank {rank}/{W}"
            planned = index_keys(stem + ".index")
            check_raw_pass(wds, where + " (raw)", stem + ".tar", planned, want)
            if spec == "pil":
                got = no_wds_warnings(where, lambda: recipe_webdataset(stem + ".tar"))
            else:
                got = no_wds_warnings(where, lambda: wds.WebDataset(stem + ".tar", shardshuffle=False, nodesplitter=None)
                                      .decode(spec).to_tuple("__key__", "jpg;png", "cls"))
            check_decoded(where + f" (decode {spec!r})", got, planned, want, spec)
            seen += planned
        if sorted(seen) != sorted(want):
            fail(f"epoch {epoch}: {len(seen)} samples over {W} ranks, {len(set(seen))} distinct, "
                 f"for {len(want)} backend keys")
        orders.append(seen)
    if orders[0] == orders[1]:
        fail("epochs 0 and 1 have the same order")
    print(f"  (a) 2 epochs x {W} ranks: {len(want)} keys once per epoch, bytes, pixels ({spec}) and labels "
          "as the backend's, in the .index order")


def check_raw_shards(wds, ds_dir, backend, want):
    """The original shards through raw/, as a WebDataset shard list: the backend's samples in
    shard order (what webdataset reads from the backend directory itself)."""
    shards = sorted(n for n in os.listdir(backend) if n.endswith(".tar"))
    urls = [f"{ds_dir}/raw/{n}" for n in shards]
    got = no_wds_warnings("raw shards", lambda: wds.WebDataset(urls, shardshuffle=False, nodesplitter=None))
    ref = wds.WebDataset([os.path.join(backend, n) for n in shards], shardshuffle=False, nodesplitter=None)
    keys = []
    for sample, ref_sample in zip(got, ref):
        key = sample["__key__"]
        if key != ref_sample["__key__"]:
            fail(f"raw shards: {key!r} where the backend's shards have {ref_sample['__key__']!r}")
        check_members("raw shards", key, {k: v for k, v in sample.items() if k not in META}, want)
        keys.append(key)
    if sorted(keys) != sorted(want):
        fail(f"raw shards: {len(keys)} samples, {len(set(keys))} distinct, for {len(want)} backend keys")
    print(f"  raw/: wds.WebDataset over the {len(urls)} original shards: the backend's {len(keys)} samples in shard order")


def tag_worker(sample):
    import torch.utils.data
    sample["__worker__"] = torch.utils.data.get_worker_info().id
    return sample


def collect_loaders():
    """A finished DataLoader iterator caught in a reference cycle (webdataset's pipelines make
    them) would otherwise be collected in the next loader's forked workers, where torch's
    __del__ complains ("can only test a child process"). Harmless, but noise."""
    gc.collect()


def check_one_shard_two_workers(wds, ds_dir, want):
    """(b), as users meet it: one view file is one shard; webdataset splits shards among
    workers, so the second worker has none."""
    as_rank(0, W)
    tar_path = view(ds_dir, 0, W, 0) + ".tar"
    planned = index_keys(view(ds_dir, 0, W, 0) + ".index")
    loader = wds.WebLoader(wds.WebDataset(tar_path, shardshuffle=False, nodesplitter=None),
                           batch_size=None, num_workers=WORKERS)
    try:
        n = sum(1 for _ in loader)
        fail(f"one view, {WORKERS} workers: {n} samples and no error; webdataset 1.0.2 raises for a worker "
             "without a shard")
    except ValueError as e:
        if "fewer shards than workers" not in str(e):
            raise
        # Frees the loader now: torch 1.13 re-raises the worker's error from a frame that
        # keeps it, a cycle through the loader's iterator; collected by gc, that iterator
        # waits 5 s for each worker before it kills them.
        e.__traceback__ = None
    collect_loaders()
    ds = wds.WebDataset(tar_path, shardshuffle=False, nodesplitter=None, empty_check=False).map(tag_worker)
    got = [(s["__key__"], s["__worker__"]) for s in wds.WebLoader(ds, batch_size=None, num_workers=WORKERS)]
    collect_loaders()
    if sorted(k for k, _ in got) != sorted(planned) or {w for _, w in got} != {0}:
        fail(f"one view, {WORKERS} workers, empty_check=False: {len(got)} samples from workers "
             f"{sorted({w for _, w in got})}, want the rank's {len(planned)} from worker 0 alone")
    print(f"  (b) one view with {WORKERS} workers: ValueError 'fewer shards than workers'; "
          f"with empty_check=False worker 0 reads all {len(planned)} samples, worker 1 none")


def check_recipe_webloader(ds_dir, want):
    """(b), the recipe: per-worker views of world size W x workers, together the rank's view."""
    for epoch in (0, 1):
        seen = []
        for rank in range(W):
            as_rank(rank, W)
            where = f"WebLoader epoch {epoch} rank {rank}/{W}, {WORKERS} workers"
            planned = index_keys(view(ds_dir, epoch, W, rank) + ".index")
            loader = no_wds_warnings(where, lambda: recipe_webloader(ds_dir, epoch, rank, W, WORKERS))
            check_decoded(where, loader, planned, want, "pil")
            del loader
            collect_loaders()
            seen += planned
        if sorted(seen) != sorted(want):
            fail(f"WebLoader epoch {epoch}: the ranks' samples are not every key once")
    print(f"  (b) recipe_webloader, {WORKERS} workers a rank, epochs 0 and 1: exactly each rank's samples, "
          "decoded, in its .index order")


def check(a):
    import webdataset as wds
    want = backend_samples(a.backend, a.kind)
    if len(want) % (W * WORKERS):
        fail(f"the check wants a sample count divisible by {W * WORKERS}, the backend has {len(want)}")
    if not any("png" in m for m in want.values()) or not any("jpg" in m for m in want.values()):
        fail("the backend lacks JPEG or PNG samples")
    print(f"{a.kind}: {len(want)} samples on the backend, read as uid {os.getuid()} with webdataset {wds.__version__}")
    if a.kind == "shards":
        check_raw_shards(wds, a.ds, a.backend, want)
    check_epochs(wds, a.ds, want, "pil" if a.kind == "files" else "rgb8")
    check_one_shard_two_workers(wds, a.ds, want)
    check_recipe_webloader(a.ds, want)
    return 0


def main():
    if sys.argv[1] in ("make-files", "make-shards"):
        return (make_files if sys.argv[1] == "make-files" else make_shards)(sys.argv[2])
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["check"])
    ap.add_argument("--ds", required=True, help="the dataset's directory in the mount")
    ap.add_argument("--backend", required=True)
    ap.add_argument("--kind", choices=["files", "shards"], required=True)
    return check(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
