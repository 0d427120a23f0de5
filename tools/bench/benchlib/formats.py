"""The peers' storage formats for loaders_bench.py, written once from a files
dataset (tools/gen_dataset.py files) next to it in the data directory.

The storage order is the files' sorted relative paths (what a directory
listing gives, and DALI's file reader reads); sample i of that order has id i,
and every format carries it: tar shards by member name (the file's relative
path, so a WebDataset key is the path without its extension, as in a DLFS
view), MDS and FFCV in an int column `id`, TFRecord in an int64 feature `id`,
DALI's file list as the label. Every sharded format holds `shard_size`
samples per shard in storage order, so shard k holds ids k*S .. (k+1)*S - 1
in all of them.

  tar shards  shard-000000.tar ...: ustar members, mtime 0, mode 0444 (WebDataset)
  mds         one MDSWriter per shard (columns id: int, data: bytes, no
              compression) into s000000/ ..., their index.json merged in shard
              order by streaming's merge_index (Mosaic Streaming)
  tfrecord    shard-000000.tfrecord ...: tf.train.Example {data: bytes, id:
              int64}, framed with masked CRC-32C (the crc32c or google_crc32c
              module), and <file>.idx ("<offset> <size>" per record: DALI's
              tfrecord2idx format, what `dlfs-ctl tfrecord index` writes)
  ffcv        one .beton (fields data: BytesField, id: IntField), FFCV's DatasetWriter
  file list   "<relative path> <id>" per line (DALI's fn.readers.file file_list)

Each writer is run in the Python that has its library (loaders_peer.py
convert) and returns nothing; the caller marks a finished format complete."""
import io
import os
import struct
import tarfile

SHARD_NAME = "shard-{:06d}"


def sample_names(root):
    """The files under `root` as sorted relative paths: the storage order."""
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def read(root, name):
    with open(os.path.join(root, name), "rb") as f:
        return f.read()


def shards(names, shard_size):
    """(shard number, first id, names) of each shard of `shard_size` samples."""
    for k, first in enumerate(range(0, len(names), shard_size)):
        yield k, first, names[first:first + shard_size]


def write_file_list(_root, names, path, _shard_size):
    with open(path + ".tmp", "w") as f:
        for i, name in enumerate(names):
            if " " in name:
                raise ValueError(f"{name}: DALI's file_list cannot hold a path with a space")
            f.write(f"{name} {i}\n")
    os.replace(path + ".tmp", path)


def write_tar_shards(root, names, out, shard_size):
    os.makedirs(out, exist_ok=True)
    for k, _first, part in shards(names, shard_size):
        with tarfile.open(os.path.join(out, SHARD_NAME.format(k) + ".tar"), "w", format=tarfile.USTAR_FORMAT) as t:
            for name in part:
                data = read(root, name)
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = len(data), 0, 0o444
                t.addfile(info, io.BytesIO(data))


def write_mds(root, names, out, shard_size):
    from streaming import MDSWriter
    from streaming.base.util import merge_index

    os.makedirs(out, exist_ok=True)
    indexes = []
    for k, first, part in shards(names, shard_size):
        sub = os.path.join(out, f"s{k:06d}")
        # no size limit: a shard is exactly the samples given to its writer
        with MDSWriter(out=sub, columns={"id": "int", "data": "bytes"}, compression=None, size_limit=None) as w:
            for i, name in enumerate(part, first):
                w.write({"id": i, "data": read(root, name)})
        indexes.append(os.path.join(sub, "index.json"))
    merge_index(indexes, out, keep_local=True)


def _crc32c():
    try:
        import crc32c
        return crc32c.crc32c
    except ImportError:
        pass
    try:
        import google_crc32c
        return google_crc32c.value
    except ImportError:
        raise SystemExit("TFRecord needs a CRC-32C module: pip install crc32c (tools/requirements.txt has it)")


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(number, payload):
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def example(data, sample_id):
    """tf.train.Example {features: {data: bytes_list [data], id: int64_list [id]}}, serialized."""
    feature_data = _field(1, _field(1, data))  # Feature.bytes_list = BytesList{value}
    feature_id = _field(3, _field(1, _varint(sample_id)))  # Feature.int64_list = Int64List{packed value}
    features = b"".join(_field(1, _field(1, key) + _field(2, feat))  # map<string, Feature> entries
                        for key, feat in ((b"data", feature_data), (b"id", feature_id)))
    return _field(1, features)  # Example.features


def _masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def write_tfrecords(root, names, out, shard_size):
    crc = _crc32c()
    os.makedirs(out, exist_ok=True)
    for k, first, part in shards(names, shard_size):
        path = os.path.join(out, SHARD_NAME.format(k) + ".tfrecord")
        at = 0
        with open(path, "wb") as f, open(path + ".idx", "w") as idx:
            for i, name in enumerate(part, first):
                rec = example(read(root, name), i)
                length = struct.pack("<Q", len(rec))
                frame = length + struct.pack("<I", _masked(crc(length))) + rec + struct.pack("<I", _masked(crc(rec)))
                f.write(frame)
                idx.write(f"{at} {len(frame)}\n")
                at += len(frame)


def write_ffcv(root, names, out, _shard_size):
    import numpy
    from ffcv.fields import BytesField, IntField
    from ffcv.writer import DatasetWriter

    class Samples:
        def __len__(self):
            return len(names)

        def __getitem__(self, i):
            return numpy.frombuffer(read(root, names[i]), numpy.uint8), i

    DatasetWriter(out, {"data": BytesField(), "id": IntField()}, num_workers=2).from_indexed_dataset(Samples())


WRITERS = {"tar": write_tar_shards, "mds": write_mds, "tfrecord": write_tfrecords, "ffcv": write_ffcv,
           "filelist": write_file_list}
