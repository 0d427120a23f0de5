#!/usr/bin/env python3
"""Makes and checks the dataset of 19_faulty_backend.sh, whose daemon reads
its backend through tests/tools/faulty_backend.cc: files named bad_* fail
every pread with EIO, short_* come back in short reads, slow_* are slow.

  check_faulty_backend.py make BACKEND
      files of 1..160 KiB in three directories: bad_*, short_*, slow_*, ok_*
  check_faulty_backend.py check MNT DATASET BACKEND
      raw/: every bad_* file fails with EIO (never zeros, never a short file),
      every other file has the backend's bytes; the epoch view epochs/0/1/0:
      each member read at its .index offset is EIO for bad_*, the backend's
      bytes otherwise (EIO allowed only in a page shared with a bad_*
      member: the kernel reads views in pages), and a sequential read of the whole .tar fails with EIO
      rather than returning a stream with holes; a good file read again at
      the end (the daemon still serves).
"""
import argparse
import errno
import os
import random

from checklib import fail


def make(backend):
    rng = random.Random(19)
    kinds = ["bad"] * 3 + ["short"] * 5 + ["slow"] * 3 + ["ok"] * 49
    rng.shuffle(kinds)
    for i, kind in enumerate(kinds):
        d = os.path.join(backend, f"d{i % 3}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"{kind}_{i:02d}"), "wb") as f:
            f.write(rng.randbytes(rng.randint(1, 160) * 1024 - rng.randint(0, 1000)))


def is_bad(rel):
    return os.path.basename(rel).startswith("bad_")


def backend_files(backend):
    for root, _, names in os.walk(backend):
        for n in names:
            yield os.path.relpath(os.path.join(root, n), backend)


def expect_eio(what, read):
    try:
        data = read()
    except OSError as e:
        if e.errno != errno.EIO:
            fail(f"{what}: {os.strerror(e.errno)}, expected EIO")
        return
    fail(f"{what}: read {len(data)} bytes from a file whose backend fails, expected EIO")


def check_raw(raw, backend):
    bad = good = 0
    for rel in sorted(backend_files(backend)):
        want = open(os.path.join(backend, rel), "rb").read()
        path = os.path.join(raw, rel)
        if is_bad(rel):
            expect_eio(f"raw/{rel}", lambda: open(path, "rb").read())
            bad += 1
        elif open(path, "rb").read() != want:
            fail(f"raw/{rel}: bytes differ from the backend")
        else:
            good += 1
    return bad, good


def read_index(path):
    with open(path) as f:
        f.readline()
        return [line.rstrip("\n").split("\t") for line in f]


PAGE = 4096


def check_member(fd, name, off, length, want, bad_ranges):
    """Reads a good member page by page. The kernel reads a view in whole
    pages, so a page that also holds bytes of a failing member fails as a
    whole (a short FUSE reply would shrink the file): there EIO is allowed,
    the right bytes too; everywhere else only the right bytes are."""
    pos, end = off, off + length
    while pos < end:
        page = pos // PAGE * PAGE
        stop = min(end, page + PAGE)
        try:
            got = os.pread(fd, stop - pos, pos)
        except OSError as e:
            shared = any(a < page + PAGE and b > page for a, b in bad_ranges)
            if e.errno != errno.EIO or not shared:
                fail(f"member {name}: {os.strerror(e.errno)} at offset {pos} of a page with no failing bytes")
            got = None
        if got is not None and got != want[pos - off:stop - off]:
            fail(f"member {name}: wrong bytes at view offset {pos} (never allowed)")
        pos = stop


def check_view(view, backend):
    rows = [(int(off), int(length), name) for _, _, off, length, name in read_index(view + ".index")]
    bad_ranges = [(off, off + length) for off, length, name in rows if is_bad(name)]
    bad = good = 0
    fd = os.open(view + ".tar", os.O_RDONLY)
    try:
        for off, length, name in rows:
            if is_bad(name):
                expect_eio(f"{view}.tar member {name}", lambda: os.pread(fd, length, off))
                bad += 1
            else:
                check_member(fd, name, off, length, open(os.path.join(backend, name), "rb").read(), bad_ranges)
                good += 1
    finally:
        os.close(fd)

    def whole():
        with open(view + ".tar", "rb", buffering=0) as f:
            return b"".join(iter(lambda: f.read(1 << 20), b""))
    expect_eio(f"{view}.tar read whole", whole)
    return bad, good


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("backend")
    c = sub.add_parser("check")
    c.add_argument("mnt")
    c.add_argument("dataset")
    c.add_argument("backend")
    a = ap.parse_args()
    if a.cmd == "make":
        make(a.backend)
        return
    ds = os.path.join(a.mnt, a.dataset)
    bad, good = check_raw(os.path.join(ds, "raw"), a.backend)
    vbad, vgood = check_view(os.path.join(ds, "epochs/0/1/0"), a.backend)
    if bad != 3 or vbad != 3 or good != 57 or vgood != 57:
        fail(f"expected 3 failing and 57 good files in raw/ and the view, saw {bad}/{good} and {vbad}/{vgood}")
    ok = next(r for r in sorted(backend_files(a.backend)) if not is_bad(r))
    if open(os.path.join(ds, "raw", ok), "rb").read() != open(os.path.join(a.backend, ok), "rb").read():
        fail(f"raw/{ok}: wrong bytes after the faults")
    print(f"raw/: {bad} EIO, {good} correct; view: {vbad} EIO, {vgood} correct; whole .tar read: EIO")


if __name__ == "__main__":
    main()
