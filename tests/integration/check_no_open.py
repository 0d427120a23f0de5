#!/usr/bin/python3
"""Checks for 30_no_open_round_trips.sh, against a mounted dlfsd.

  --part plain          the kernel skips OPEN/RELEASE/FLUSH (stats say so, and
                        count none after the first); a third pass over raw/
                        with dlfs.read_file costs no request and returns the
                        backend's bytes; Python's open() costs exactly one
                        request per file, the isatty() ioctl, counted;
                        /.dlfs/stats is fresh at every open with its exact size
                        on the open file; generated files do not pile up;
                        .index and .tar sizes from stat equal their bytes
  --part push --pushed yes|no
                        the first open().read() of each raw file: its isatty()
                        ioctl makes dlfsd push the file into the page cache
                        (yes: no READ follows, the stats count every file
                        pushed) or not (no: raw_push_size 0 or smaller than the
                        files: one READ each, nothing pushed); the bytes are
                        the backend's either way
  --part opportunistic  every open of an opportunistic .tar is a stream of its
                        own (its own inode), complete: each sample exactly once,
                        with the backend's bytes
"""
import argparse
import io
import json
import os
import random
import tarfile
import time

from checklib import add_daemon_args, backend_files, daemon_stats, fail, read, spent_between
from dlfs import read_file


def fuse_stats(a):
    return daemon_stats(a)["fuse"]


def check_plain(a):
    names = backend_files(a.backend)
    raw = os.path.join(a.mnt, "ds/raw")
    rng = random.Random(30)
    for _ in range(2):
        rng.shuffle(names)
        for n in names:
            if read(os.path.join(raw, n)) != read(os.path.join(a.backend, n)):
                fail(f"raw/{n} differs from the backend")
    f = fuse_stats(a)
    if not f["kernel_skips_open"]:
        fail(f"this kernel offers FUSE no-open, but the daemon did not take it: {f}")
    req = f["requests"]
    # The first OPEN and the first FLUSH are answered ENOSYS: none follow.
    if req["open"] > 1 or req["release"] != 0 or req["flush"] > 1:
        fail(f"the kernel still sends OPEN/RELEASE/FLUSH (at most the first of each expected): {req}")

    # The third pass over raw/ is served by the kernel's caches alone, when
    # the reader makes no ioctl (dlfs.read_file: os.open, os.read).
    before = fuse_stats(a)["requests"]
    rng.shuffle(names)
    for n in names:
        if read_file(os.path.join(raw, n)) != read(os.path.join(a.backend, n)):
            fail(f"dlfs.read_file(raw/{n}) differs from the backend")
    after = fuse_stats(a)["requests"]
    spent = spent_between(before, after)
    if spent:
        fail(f"reading {len(names)} cached raw files again cost FUSE requests: {spent}")
    print(f"raw/: {len(names)} files read again with no FUSE request; requests so far {after}")

    # Python's open() (default buffering) asks isatty(): the kernel forwards
    # that ioctl (TCGETS) to the daemon, one per open, and nothing else.
    before = fuse_stats(a)["requests"]
    for n in names:
        read(os.path.join(raw, n))
    after = fuse_stats(a)["requests"]
    spent = spent_between(before, after)
    if spent != {"ioctl": len(names)}:
        fail(f"open().read() of {len(names)} cached raw files: requests {spent}, want exactly one ioctl each")
    with open(os.path.join(raw, names[0]), "rb") as fh:
        if fh.isatty():
            fail("a raw file says it is a terminal")
    print(f"raw/: open().read() of {len(names)} cached files cost one ioctl each (isatty), nothing else")

    # /.dlfs/stats: a new snapshot at every open, its size exact on the open file.
    stats = os.path.join(a.mnt, ".dlfs/stats")
    uptimes = []
    for i in range(60):
        with open(stats, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            text = fh.read()
        if size != len(text) or size == 0:
            fail(f"stats: fstat says {size} bytes, read gave {len(text)}")
        uptimes.append(json.loads(text)["uptime_s"])
        if i % 20 == 19:
            time.sleep(0.3)
    if uptimes != sorted(uptimes) or len(set(uptimes)) < 3:
        fail(f"stats is not fresh at each open: uptimes {uptimes[:5]}...{uptimes[-5:]}")
    time.sleep(0.5)  # forgets of replaced inodes are sent in the background
    live = fuse_stats(a)["generated_files"]
    if live > 8:
        fail(f"{live} generated files alive after 60 reads of stats: the kernel's forgets are not freeing them")
    print(f"stats: 60 opens, each a fresh snapshot; {live} generated file(s) alive")

    # .index and .tar: the size stat gives (from a listing or a lookup) is the bytes'.
    world = os.path.join(a.mnt, "ds/epochs/3/2")
    for e in os.scandir(world):  # readdirplus, then a stat per entry
        if e.is_dir():
            continue
        size = e.stat().st_size
        data = read(e.path)
        if size != len(data) or size == 0:
            fail(f"{e.name}: stat says {size} bytes, read gave {len(data)}")
    print("views: .index and .tar sizes from stat equal their contents")


def tar_members(data):
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as t:
        return {m.name: t.extractfile(m).read() for m in t}


def check_opportunistic(a):
    names = backend_files(a.backend)
    path = os.path.join(a.mnt, "ds/epochs/0/1/0.tar")
    inodes = set()
    for i in range(5):
        with open(path, "rb") as fh:
            inodes.add(os.fstat(fh.fileno()).st_ino)
            size = os.fstat(fh.fileno()).st_size
            data = fh.read()
        if len(data) != size:
            fail(f"open {i}: read {len(data)} bytes of a {size}-byte stream")
        members = tar_members(data)
        if sorted(members) != sorted(names):
            fail(f"open {i}: the stream does not hold every sample exactly once")
        for n in random.Random(i).sample(names, 20):
            if members[n] != read(os.path.join(a.backend, n)):
                fail(f"open {i}: member {n} differs from the backend")
    if len(inodes) != 5:
        fail(f"5 opens of an opportunistic stream shared inodes: {inodes}")
    print("opportunistic: 5 opens, 5 streams of their own, each complete and right")


def raw_stats(a):
    return daemon_stats(a)["datasets"][0]["views"]["raw"]


def check_push(a):
    names = backend_files(a.backend)
    raw = os.path.join(a.mnt, "ds/raw")
    random.Random(31).shuffle(names)
    before = fuse_stats(a)["requests"]
    for n in names:
        if read(os.path.join(raw, n)) != read(os.path.join(a.backend, n)):
            fail(f"raw/{n} differs from the backend on its first open().read()")
    after = fuse_stats(a)["requests"]
    spent = spent_between(before, after)
    st = raw_stats(a)
    n = len(names)
    if spent.get("ioctl") != n:
        fail(f"first open().read() of {n} raw files: {spent.get('ioctl')} ioctls, want one each")
    if a.pushed == "yes":
        if spent.get("read", 0) != 0 or st["pushed_files"] != n:
            fail(f"first open().read() of {n} pushable raw files: requests {spent}, pushed {st['pushed_files']}; "
                 f"want no READ and every file pushed")
        total = sum(os.path.getsize(os.path.join(a.backend, x)) for x in names)
        if st["pushed_bytes"] != total:
            fail(f"pushed {st['pushed_bytes']} bytes, the files hold {total}")
    else:
        if spent.get("read", 0) != n or st["pushed_files"] != 0:
            fail(f"first open().read() of {n} raw files not to be pushed: requests {spent}, pushed "
                 f"{st['pushed_files']}; want one READ each and none pushed")
    # A second pass: the pages are cached either way, and a file is pushed once.
    for x in names:
        if read(os.path.join(raw, x)) != read(os.path.join(a.backend, x)):
            fail(f"raw/{x} differs from the backend on its second open().read()")
    if raw_stats(a)["pushed_files"] != st["pushed_files"]:
        fail("a second open() of each file pushed it again")
    print(f"push: first open().read() of {n} raw files cost {spent}; pushed {st['pushed_files']} files, "
          f"{st['pushed_bytes']} bytes")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_daemon_args(ap)
    ap.add_argument("--part", choices=["plain", "push", "opportunistic"], required=True)
    ap.add_argument("--pushed", choices=["yes", "no"], default="yes", help="push: what to expect")
    a = ap.parse_args()
    {"plain": check_plain, "push": check_push, "opportunistic": check_opportunistic}[a.part](a)


if __name__ == "__main__":
    main()
