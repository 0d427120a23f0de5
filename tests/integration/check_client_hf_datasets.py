#!/usr/bin/env python3
"""Hugging Face datasets (4.8.5) and pyarrow (23), unchanged, read Parquet and
Arrow files through a DLFS raw/ tree (issue 33).

  check_client_hf_datasets.py make DIR
      DIR/parquet/train-0000{0,1,2}-of-00003.parquet (pyarrow; snappy, zstd
      and uncompressed; row groups of 25 rows; ints, non-ASCII strings,
      floats, float32 lists, binary blobs, nulls) and DIR/arrow_ds/
      (Dataset.save_to_disk in 3 shards: Arrow IPC streams, state.json,
      dataset_info.json; a ClassLabel column).
  check_client_hf_datasets.py check --backend DIR --raw MNT/NAME/raw [--raw ...] --cache DIR
      Runs as the unprivileged user, offline (HF_HUB_OFFLINE=1). For each
      mounted raw/, against what pyarrow and datasets read from the backend:
      - datasets.load_dataset("parquet", data_files=<raw>/parquet/*.parquet),
        load_dataset(<raw>/parquet) (the builder inferred from the files
        listed) and Dataset.from_parquet: every row, in order; all convert the
        files into Arrow files in the cache (under --cache), which the
        dataset then maps: the mount is read once, at the conversion;
      - Dataset.load_from_disk(<raw>/arrow_ds): memory-maps the .arrow
        files straight from the mount (its cache_files and /proc/self/maps
        name them): every row, rows at random, the features;
      - pyarrow.parquet.read_table of each file, and row groups at random
        through ParquetFile; pyarrow.memory_map + ipc.open_stream of each
        .arrow file: tables equal to the backend's.
"""
import argparse
import os
import random
import sys

from checklib import fail

FILES, ROWS_PER_FILE, ROW_GROUP = 3, 120, 25
ARROW_ROWS, ARROW_SHARDS = 300, 3
LABELS = ["negative", "neutral", "positive"]
CAFE = "caf\u00e9 "


# --- The recipe (docs/clients.md quotes it) ---------------------------------------------------

def recipe_hf_datasets(raw_dir, cache_dir):
    """Parquet files through DLFS's raw/ into a Hugging Face dataset (converted into Arrow
    files under cache_dir), and a dataset saved with save_to_disk memory-mapped from raw/."""
    import datasets
    table = datasets.load_dataset("parquet", data_files={"train": f"{raw_dir}/parquet/*.parquet"},
                                  split="train", cache_dir=cache_dir)
    saved = datasets.Dataset.load_from_disk(f"{raw_dir}/arrow_ds")
    return table, saved


# --- Making the backend -----------------------------------------------------------------------

def columns(rng, n, first):
    """A table's columns: n rows, ids from first."""
    return {
        "id": list(range(first, first + n)),
        "text": [f"sample {i}: {CAFE * rng.randint(0, 3)}\u6570\u636e {rng.random():.6f}" for i in range(n)],
        "label": [rng.randrange(len(LABELS)) for _ in range(n)],
        "score": [rng.uniform(-1e3, 1e3) for _ in range(n)],
        "emb": [[rng.uniform(-1, 1) for _ in range(8)] for _ in range(n)],
        "blob": [rng.randbytes(rng.randint(0, 2000)) for _ in range(n)],
        "note": [None if rng.random() < 0.2 else f"note {rng.randint(0, 99)}" for _ in range(n)],
    }


def make(out):
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq
    datasets.disable_progress_bars()
    rng = random.Random(43)
    os.makedirs(os.path.join(out, "parquet"))
    schema = pa.schema([("id", pa.int64()), ("text", pa.string()), ("label", pa.int32()), ("score", pa.float64()),
                        ("emb", pa.list_(pa.float32())), ("blob", pa.binary()), ("note", pa.string())])
    for f, codec in enumerate(["snappy", "zstd", "none"]):
        table = pa.table(columns(rng, ROWS_PER_FILE, f * ROWS_PER_FILE), schema=schema)
        pq.write_table(table, os.path.join(out, "parquet", f"train-{f:05d}-of-{FILES:05d}.parquet"),
                       row_group_size=ROW_GROUP, compression=codec)
    features = datasets.Features({
        "id": datasets.Value("int64"), "text": datasets.Value("string"),
        "label": datasets.ClassLabel(names=LABELS), "score": datasets.Value("float64"),
        "emb": datasets.Sequence(datasets.Value("float32")), "blob": datasets.Value("binary"),
        "note": datasets.Value("string")})
    ds = datasets.Dataset.from_dict(columns(rng, ARROW_ROWS, 10000), features=features)
    ds.save_to_disk(os.path.join(out, "arrow_ds"), num_shards=ARROW_SHARDS)
    return 0


# --- Checks -----------------------------------------------------------------------------------

def parquet_files(root):
    d = os.path.join(root, "parquet")
    return [os.path.join(d, n) for n in sorted(os.listdir(d)) if n.endswith(".parquet")]


def arrow_files(root):
    d = os.path.join(root, "arrow_ds")
    return [os.path.join(d, n) for n in sorted(os.listdir(d)) if n.endswith(".arrow")]


def mapped_paths():
    """The files this process has memory-mapped (/proc/self/maps)."""
    with open("/proc/self/maps") as f:
        return {line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6}


def same_rows(where, got, want):
    """got: a datasets.Dataset; want: a list of row dicts."""
    if len(got) != len(want):
        fail(f"{where}: {len(got)} rows, the backend has {len(want)}")
    for i, row in enumerate(got):
        if row != want[i]:
            cols = sorted(k for k in want[i] if row.get(k) != want[i][k])
            fail(f"{where}: row {i} (id {want[i]['id']}) differs from the backend's in {cols}")


def check_parquet_hf(where, table, raw, cache, want):
    """load_dataset("parquet") (table) and Dataset.from_parquet: rows as the backend's, Arrow in the cache."""
    import datasets
    same_rows(where + ": load_dataset('parquet')", table, want)
    by_dir = datasets.load_dataset(os.path.join(raw, "parquet"), split="train", cache_dir=cache)
    same_rows(where + ": load_dataset(<raw>/parquet)", by_dir, want)
    direct = datasets.Dataset.from_parquet(parquet_files(raw), cache_dir=cache)
    same_rows(where + ": Dataset.from_parquet", direct, want)
    for ds, what in ((table, "load_dataset"), (by_dir, "load_dataset(dir)"), (direct, "from_parquet")):
        files = [c["filename"] for c in ds.cache_files]
        if not files or not all(f.startswith(cache + os.sep) for f in files):
            fail(f"{where}: {what}'s dataset maps {files}, want Arrow files converted into {cache}")
    return len(table)


def check_load_from_disk(where, ds, raw, backend):
    """Dataset.load_from_disk (ds) memory-maps the mount's .arrow files: rows, random rows, features."""
    import datasets
    ref = datasets.Dataset.load_from_disk(os.path.join(backend, "arrow_ds"))
    files = sorted(c["filename"] for c in ds.cache_files)
    if files != arrow_files(raw):
        fail(f"{where}: load_from_disk's dataset maps {files}, want the mount's {arrow_files(raw)}")
    mapped = mapped_paths()
    if not all(f in mapped for f in files):
        fail(f"{where}: the mount's .arrow files are not in /proc/self/maps ({[f for f in files if f not in mapped]})")
    if ds.features != ref.features:
        fail(f"{where}: load_from_disk features {ds.features}, the backend's {ref.features}")
    same_rows(where + ": load_from_disk", ds, ref.to_list())
    rng = random.Random(7)
    for i in rng.sample(range(len(ref)), 40):
        if ds[i] != ref[i]:
            fail(f"{where}: load_from_disk row {i} (random access) differs from the backend's")
    if ds.features["label"].int2str(ds[0]["label"]) not in LABELS:
        fail(f"{where}: the ClassLabel does not name row 0's label")
    return len(ds)


def check_pyarrow(where, raw, backend):
    """pyarrow on the mount's files: whole tables, random row groups, memory-mapped IPC streams."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    rng = random.Random(11)
    for path, ref_path in zip(parquet_files(raw), parquet_files(backend)):
        if not pq.read_table(path).equals(pq.read_table(ref_path)):
            fail(f"{where}: pyarrow.parquet.read_table({path}) differs from the backend file's table")
        pf, ref = pq.ParquetFile(path), pq.ParquetFile(ref_path)
        if pf.metadata.num_row_groups != ref.metadata.num_row_groups or pf.metadata.num_row_groups < 2:
            fail(f"{where}: {path}: {pf.metadata.num_row_groups} row groups, the backend's {ref.metadata.num_row_groups}")
        for g in rng.sample(range(ref.metadata.num_row_groups), 3):
            if not pf.read_row_group(g).equals(ref.read_row_group(g)):
                fail(f"{where}: {path}: row group {g} differs from the backend's")
    for path, ref_path in zip(arrow_files(raw), arrow_files(backend)):
        with pa.memory_map(path) as m, pa.memory_map(ref_path) as r:
            if not pa.ipc.open_stream(m).read_all().equals(pa.ipc.open_stream(r).read_all()):
                fail(f"{where}: pyarrow.memory_map({path}) reads another table than the backend file")


def check(a):
    import datasets
    datasets.disable_progress_bars()
    if not datasets.config.HF_HUB_OFFLINE:
        fail("HF_HUB_OFFLINE is not on: the check must not reach the network")
    if len(parquet_files(a.backend)) != FILES or len(arrow_files(a.backend)) != ARROW_SHARDS:
        fail(f"the backend lacks its {FILES} Parquet files or {ARROW_SHARDS} Arrow files")
    import pyarrow as pa
    import pyarrow.parquet as pq
    want = pa.concat_tables(pq.read_table(p) for p in parquet_files(a.backend)).to_pylist()
    print(f"backend: {len(want)} Parquet rows, {ARROW_ROWS} rows saved with save_to_disk; read as uid {os.getuid()} "
          f"with datasets {datasets.__version__}, pyarrow {pa.__version__}")
    for k, raw in enumerate(a.raw):
        cache = os.path.join(a.cache, f"mount{k}")
        table, saved = recipe_hf_datasets(raw, cache)
        n = check_parquet_hf(raw, table, raw, cache, want)
        m = check_load_from_disk(raw, saved, raw, a.backend)
        check_pyarrow(raw, raw, a.backend)
        print(f"  {raw}: load_dataset('parquet'), load_dataset(dir) and from_parquet {n} rows (Arrow in the cache), load_from_disk "
              f"{m} rows memory-mapped from the mount, pyarrow tables, row groups and memory maps: the backend's")
    return 0


def main():
    if sys.argv[1] == "make":
        return make(sys.argv[2])
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["check"])
    ap.add_argument("--backend", required=True)
    ap.add_argument("--raw", action="append", required=True, help="the dataset's raw/ in a mount")
    ap.add_argument("--cache", required=True, help="a writable directory for the datasets cache")
    return check(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
