#!/usr/bin/env python3
"""TensorFlow (tensorflow-cpu, the project's .venv) reads DLFS as it reads a
local directory: for 44_client_tensorflow.sh (and the TFRecord files of
45_client_dali.sh).

  check_client_tensorflow.py make DIR FILES RECORDS SEED
      FILES TFRecord files train-NNNNN-of-NNNNN.tfrecord of RECORDS
      tf.train.Example protos each, written by tf.io.TFRecordWriter; record i
      of the dataset (files in name order) has the features
      example_values(SEED, i); exits 77 if TensorFlow does not import
  check_client_tensorflow.py check --mnt MNT --dataset DS --backend DIR --seed SEED
                                   --world-size W --epochs E,E...
      raw/: tf.data.TFRecordDataset over raw/'s files yields the backend's
      records in order, parsed by tf.io.parse_single_example into the
      features they were written with; tf.data.Dataset.list_files +
      interleave yields every record once; tf.io.gfile (glob, listdir, walk,
      stat, isdir, exists, GFile) sees raw/ as the backend directory.
      epoch views: per epoch, TFRecordDataset over each rank's
      <r>.tfrecord yields the records the rank's <r>.index names, in its
      order, byte for byte, with their features; the ranks together yield
      every record once; two epochs differ in order; gfile.glob finds the W
      views.

The recipe_* functions are what a user writes (docs/clients.md quotes them);
the rest compares what they yield with the backend.
"""
import argparse
import os
import random
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads: no banner on stderr

from checklib import fail  # noqa: E402

EMBEDDING = 4  # floats per record's "embedding" feature


def example_values(seed, i):
    """The features of record i: a pure function of (seed, i), so that every
    checker can tell what a record must hold without reading the backend.
    Some images and tag lists are empty."""
    rng = random.Random(seed * 1_000_003 + i)
    return {
        "id": i,
        "label": rng.randrange(10),
        "image": b"" if i % 13 == 4 else rng.randbytes(rng.randrange(1, 4000)),
        "embedding": [rng.uniform(-1, 1) for _ in range(EMBEDDING)],
        "tags": [rng.randrange(-(2 ** 40), 2 ** 40) for _ in range(i % 4)],
    }


# ---- recipes: what a user writes ----

def recipe_feature_spec():
    """The tf.train.Example schema of the records."""
    import tensorflow as tf
    return {
        "id": tf.io.FixedLenFeature([], tf.int64),
        "label": tf.io.FixedLenFeature([], tf.int64),
        "image": tf.io.FixedLenFeature([], tf.string),
        "embedding": tf.io.FixedLenFeature([EMBEDDING], tf.float32),
        "tags": tf.io.VarLenFeature(tf.int64),
    }


def recipe_tfrecord_dataset(paths):
    """TFRecord files (raw/'s or an epoch view) as parsed tf.train.Examples."""
    import tensorflow as tf
    spec = recipe_feature_spec()
    return tf.data.TFRecordDataset(paths).map(lambda record: tf.io.parse_single_example(record, spec))


def recipe_epoch_view(dataset_dir, epoch, world_size, rank):
    """One rank's shuffled epoch: its .tfrecord view is a TFRecord file."""
    import tensorflow as tf
    return tf.data.TFRecordDataset(f"{dataset_dir}/epochs/{epoch}/{world_size}/{rank}.tfrecord")


def recipe_list_files(pattern):
    """The usual input pipeline over sharded TFRecord files: files in a
    shuffled order, read two at a time."""
    import tensorflow as tf
    files = tf.data.Dataset.list_files(pattern, shuffle=True, seed=7)
    return files.interleave(tf.data.TFRecordDataset, cycle_length=2, num_parallel_calls=2)


# ---- make ----

def to_example(values):
    import tensorflow as tf
    ints = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))  # noqa: E731
    return tf.train.Example(features=tf.train.Features(feature={
        "id": ints([values["id"]]),
        "label": ints([values["label"]]),
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[values["image"]])),
        "embedding": tf.train.Feature(float_list=tf.train.FloatList(value=values["embedding"])),
        "tags": ints(values["tags"]),
    }))


def make(out, files, records, seed):
    """Exits 77 (the scenarios' skip, which says why) when TensorFlow does not import."""
    try:
        import tensorflow as tf
    except ImportError:
        return 77
    files, records, seed = int(files), int(records), int(seed)
    os.makedirs(out, exist_ok=True)
    for f in range(files):
        with tf.io.TFRecordWriter(os.path.join(out, f"train-{f:05d}-of-{files:05d}.tfrecord")) as writer:
            for r in range(records):
                writer.write(to_example(example_values(seed, f * records + r)).SerializeToString())
    print(f"{files} TFRecord files of {records} tf.train.Examples written by tf.io.TFRecordWriter")
    return 0


# ---- check ----

def tfrecord_files(d):
    """The TFRecord files of a dataset directory in canonical (byte-wise) order."""
    return sorted(n for n in os.listdir(d) if n.endswith(".tfrecord"))


def as_values(parsed):
    """A parsed example (tensors) as plain Python values."""
    return {
        "id": int(parsed["id"]),
        "label": int(parsed["label"]),
        "image": parsed["image"].numpy(),
        "embedding": parsed["embedding"].numpy().tolist(),
        "tags": parsed["tags"].values.numpy().tolist(),
    }


def expected(seed, i):
    """example_values(seed, i) as parsing returns them (floats rounded to float32)."""
    import numpy as np
    v = example_values(seed, i)
    v["embedding"] = np.array(v["embedding"], dtype=np.float32).tolist()
    return v


def records_of(dataset):
    return [r.numpy() for r in dataset]


def check_parsed(what, records, ids, seed):
    """Each record parses into the features record ids[k] was written with."""
    import tensorflow as tf
    spec = recipe_feature_spec()
    for k, (record, i) in enumerate(zip(records, ids)):
        got, want = as_values(tf.io.parse_single_example(record, spec)), expected(seed, i)
        if got != want:
            differ = sorted(name for name in want if got[name] != want[name])
            fail(f"{what}: record {k} (sample {i}) parses into other {differ} than it was written with")


def check_raw(raw, backend, source, seed):
    """raw/'s TFRecord files through tf.data: the backend's records in order, parsed the same."""
    import tensorflow as tf
    names = tfrecord_files(backend)
    got = [as_values(p) for p in recipe_tfrecord_dataset([os.path.join(raw, n) for n in names])]
    want = [as_values(p) for p in recipe_tfrecord_dataset([os.path.join(backend, n) for n in names])]
    if got != want:
        fail(f"raw/: {len(got)} parsed examples through the mount, {len(want)} from the backend, or other features")
    if [g["id"] for g in got] != list(range(len(source))) or got != [expected(seed, i) for i in range(len(source))]:
        fail("raw/: the parsed examples are not the ones written, in order")
    if records_of(tf.data.TFRecordDataset([os.path.join(raw, n) for n in names])) != source:
        fail("raw/: TFRecordDataset's records differ from the backend's bytes")
    mixed = records_of(recipe_list_files(os.path.join(raw, "*.tfrecord")))
    if sorted(mixed) != sorted(source):
        fail(f"raw/: list_files + interleave gave {len(mixed)} records, not each of the {len(source)} once")
    print(f"raw/: {len(source)} records in {len(names)} files, byte for byte and parsed as written; "
          "list_files + interleave: each once")


def walked(d):
    """tf.io.gfile.walk(d), relative and sorted."""
    import tensorflow as tf
    return [(os.path.relpath(top, d), sorted(dirs), sorted(files)) for top, dirs, files in tf.io.gfile.walk(d)]


def check_gfile(raw, backend):
    """tf.io.gfile sees raw/ as the backend directory."""
    import tensorflow as tf
    gfile = tf.io.gfile
    for pattern in ("*", "*.tfrecord", "train-0000[1-9]-*"):
        got = sorted(os.path.basename(p) for p in gfile.glob(os.path.join(raw, pattern)))
        want = sorted(os.path.basename(p) for p in gfile.glob(os.path.join(backend, pattern)))
        if got != want or not got:
            fail(f"gfile.glob({pattern!r}) over raw/: {got}, over the backend: {want}")
    names = sorted(gfile.listdir(raw))
    if names != sorted(gfile.listdir(backend)) or not names:
        fail(f"gfile.listdir(raw/): {names}, backend: {sorted(gfile.listdir(backend))}")
    if walked(raw) != walked(backend):
        fail(f"gfile.walk(raw/): {walked(raw)}, backend: {walked(backend)}")
    for n in names:
        got, want = gfile.stat(os.path.join(raw, n)), gfile.stat(os.path.join(backend, n))
        if (got.length, got.is_directory, got.mtime_nsec) != (want.length, want.is_directory, want.mtime_nsec):
            fail(f"gfile.stat(raw/{n}): length {got.length}, mtime {got.mtime_nsec} ns; "
                 f"backend {want.length}, {want.mtime_nsec} ns")
        with gfile.GFile(os.path.join(raw, n), "rb") as f:
            if f.read() != open(os.path.join(backend, n), "rb").read():
                fail(f"gfile.GFile(raw/{n}).read() differs from the backend file")
    if not gfile.isdir(raw) or gfile.exists(os.path.join(raw, "no-such-file")):
        fail("gfile.isdir/exists over raw/")
    print(f"tf.io.gfile: glob, listdir, walk, stat (length, mtime) and GFile over raw/ ({len(names)} entries) "
          "as over the backend")


def check_views(ds_dir, source, seed, world_size, epochs):
    """Every rank's .tfrecord view through tf.data: its .index's records in order."""
    import tensorflow as tf
    from dlfs.index import ViewIndex
    orders = []
    for epoch in epochs:
        views = f"{ds_dir}/epochs/{epoch}/{world_size}"
        found = sorted(os.path.basename(p) for p in tf.io.gfile.glob(f"{views}/*.tfrecord"))
        if found != [f"{r}.tfrecord" for r in range(world_size)]:
            fail(f"epoch {epoch}: gfile.glob finds the views {found}")
        seen = []
        for rank in range(world_size):
            what = f"epoch {epoch} rank {rank} of {world_size}"
            index = ViewIndex(f"{views}/{rank}.index")
            records = records_of(recipe_epoch_view(ds_dir, epoch, world_size, rank))
            if len(records) != len(index):
                fail(f"{what}: {len(records)} records in the .tfrecord view, {len(index)} lines in its .index")
            for k, (record, i) in enumerate(zip(records, index.ids)):
                if record != source[i]:
                    fail(f"{what}: record {k} is not backend record {i}, which the .index names there")
            check_parsed(what, records, index.ids, seed)
            ids = [int(e["id"]) for e in recipe_tfrecord_dataset(f"{views}/{rank}.tfrecord")]
            if ids != index.ids:
                fail(f"{what}: the parsed ids are not the .index's sample ids in order")
            seen += index.ids
        if sorted(seen) != list(range(len(source))):
            fail(f"epoch {epoch}: the ranks yield {len(seen)} records, not each of the {len(source)} once")
        orders.append(seen)
        print(f"epoch {epoch}: {world_size} .tfrecord views, {len(seen)} records in their .index order, "
              "byte for byte, parsed as written; each record once")
    if len(orders) > 1 and orders[0] == orders[1]:
        fail(f"epochs {epochs[0]} and {epochs[1]} have one order: the views are not shuffled per epoch")


def check(a):
    import tensorflow as tf
    names = tfrecord_files(a.backend)
    if not names:
        fail(f"no .tfrecord files in {a.backend}")
    source = records_of(tf.data.TFRecordDataset([os.path.join(a.backend, n) for n in names]))
    ds_dir = os.path.join(a.mnt, a.dataset)
    raw = os.path.join(ds_dir, "raw")
    check_raw(raw, a.backend, source, a.seed)
    check_gfile(raw, a.backend)
    check_views(ds_dir, source, a.seed, a.world_size, [int(e) for e in a.epochs.split(",")])
    print(f"ok: TensorFlow {tf.__version__} reads raw/ and the epoch views as the backend")
    return 0


def main(argv):
    if argv[:1] == ["make"]:
        return make(*argv[1:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["check"])
    ap.add_argument("--mnt", required=True)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--seed", type=int, required=True, help="make's SEED")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--epochs", default="0,1")
    return check(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
