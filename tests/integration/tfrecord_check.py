"""TFRecord helpers for 26_tfrecord.sh, independent of DLFS: files written
and parsed here with python3-crcmod's CRC32C.

  make DIR FILES RECORDS SEED      write FILES TFRecord files (RECORDS each,
                                   random data, some records empty)
  views MNT DS SRC EPOCH W         every rank's .tfrecord view parses (every
                                   CRC checked) and together they hold each
                                   source record exactly once; rank r's
                                   .tar members are its records in order
  corrupt DIR FILE INDEX           flip one data byte of that record; print
                                   the record's byte offset
  expect-eio MNT DS W              reading any rank's .tfrecord view of W
                                   fails with EIO somewhere (never bad bytes)
"""
import errno
import os
import random
import struct
import sys
import tarfile

from tfrecord_frames import frame, parse


def files_of(src):
    """TFRecord files in canonical (byte-wise path) order, indexes left out."""
    names = sorted(n for n in os.listdir(src) if not n.endswith(".idx"))
    return [os.path.join(src, n) for n in names]


def make(d, files, records, seed):
    rng = random.Random(seed)
    os.makedirs(d, exist_ok=True)
    for f in range(files):
        with open(os.path.join(d, f"train-{f:05d}-of-{files:05d}"), "wb") as out:
            for i in range(records):
                n = 0 if i % 17 == 5 else rng.randrange(1, 6000)
                out.write(frame(rng.randbytes(n)))


def views(mnt, ds, src, epoch, w):
    source = [r for p in files_of(src) for r in parse(open(p, "rb").read(), p)]
    seen = []
    for r in range(w):
        base = f"{mnt}/{ds}/epochs/{epoch}/{w}/{r}"
        records = parse(open(base + ".tfrecord", "rb").read(), base + ".tfrecord")
        with tarfile.open(base + ".tar") as t:
            members = [t.extractfile(m).read() for m in t.getmembers()]
        if members != records:
            sys.exit(f"{base}: the .tar members are not the .tfrecord records in the same order")
        seen += records
    if sorted(seen) != sorted(source):
        sys.exit(f"epoch {epoch} W {w}: {len(seen)} records served, {len(source)} in the source, "
                 "not each exactly once")
    print(f"epoch {epoch} W {w}: {len(seen)} records, each source record once, every CRC right")


def corrupt(d, name, index):
    path = os.path.join(d, name)
    blob = bytearray(open(path, "rb").read())
    at = 0
    for _ in range(index):
        at += 16 + struct.unpack_from("<Q", blob, at)[0]
    length = struct.unpack_from("<Q", blob, at)[0]
    if length == 0:
        sys.exit(f"record {index} of {path} is empty: pick another")
    blob[at + 12 + length // 2] ^= 0x40
    open(path, "wb").write(blob)
    print(at)


def expect_eio(mnt, ds, w):
    failed = 0
    for r in range(w):
        path = f"{mnt}/{ds}/epochs/0/{w}/{r}.tfrecord"
        try:
            parse(open(path, "rb").read(), path)
        except OSError as e:
            if e.errno != errno.EIO:
                sys.exit(f"{path}: {e} (want EIO)")
            failed += 1
    if failed != 1:
        sys.exit(f"{failed} of {w} ranks failed to read; the damaged record is in exactly one")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "make":
        make(args[0], int(args[1]), int(args[2]), int(args[3]))
    elif cmd == "views":
        views(args[0], args[1], args[2], int(args[3]), int(args[4]))
    elif cmd == "corrupt":
        corrupt(args[0], args[1], int(args[2]))
    elif cmd == "expect-eio":
        expect_eio(args[0], args[1], int(args[2]))
    else:
        sys.exit(__doc__)
