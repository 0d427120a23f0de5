#!/usr/bin/python3
"""Checks for 36_raw_overlay.sh, against a mounted dlfsd.

  --part overlay   raw/ is under dlfsd's read-only overlay (mount table and
                   stats agree); after drop_caches the first open().read() of
                   each raw file returns the backend's bytes and costs the
                   overlay's lookup (a LOOKUP and a getxattr each, at which
                   dlfsd pushes the file to a thread that has read raw files)
                   and no ioctl, and one READ (this thread's first file, which
                   makes it a reader); a second pass costs no request at all;
                   isatty() is False; raw/ lists the backend's tree; views,
                   their xattrs and writes refused still behave as without the
                   overlay; a stat walk by a process that reads nothing (find)
                   pushes nothing and reads nothing
  --part off       (--raw-overlay off) nothing is mounted over raw/, and every
                   open() of a cached raw file sends its isatty() ioctl
"""
import argparse
import errno
import io
import os
import random
import re
import subprocess
import tarfile

from checklib import add_daemon_args, backend_files, daemon_stats, fail, read, spent_between


def requests(a):
    return daemon_stats(a)["fuse"]["requests"]


def read_all(a, raw, names, seed, which):
    """open().read() of every file under raw/ in a shuffled order, each checked
    against the backend; the FUSE requests that cost."""
    names = list(names)
    random.Random(seed).shuffle(names)
    before = requests(a)
    for n in names:
        if read(os.path.join(raw, n)) != read(os.path.join(a.backend, n)):
            fail(f"raw/{n} through the overlay differs from the backend on its {which} open().read()")
    return spent_between(before, requests(a))


def mounts_at(path):
    """The file system types mounted exactly at `path` (/proc/self/mountinfo
    escapes space, tab, newline and backslash in octal, and shows the path
    with symlinks resolved)."""
    path = os.path.realpath(path)
    unescape = lambda s: re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)  # noqa: E731
    out = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            fields = line.split()
            if unescape(fields[4]) == path:
                out.append(fields[fields.index("-") + 1])
    return out


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def check_overlay(a):
    raw = os.path.join(a.mnt, "ds", "raw")
    kinds = mounts_at(raw)
    if kinds != ["overlay"]:
        fail(f"{raw}: mounted there: {kinds}, want one overlay")
    o = daemon_stats(a)["fuse"]["raw_overlay"]
    if o["mounted"] != [raw] or o["failures"] != 0 or o["mode"] != "auto" or o["reason"] is not None:
        fail(f"stats fuse.raw_overlay = {o}, want mode auto, mounted [{raw!r}], no failure")

    names = backend_files(a.backend)
    if backend_files(raw) != names:
        fail("raw/ through the overlay does not list the backend's tree")

    # First pass, cold: the overlay looks each file up (LOOKUP, then its
    # getxattr of trusted.overlay.metacopy, where dlfsd pushes the file), and
    # open()'s isatty() never reaches dlfsd.
    drop_caches()
    spent = read_all(a, raw, names, 36, "first")
    n = len(names)
    if spent.get("ioctl", 0) != 0:
        fail(f"first open().read() of {n} raw files sent {spent['ioctl']} ioctls through the overlay, want none")
    if spent.get("getxattr", 0) < n or spent.get("lookup", 0) < n:
        fail(f"first open().read() of {n} raw files: requests {spent}, want a lookup and a getxattr each "
             "(the overlay's lookup)")
    if spent.get("read", 0) > 1:
        fail(f"first open().read() of {n} raw files: {spent['read']} READs, want one at most (this thread's first "
             "file; the others pushed at the getxattr)")
    print(f"overlay: first open().read() of {n} raw files cost {spent}")

    # Second pass: nothing reaches dlfsd.
    spent = read_all(a, raw, names, 37, "second")
    if spent:
        fail(f"open().read() of {n} cached raw files through the overlay cost FUSE requests: {spent}")
    print(f"overlay: second open().read() of {n} raw files cost no request")

    with open(os.path.join(raw, names[0]), "rb") as f:
        if f.isatty():
            fail("a raw file says it is a terminal")
        if os.fstat(f.fileno()).st_size != os.path.getsize(os.path.join(a.backend, names[0])):
            fail(f"raw/{names[0]}: fstat's size is not the backend file's")
    try:
        with open(os.path.join(raw, "new-file"), "wb"):
            pass
        fail("creating a file in raw/ through the overlay succeeded")
    except OSError as e:
        if e.errno != errno.EROFS:
            fail(f"creating a file in raw/ through the overlay: {e}, want EROFS")

    # Views are not under the overlay: bytes, xattrs.
    tar_path = os.path.join(a.mnt, "ds", "epochs", "2", "1", "0.tar")
    with tarfile.open(fileobj=io.BytesIO(read(tar_path)), mode="r:") as t:
        members = {m.name: t.extractfile(m).read() for m in t}
    if sorted(members) != sorted(names):
        fail("the epoch view does not hold every sample exactly once")
    for m in random.Random(38).sample(sorted(members), 20):
        if members[m] != read(os.path.join(a.backend, m)):
            fail(f"view member {m} differs from the backend")
    if os.getxattr(tar_path, "user.dlfs.epoch") != b"2":
        fail(f"user.dlfs.epoch of {tar_path}: {os.getxattr(tar_path, 'user.dlfs.epoch')!r}, want b'2'")
    print("views: bytes and xattrs as without the overlay")

    # A metadata walk by a process that reads no raw file: the overlay looks
    # every file up (and asks its getxattr), and no byte is pushed or read.
    drop_caches()
    before, pushed = requests(a), daemon_stats(a)["datasets"][0]["views"]["raw"]["pushed_bytes"]
    out = subprocess.run(["find", raw, "-type", "f", "-printf", "%s\n"], check=True, capture_output=True, text=True)
    if len(out.stdout.split()) != n:
        fail(f"find listed {len(out.stdout.split())} files with sizes, want {n}")
    spent = spent_between(before, requests(a))
    grown = daemon_stats(a)["datasets"][0]["views"]["raw"]["pushed_bytes"] - pushed
    if spent.get("getxattr", 0) < n or spent.get("read", 0) != 0 or grown != 0:
        fail(f"a stat walk of {n} raw files cost {spent} and pushed {grown} bytes; want the overlay's getxattr "
             "of each and no byte pushed or read")
    print(f"overlay: a stat walk of {n} raw files cost {spent}, pushed nothing")


def check_off(a):
    raw = os.path.join(a.mnt, "ds", "raw")
    if mounts_at(raw):
        fail(f"--raw-overlay off, yet {mounts_at(raw)} is mounted at {raw}")
    o = daemon_stats(a)["fuse"]["raw_overlay"]
    if o["mode"] != "off" or o["mounted"] or o["reason"] != "raw_overlay = off":
        fail(f"stats fuse.raw_overlay = {o} with --raw-overlay off")
    names = backend_files(a.backend)[:100]
    for n in names:
        read(os.path.join(raw, n))
    before = requests(a)
    for n in names:
        if read(os.path.join(raw, n)) != read(os.path.join(a.backend, n)):
            fail(f"raw/{n} differs from the backend")
    spent = spent_between(before, requests(a))
    if spent != {"ioctl": len(names)}:
        fail(f"open().read() of {len(names)} cached raw files without the overlay: {spent}, want one ioctl each")
    print(f"off: no overlay; open() of {len(names)} cached raw files sent one ioctl each")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_daemon_args(ap)
    ap.add_argument("--part", choices=["overlay", "off"], required=True)
    a = ap.parse_args()
    a.mnt = os.path.abspath(a.mnt)
    {"overlay": check_overlay, "off": check_off}[a.part](a)


if __name__ == "__main__":
    main()
