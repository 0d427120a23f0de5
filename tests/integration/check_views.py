#!/usr/bin/env python3
"""Checks the epoch views of a mounted dataset against its backend directory.

Used by the integration scenarios (11_epoch_views.sh, 12_rounds.sh):

  check_views.py MNT DATASET BACKEND --format files|fixed|lmdb [--record-size R --header-bytes H]
                 --epochs 0,1 --world-sizes 1,3 --remainder pad|drop [--threads 8] [--tar-tool]

For every (epoch, W) it asserts: every rank's .index lists the view's samples;
across the ranks every sample appears exactly once (drop: the remainder is
left out; pad: wrapped duplicates only); the .tar holds exactly those members
in that order with the backend's bytes (Python's tarfile, and GNU tar when
--tar-tool); the .bin (fixed, or lmdb with one value size) is the records in index order;
for lmdb the backend's bytes are the values python3-lmdb returns in key order; the directory
view lists the same samples in name order; seeks to sample k return sample k;
many threads reading at random offsets get the right bytes. Prints one line
per view family and exits non-zero on the first mismatch.
"""
import argparse
import hashlib
import os
import random
import subprocess
import tarfile
import tempfile
import threading

from checklib import fail


class Backend:
    def __init__(self, root, fmt, record_size, header):
        self.root, self.fmt, self.rec, self.header = root, fmt, record_size, header
        self.cache = {}
        self.values = None
        if fmt == "lmdb":
            import lmdb  # python3-lmdb: the reference reader
            env = lmdb.open(root, readonly=True, lock=False, subdir=True)
            with env.begin() as txn:
                self.values = [bytes(v) for _, v in txn.cursor()]
            env.close()
            sizes = {len(v) for v in self.values}
            self.rec = sizes.pop() if len(sizes) == 1 else 0

    def sample(self, name):
        """Bytes of the sample called `name` in the view (tar member name)."""
        if name in self.cache:
            return self.cache[name]
        if self.fmt == "files":
            with open(os.path.join(self.root, name), "rb") as f:
                data = f.read()
        elif self.fmt == "lmdb":  # "data.mdb/00000042.bin": the value of key rank 42
            data = self.values[int(name.rsplit("/", 1)[1].split(".")[0])]
        else:
            path, rec = name.rsplit("/", 1)
            k = int(rec.split(".")[0])
            with open(os.path.join(self.root, path), "rb") as f:
                f.seek(self.header + k * self.rec)
                data = f.read(self.rec)
        self.cache[name] = data
        return data


def read_index(path):
    with open(path) as f:
        head = f.readline()
        if not head.startswith("# dlfs view "):
            fail(f"{path}: first line is not the view header: {head!r}")
        meta = dict(kv.split("=", 1) for kv in head[len("# dlfs view "):].split())
        rows = []
        for line in f:
            k, sid, off, length, name = line.rstrip("\n").split("\t")
            rows.append((int(k), int(sid), int(off), int(length), name))
    if [r[0] for r in rows] != list(range(len(rows))):
        fail(f"{path}: positions are not 0..n-1")
    if int(meta["samples"]) != len(rows):
        fail(f"{path}: header says {meta['samples']} samples, {len(rows)} lines")
    return meta, rows


def check_tar(view, rows, backend, use_tar_tool):
    with tarfile.open(view + ".tar") as t:
        members = t.getmembers()
        if [m.name for m in members] != [r[4] for r in rows]:
            fail(f"{view}.tar: member names differ from the index")
        for m, r in zip(members, rows):
            if m.offset_data != r[2] or m.size != r[3]:
                fail(f"{view}.tar: member {m.name} at {m.offset_data}+{m.size}, index says {r[2]}+{r[3]}")
            if t.extractfile(m).read() != backend.sample(m.name):
                fail(f"{view}.tar: member {m.name} bytes differ from the backend")
    if use_tar_tool:
        listed = subprocess.run(["tar", "-tf", view + ".tar"], check=True, capture_output=True, text=True).stdout
        if listed.splitlines() != [r[4] for r in rows]:
            fail(f"{view}.tar: GNU tar lists other members")
        with tempfile.TemporaryDirectory() as d:
            subprocess.run(["tar", "-xf", view + ".tar", "-C", d], check=True)
            for r in rows[:: max(1, len(rows) // 200)]:
                with open(os.path.join(d, r[4]), "rb") as f:
                    if f.read() != backend.sample(r[4]):
                        fail(f"{view}.tar: GNU tar extracted {r[4]} with other bytes")


def check_seeks(view, rows, backend, rng):
    with open(view + ".tar", "rb") as f:
        for r in rng.sample(rows, min(50, len(rows))):
            f.seek(r[2])
            if f.read(r[3]) != backend.sample(r[4]):
                fail(f"{view}.tar: seek to sample {r[0]} returned other bytes")


def check_bin(view, rows, backend):
    rec = backend.rec
    size = os.path.getsize(view + ".bin")
    if size != rec * len(rows):
        fail(f"{view}.bin: size {size}, expected {rec * len(rows)}")
    with open(view + ".bin", "rb") as f:
        for r in rows:
            if f.read(rec) != backend.sample(r[4]):
                fail(f"{view}.bin: record {r[0]} differs from the backend")


def check_dir(view, rows, backend):
    names = sorted(os.listdir(view))
    if len(names) != len(rows):
        fail(f"{view}/: {len(names)} entries, expected {len(rows)}")
    for n, r in zip(names, rows):
        original = n.split("-", 1)[1].replace("%2F", "/").replace("%25", "%")
        if original != r[4]:
            fail(f"{view}/{n}: does not name sample {r[4]}")
    for n, r in list(zip(names, rows))[:: max(1, len(rows) // 100)]:
        with open(os.path.join(view, n), "rb") as f:
            if f.read() != backend.sample(r[4]):
                fail(f"{view}/{n}: bytes differ from the backend")


def expected_tar_bytes(rows, backend, offset, size):
    """The tar stream's data bytes we can predict: only sample bytes are compared."""
    out = []
    for r in rows:
        lo, hi = max(offset, r[2]), min(offset + size, r[2] + r[3])
        if lo < hi:
            out.append((lo - offset, backend.sample(r[4])[lo - r[2]:hi - r[2]]))
    return out


def check_threads(views, backend, threads, seed):
    errors = []

    def worker(i):
        rng = random.Random(seed + i)
        view, rows = views[i % len(views)]
        size = os.path.getsize(view + ".tar")
        fd = os.open(view + ".tar", os.O_RDONLY)
        try:
            for _ in range(60):
                off = rng.randrange(0, size)
                n = rng.choice([1, 511, 4096, 65536, 1 << 20])
                got = os.pread(fd, n, off)
                for rel, want in expected_tar_bytes(rows, backend, off, len(got)):
                    if got[rel:rel + len(want)] != want:
                        errors.append(f"{view}.tar: pread({n}, {off}) returned other sample bytes")
                        return
        finally:
            os.close(fd)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        fail(errors[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mnt")
    ap.add_argument("dataset")
    ap.add_argument("backend")
    ap.add_argument("--format", choices=["files", "fixed", "lmdb"], default="files")
    ap.add_argument("--record-size", type=int, default=0)
    ap.add_argument("--header-bytes", type=int, default=0)
    ap.add_argument("--samples", type=int, required=True, help="N, the dataset's sample count")
    ap.add_argument("--epochs", default="0,1")
    ap.add_argument("--world-sizes", default="1,3")
    ap.add_argument("--remainder", choices=["pad", "drop"], default="pad")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--tar-tool", action="store_true", help="also check with GNU tar -t / -x")
    ap.add_argument("--digest", help="write a digest of every index read to this file (determinism checks)")
    a = ap.parse_args()
    backend = Backend(a.backend, a.format, a.record_size, a.header_bytes)
    rng = random.Random(1)
    digest = hashlib.sha256()
    n = a.samples
    for e in [int(x) for x in a.epochs.split(",")]:
        for w in [int(x) for x in a.world_sizes.split(",")]:
            base = os.path.join(a.mnt, a.dataset, "epochs", str(e), str(w))
            seen, views = [], []
            per_rank = (n // w) if a.remainder == "drop" else -(-n // w)
            for r in range(w):
                view = os.path.join(base, str(r))
                meta, rows = read_index(view + ".index")
                with open(view + ".index", "rb") as f:
                    digest.update(f.read())
                if len(rows) != per_rank:
                    fail(f"{view}: {len(rows)} samples, expected {per_rank} ({a.remainder})")
                if os.getxattr(view + ".tar", "user.dlfs.samples").decode() != str(per_rank):
                    fail(f"{view}.tar: xattr user.dlfs.samples is wrong")
                seen += [row[1] for row in rows]
                check_tar(view, rows, backend, a.tar_tool and r == 0)
                check_seeks(view, rows, backend, rng)
                if a.format == "fixed" or (a.format == "lmdb" and backend.rec):
                    check_bin(view, rows, backend)
                elif os.path.exists(view + ".bin"):
                    fail(f"{view}.bin: exists, but the samples are not all one size")
                if r == 0:
                    check_dir(view, rows, backend)
                views.append((view, rows))
            distinct = set(seen)
            if a.remainder == "drop":
                if len(distinct) != len(seen) or len(seen) != n - n % w:
                    fail(f"epoch {e} W={w}: drop should serve {n - n % w} distinct samples, got "
                         f"{len(distinct)} distinct of {len(seen)}")
            else:
                if distinct != set(range(n)):
                    fail(f"epoch {e} W={w}: {n - len(distinct)} samples never served")
                if len(seen) - n != (-n) % w:
                    fail(f"epoch {e} W={w}: {len(seen) - n} duplicates, padding is {(-n) % w}")
            check_threads(views, backend, a.threads, e * 100 + w)
            print(f"epoch {e} W={w}: {len(seen)} samples over {w} ranks ok ({a.remainder})")
    if a.digest:
        with open(a.digest, "w") as f:
            f.write(digest.hexdigest() + "\n")


if __name__ == "__main__":
    main()
