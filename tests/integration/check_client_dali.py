#!/usr/bin/env python3
"""NVIDIA DALI (the project's .venv, CPU only) reads DLFS as it reads a local
directory: for 45_client_dali.sh.

  check_client_dali.py make-shards DIR SHARDS SAMPLES SEED
      WebDataset shards shard-NNNN.tar of SAMPLES samples each (Python's
      tarfile): key c<label>/s<n>, members <key>.bin (random bytes),
      <key>.cls (the label), <key>.txt (the key) and, every fourth sample,
      <key>.seg.png (an extension with a dot: WebDataset's first-dot key)
  check_client_dali.py make-images DIR CLASSES PER SEED
      an image tree DIR/class<c>/img<n>.jpg of JPEGs made with PIL (sizes vary)
  check_client_dali.py check --mnt MNT --out DIR --tfrecord DS:BACKEND:SEED
                             --shards DS:BACKEND --images DS:BACKEND
      (a) fn.readers.tfrecord over raw/'s TFRecord files with the .idx files
      beside them (raw/ shows them as the backend has them): each record's
      features as written, in order, as over the backend; over each rank's
      .tfrecord view of epoch 0 (W 2) with the DALI index served beside it,
      <r>.tfrecord.idx (equal to tfrecord2idx's and dlfs-ctl's of the view,
      which the scenario leaves in DIR): the .index's records, in order;
      both also read by read() and with O_DIRECT instead of mmap;
      random_shuffle: every record once.
      (b) fn.readers.webdataset over each rank's .tar view of a WebDataset
      shard dataset (epoch 0, W 2), without an index, with wds2idx's (in
      DIR) and by read(): each sample's members as in the backend shards,
      in the .index's order, each sample once; random_shuffle: the same
      multiset; over raw/'s shards as over the backend's.
      (c) fn.readers.file + fn.decoders.image(device="cpu") over raw/ of the
      image tree: the decoded images, labels and names of the same pipeline
      over the backend directory, in order; random_shuffle: the same
      multiset; over the files of each rank's <r>/ directory view (epoch 0,
      W 2): the .index's images in order, decoded as the backend's.
      A part whose reader needs a GPU is skipped with the reason; the check
      passes if the other parts pass.

The recipe_* functions are what a user writes (docs/clients.md quotes them);
the rest compares what they yield with the backend.
"""
import argparse
import hashlib
import io
import os
import random
import re
import sys
import tarfile
import urllib.parse

import numpy as np
from nvidia.dali import fn, pipeline_def
import nvidia.dali.tfrecord as tfrec

from check_client_tensorflow import EMBEDDING, expected
from checklib import fail

BATCH = 8
WDS_EXT = ["bin", "cls", "txt", "seg.png"]
W = 2  # world size of the views read


# ---- recipes: what a user writes ----

TFRECORD_FEATURES = {
    "id": tfrec.FixedLenFeature([], tfrec.int64, -1),
    "label": tfrec.FixedLenFeature([], tfrec.int64, -1),
    "image": tfrec.FixedLenFeature([], tfrec.string, ""),
    "embedding": tfrec.FixedLenFeature([EMBEDDING], tfrec.float32, 0.0),
    "tags": tfrec.VarLenFeature(tfrec.int64, 0),
}


@pipeline_def(batch_size=BATCH, num_threads=2, device_id=None)
def recipe_dali_tfrecord(paths, index_paths, shuffle=False):
    """TFRecord files (raw/'s, or an epoch view) with their DALI indexes."""
    r = fn.readers.tfrecord(path=paths, index_path=index_paths, features=TFRECORD_FEATURES,
                            random_shuffle=shuffle, pad_last_batch=True, name="reader")
    return r["id"], r["label"], r["image"], r["embedding"], r["tags"]


@pipeline_def(batch_size=BATCH, num_threads=2, device_id=None)
def recipe_dali_webdataset(paths, index_paths=None, shuffle=False):
    """WebDataset tars (an epoch view, or raw/'s shards): a sample's members by
    extension (WDS_EXT), an empty one where a sample has none."""
    data, label, key, mask = fn.readers.webdataset(paths=paths, index_paths=index_paths, ext=WDS_EXT,
                                                   missing_component_behavior="empty", random_shuffle=shuffle,
                                                   pad_last_batch=True, name="reader")
    return data, label, key, mask


@pipeline_def(batch_size=BATCH, num_threads=2, device_id=None)
def recipe_dali_image_folder(root, shuffle=False):
    """An image tree root/<class>/<image>: decoded on the CPU, labelled by class."""
    jpegs, labels = fn.readers.file(file_root=root, random_shuffle=shuffle, pad_last_batch=True, name="reader")
    images = fn.decoders.image(jpegs, device="cpu")
    return images, labels, fn.get_property(jpegs, key="source_info")


@pipeline_def(batch_size=BATCH, num_threads=2, device_id=None)
def recipe_dali_file_list(root, files, labels):
    """Images named by a list (relative to root), with their labels."""
    jpegs, labels = fn.readers.file(file_root=root, files=files, labels=labels, pad_last_batch=True, name="reader")
    return fn.decoders.image(jpegs, device="cpu"), labels


def recipe_epoch_directory(view_dir, classes):
    """The files and labels of an image tree's epoch view <r>/ in epoch order:
    its entries sorted by name, each <position>-<path, '%' as %25, '/' as %2F>,
    labelled by the class directory of the path."""
    files = sorted(os.listdir(view_dir))
    paths = [urllib.parse.unquote(f.split("-", 1)[1]) for f in files]
    return files, [classes.index(p.split("/")[0]) for p in paths]


# ---- make ----

def make_shards(out, shards, samples, seed):
    rng = random.Random(int(seed))
    os.makedirs(out)
    n = 0
    for s in range(int(shards)):
        with tarfile.open(os.path.join(out, f"shard-{s:04d}.tar"), "w", format=tarfile.USTAR_FORMAT) as tar:
            for _ in range(int(samples)):
                label = rng.randrange(3)
                key = f"c{label}/s{n:05d}"
                members = {"bin": rng.randbytes(rng.randrange(1, 6000)), "cls": str(label).encode(),
                           "txt": key.encode()}
                if n % 4 == 0:
                    members["seg.png"] = rng.randbytes(rng.randrange(1, 700))
                for ext, data in members.items():
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
                n += 1
    print(f"{shards} WebDataset shards, {n} samples")
    return 0


def make_images(out, classes, per, seed):
    from PIL import Image
    rng = np.random.default_rng(int(seed))
    for c in range(int(classes)):
        os.makedirs(os.path.join(out, f"class{c}"))
        for i in range(int(per)):
            h, w = rng.integers(16, 80, size=2)
            ramp = np.linspace(0, 255, int(w), dtype=np.float32)[None, :, None]
            pixels = np.clip(ramp + rng.normal(0, 40, size=(int(h), int(w), 3)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels, "RGB").save(os.path.join(out, f"class{c}", f"img{i:03d}.jpg"), quality=85)
    print(f"{int(classes) * int(per)} JPEGs in {classes} classes")
    return 0


# ---- running pipelines ----

@pipeline_def(batch_size=BATCH, num_threads=2, device_id=None)
def tfrecord_read_by(paths, index_paths, use_o_direct):
    """recipe_dali_tfrecord's records read by read() (or with O_DIRECT) instead of mmap."""
    r = fn.readers.tfrecord(path=paths, index_path=index_paths, features=TFRECORD_FEATURES, pad_last_batch=True,
                            dont_use_mmap=True, use_o_direct=use_o_direct, name="reader")
    return r["id"], r["label"], r["image"], r["embedding"], r["tags"]


@pipeline_def(batch_size=BATCH, num_threads=2, device_id=None)
def webdataset_read_by_read(paths):
    """recipe_dali_webdataset's samples read with read() instead of mmap."""
    data, label, key, mask = fn.readers.webdataset(paths=paths, ext=WDS_EXT, missing_component_behavior="empty",
                                                   dont_use_mmap=True, pad_last_batch=True, name="reader")
    return data, label, key, mask


def run_epoch(pipe):
    """One epoch of a pipeline as a list of samples, each a tuple of numpy
    arrays (one per output). The readers pad the last batch
    (pad_last_batch): the samples past epoch_size are that padding."""
    pipe.build()
    n = pipe.epoch_size("reader")
    samples = []
    while len(samples) < n:
        outputs = pipe.run()
        samples += [tuple(np.array(out.at(i)) for out in outputs) for i in range(len(outputs[0]))]
    return samples[:n]


def same_samples(a, b):
    return len(a) == len(b) and all(
        len(x) == len(y) and all(np.array_equal(u, v) for u, v in zip(x, y)) for x, y in zip(a, b))


# ---- (a) TFRecord ----

def tfrecord_values(sample):
    """A fn.readers.tfrecord sample as check_client_tensorflow.expected spells it."""
    sid, label, image, embedding, tags = sample
    return {"id": int(sid), "label": int(label), "image": image.tobytes(),
            "embedding": embedding.tolist(), "tags": tags.tolist()}


def check_records(what, samples, ids, seed):
    """Sample k holds the features record ids[k] was written with."""
    for k, (sample, i) in enumerate(zip(samples, ids)):
        got, want = tfrecord_values(sample), expected(seed, i)
        if got != want:
            differ = sorted(name for name in want if got[name] != want[name])
            fail(f"{what}: sample {k} should be record {i}; its features {differ} differ")


def part_tfrecord(mnt, out, ds, backend, seed):
    from dlfs.index import ViewIndex
    names = sorted(n for n in os.listdir(backend) if n.endswith(".tfrecord"))
    raw = os.path.join(mnt, ds, "raw")
    for n in names:  # dlfsd reads the .idx files, and raw/ shows them as they are
        if open(os.path.join(raw, n + ".idx"), "rb").read() != open(os.path.join(backend, n + ".idx"), "rb").read():
            fail(f"(a) raw/{n}.idx differs from the backend's")

    def over(d, shuffle=False):
        paths = [os.path.join(d, n) for n in names]
        return run_epoch(recipe_dali_tfrecord(paths, [p + ".idx" for p in paths], shuffle, seed=45))

    got, want = over(raw), over(backend)
    if not same_samples(got, want):
        fail(f"(a) raw/: {len(got)} records through the mount, {len(want)} over the backend, or other features")
    check_records("(a) raw/", got, range(len(got)), seed)
    total = len(got)
    raw_paths = [os.path.join(raw, n) for n in names]
    for direct in (False, True):
        if not same_samples(run_epoch(tfrecord_read_by(raw_paths, [p + ".idx" for p in raw_paths], direct)), got):
            fail(f"(a) raw/ read {'with O_DIRECT' if direct else 'by read()'}: other records than by mmap")
    shuffled = over(raw, shuffle=True)
    ids = [int(s[0]) for s in shuffled]
    if sorted(ids) != list(range(total)) or ids == list(range(total)):
        fail(f"(a) raw/ random_shuffle: {len(ids)} records, not a shuffle of the {total}")
    check_records("(a) raw/ random_shuffle", shuffled, ids, seed)
    print(f"(a) fn.readers.tfrecord over raw/ with its .idx files: {total} records in order with the features "
          "written, as over the backend, by mmap, read() and O_DIRECT; random_shuffle: each once")

    seen = []
    for rank in range(W):
        base = os.path.join(mnt, ds, "epochs", "0", str(W), str(rank))
        idx = base + ".tfrecord.idx"  # served beside the view
        mine = open(idx).read()
        for tool, path in (("tfrecord2idx", f"tfrecord2idx-0-{W}-{rank}.idx"),
                           ("dlfs-ctl tfrecord index", f"copies/0-{W}-{rank}.tfrecord.idx")):
            if open(os.path.join(out, path)).read() != mine:
                fail(f"(a) rank {rank}: {tool}'s index of the view differs from the served {rank}.tfrecord.idx")
        index = ViewIndex(base + ".index")
        samples = run_epoch(recipe_dali_tfrecord([base + ".tfrecord"], [idx], seed=45))
        if [int(s[0]) for s in samples] != index.ids:
            fail(f"(a) epoch 0 rank {rank}: DALI's records are not the .index's sample ids in order")
        check_records(f"(a) epoch 0 rank {rank} view", samples, index.ids, seed)
        for direct in (False, True):
            if not same_samples(run_epoch(tfrecord_read_by([base + ".tfrecord"], [idx], direct)), samples):
                fail(f"(a) epoch 0 rank {rank} view read {'with O_DIRECT' if direct else 'by read()'}: "
                     "other records than by mmap")
        seen += index.ids
    if sorted(seen) != list(range(total)):
        fail(f"(a) epoch 0: the views yield {len(seen)} records, not each of the {total} once")
    print(f"(a) fn.readers.tfrecord over the {W} .tfrecord views of epoch 0 with their served .tfrecord.idx "
          "(= tfrecord2idx's = dlfs-ctl's on a copy): the .index's records in order, each once; "
          "mmap, read() and O_DIRECT alike")


# ---- (b) WebDataset ----

def backend_samples(shards_dir):
    """key -> {ext: bytes} of the backend shards (first-dot keys), and the keys in shard order."""
    samples, order = {}, []
    for name in sorted(n for n in os.listdir(shards_dir) if n.endswith(".tar")):
        with tarfile.open(os.path.join(shards_dir, name)) as tar:
            for m in tar.getmembers():
                base = m.name.rsplit("/", 1)[-1]
                key = m.name[:len(m.name) - len(base) + base.index(".")]
                if key not in samples:
                    samples[key] = {}
                    order.append(key)
                samples[key][base[base.index(".") + 1:]] = tar.extractfile(m).read()
    return samples, order


def wds_keyed(what, samples, backend):
    """The keys of fn.readers.webdataset's samples, each checked member by member against the backend."""
    keys = []
    for k, sample in enumerate(samples):
        key = sample[WDS_EXT.index("txt")].tobytes().decode()
        want = backend.get(key)
        if want is None:
            fail(f"{what}: sample {k} has the key {key!r}, no sample of the backend's")
        for ext, got in zip(WDS_EXT, sample):
            if got.tobytes() != want.get(ext, b""):
                fail(f"{what}: sample {k} ({key}): its .{ext} differs from the backend's")
        keys.append(key)
    return keys


def part_webdataset(mnt, out, ds, shards):
    from dlfs.index import ViewIndex
    backend, order = backend_samples(shards)
    seen = []
    for rank in range(W):
        base = os.path.join(mnt, ds, "epochs", "0", str(W), str(rank))
        index = ViewIndex(base + ".index")
        wds2idx = [os.path.join(out, f"wds2idx-0-{W}-{rank}.idx")]
        for how, pipe in (("without an index", recipe_dali_webdataset([base + ".tar"])),
                          ("with wds2idx's index", recipe_dali_webdataset([base + ".tar"], wds2idx)),
                          ("by read()", webdataset_read_by_read([base + ".tar"]))):
            what = f"(b) epoch 0 rank {rank} .tar view {how}"
            if wds_keyed(what, run_epoch(pipe), backend) != index.names:
                fail(f"{what}: the samples are not the .index's keys in order")
        seen += index.names
    if sorted(seen) != sorted(order):
        fail(f"(b) epoch 0: the views yield {len(seen)} samples, not each of the {len(order)} once")
    base = os.path.join(mnt, ds, "epochs", "1", str(W), "0")
    shuffled = run_epoch(recipe_dali_webdataset([base + ".tar"], shuffle=True, seed=45))
    keys = wds_keyed("(b) epoch 1 rank 0 random_shuffle", shuffled, backend)
    want = ViewIndex(base + ".index").names
    if sorted(keys) != sorted(want) or keys == want:
        fail(f"(b) epoch 1 rank 0 random_shuffle: {len(keys)} samples, not a shuffle of the view's {len(want)}")
    names = sorted(n for n in os.listdir(shards) if n.endswith(".tar"))
    got = run_epoch(recipe_dali_webdataset([os.path.join(mnt, ds, "raw", n) for n in names]))
    if not same_samples(got, run_epoch(recipe_dali_webdataset([os.path.join(shards, n) for n in names]))):
        fail("(b) raw/'s shards: DALI's samples differ from those over the backend's shards")
    if wds_keyed("(b) raw/", got, backend) != order:
        fail("(b) raw/'s shards: the samples are not the backend's in shard order")
    print(f"(b) fn.readers.webdataset over the {W} .tar views of epoch 0, without an index and with wds2idx's, "
          f"by mmap and read(): {len(order)} samples once, in .index order, members as in the backend shards; "
          "random_shuffle over epoch 1 rank 0: its samples once; raw/'s shards as the backend's")


# ---- (c) image tree ----

def part_images(mnt, ds, images):
    raw = os.path.join(mnt, ds, "raw")
    got, want = run_epoch(recipe_dali_image_folder(raw)), run_epoch(recipe_dali_image_folder(images))
    files = sorted(os.path.relpath(os.path.join(d, f), images) for d, _, fs in os.walk(images) for f in fs)
    names = [s[2].tobytes().decode() for s in got]
    if names != files:
        fail(f"(c) fn.readers.file over raw/ yields {len(names)} files, the backend has {len(files)}, "
             "or in another order")
    for (img, label, _), name in zip(got, names):
        if label.item() != int(name.split("/")[0].removeprefix("class")) or img.ndim != 3 or img.shape[2] != 3:
            fail(f"(c) raw/{name}: label {label.item()}, image of shape {img.shape}")
    if not same_samples(got, want):
        fail("(c) raw/: decoded images or labels differ from the same pipeline's over the backend directory")
    shuffled = run_epoch(recipe_dali_image_folder(raw, shuffle=True, seed=45))
    digest = lambda s: (s[2].tobytes(), s[1].item(), hashlib.sha256(s[0].tobytes()).hexdigest())  # noqa: E731
    mixed, ordered = list(map(digest, shuffled)), list(map(digest, got))
    if sorted(mixed) != sorted(ordered) or mixed == ordered:
        fail("(c) raw/ random_shuffle: not a shuffle of the same decoded images and labels")
    print(f"(c) fn.readers.file + fn.decoders.image(cpu) over raw/: {len(got)} JPEGs of "
          f"{len({s[1].item() for s in got})} classes decoded as over the backend, in order; "
          "random_shuffle: the same multiset")
    decoded = {name: (s[0], s[1].item()) for s, name in zip(want, files)}
    part_epoch_directories(mnt, ds, decoded)


def part_epoch_directories(mnt, ds, decoded):
    """fn.readers.file over the <r>/ views of epoch 0: the .index's images in order, decoded as the backend's."""
    from dlfs.index import ViewIndex
    classes = sorted({name.split("/")[0] for name in decoded})
    seen = []
    for rank in range(W):
        view_dir = os.path.join(mnt, ds, "epochs", "0", str(W), str(rank))
        index = ViewIndex(view_dir + ".index")
        files, labels = recipe_epoch_directory(view_dir, classes)
        samples = run_epoch(recipe_dali_file_list(view_dir, files, labels))
        if len(samples) != len(index):
            fail(f"(c) epoch 0 rank {rank} <r>/: {len(samples)} images, {len(index)} in its .index")
        for k, ((img, label), name) in enumerate(zip(samples, index.names)):
            want_img, want_label = decoded[name]
            if label.item() != want_label or not np.array_equal(img, want_img):
                fail(f"(c) epoch 0 rank {rank} <r>/: image {k} is not {name} as decoded from the backend")
        seen += index.names
    if sorted(seen) != sorted(decoded):
        fail(f"(c) epoch 0: the <r>/ views hold {len(seen)} images, not each of the {len(decoded)} once")
    print(f"(c) fn.readers.file over the {W} <r>/ directory views of epoch 0: the .index's images in order, "
          "decoded and labelled as the backend's, each once")


# ---- check ----

GPU_ONLY = re.compile(r"CUDA|cuda|GPU|NVML|nvjpeg")


def run_part(name, part, *args):
    """Runs a part: "ok", or "gpu" when it failed for want of a GPU on a
    machine without one (the reason printed); any other failure fails."""
    from nvidia.dali.backend import GetCUDADeviceCount
    try:
        part(*args)
        return "ok"
    except RuntimeError as e:
        if not GPU_ONLY.search(str(e)) or GetCUDADeviceCount() > 0:
            raise
        print(f"SKIP part {name}: needs a GPU, this machine has none: {str(e).strip().splitlines()[-1]}")
        return "gpu"


def check(a):
    import nvidia.dali
    tf_ds, tf_backend, tf_seed = a.tfrecord.split(":")
    wds_ds, wds_backend = a.shards.split(":")
    img_ds, img_backend = a.images.split(":")
    results = {
        "a": run_part("(a) fn.readers.tfrecord", part_tfrecord, a.mnt, a.out, tf_ds, tf_backend, int(tf_seed)),
        "b": run_part("(b) fn.readers.webdataset", part_webdataset, a.mnt, a.out, wds_ds, wds_backend),
        "c": run_part("(c) fn.readers.file + fn.decoders.image", part_images, a.mnt, img_ds, img_backend),
    }
    if all(r == "gpu" for r in results.values()):
        print("SKIP: every DALI reader here needs a GPU")
        return 77
    print(f"ok: DALI {nvidia.dali.__version__} reads DLFS as the backend (parts: "
          + ", ".join(f"{k} {v}" for k, v in results.items()) + ")")
    return 0


def main(argv):
    if argv[:1] == ["make-shards"]:
        return make_shards(*argv[1:])
    if argv[:1] == ["make-images"]:
        return make_images(*argv[1:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["check"])
    ap.add_argument("--mnt", required=True)
    ap.add_argument("--out", required=True, help="the indexes the scenario made, and where this check writes its own")
    ap.add_argument("--tfrecord", required=True, help="DATASET:BACKEND:SEED (check_client_tensorflow.py make's seed)")
    ap.add_argument("--shards", required=True, help="DATASET:BACKEND of the WebDataset shards")
    ap.add_argument("--images", required=True, help="DATASET:BACKEND of the image tree")
    return check(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
