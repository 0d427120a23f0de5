#!/usr/bin/python3
"""Checks for 34_view_drop_behind.sh, against a mounted dlfsd.

Reads an epoch view (epochs/<e>/1/0.tar) through in order with 1 MiB preads,
then asks the kernel (mincore over a mapping of the file) how much of it the
page cache holds, and checks:

  --expect dropped   at most --keep-max bytes stay cached, at the end of the
                     file (the front); the stats say bytes were dropped, with
                     no failures
  --expect kept      (--view-drop-behind 0) nearly the whole file stays cached,
                     and the stats say nothing was dropped

Either way, every member of the view is the backend's file of its name, and a
second read of the view (from dlfsd's memory where its pages were dropped) has
the same bytes as the first. Prints the view's digest, so that the scenario can
compare the two daemons' views.
"""
import argparse
import ctypes
import hashlib
import io
import mmap
import os
import tarfile
import time

from checklib import add_daemon_args, daemon_stats, fail

PAGE = os.sysconf("SC_PAGE_SIZE")
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def read_in_order(path, request=1 << 20):
    """The file's bytes, read with preads of `request` bytes from start to end."""
    fd = os.open(path, os.O_RDONLY)
    try:
        parts, off = [], 0
        while True:
            b = os.pread(fd, request, off)
            if not b:
                return b"".join(parts)
            parts.append(b)
            off += len(b)
    finally:
        os.close(fd)


def cached_pages(path):
    """Indices of the file's pages in the page cache: mincore over a read-only
    mapping of it (mapping touches no page)."""
    size = os.path.getsize(path)
    npages = (size + PAGE - 1) // PAGE
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            fail(f"mmap of {path}: {os.strerror(ctypes.get_errno())}")
        try:
            vec = ctypes.create_string_buffer(npages)
            if _libc.mincore(ctypes.c_void_p(addr), size, vec) != 0:
                fail(f"mincore over {path}: {os.strerror(ctypes.get_errno())}")
            return [i for i, v in enumerate(vec.raw) if v & 1]
        finally:
            _libc.munmap(ctypes.c_void_p(addr), size)
    finally:
        os.close(fd)


def check_members(data, backend, where):
    """Every regular member of the tar bytes equals the backend file of its name."""
    n = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as t:
        for m in t:
            if not m.isfile():
                continue
            want = open(os.path.join(backend, m.name), "rb").read()
            if t.extractfile(m).read() != want:
                fail(f"{where}: member {m.name} differs from the backend file")
            n += 1
    if n == 0:
        fail(f"{where}: no member")
    return n


def drop_stats(a):
    return daemon_stats(a)["fuse"]["view_drop_behind"]


def main():
    ap = argparse.ArgumentParser()
    add_daemon_args(ap)
    ap.add_argument("--epoch", type=int, default=0)
    ap.add_argument("--expect", choices=("dropped", "kept"), required=True)
    ap.add_argument("--keep-max", type=int, default=80 << 20, help="bytes that may stay cached (dropped)")
    a = ap.parse_args()

    path = os.path.join(a.mnt, "ds", "epochs", str(a.epoch), "1", "0.tar")
    first = read_in_order(path)
    size = len(first)
    if size != os.path.getsize(path):
        fail(f"{path}: read {size} bytes, stat says {os.path.getsize(path)}")
    members = check_members(first, a.backend, path)
    # dlfsd hands the ranges to the kernel from a thread of its own, after
    # the reads were answered: give the last ones a moment.
    for _ in range(30):
        stats = drop_stats(a)
        pages = cached_pages(path)
        cached = len(pages) * PAGE
        if a.expect == "kept" or (cached <= a.keep_max and stats["dropped_bytes"] >= size - a.keep_max):
            break
        time.sleep(0.1)
    print(f"{path}: {size} bytes, {members} members; after one read in order {cached} bytes cached "
          f"(pages {pages[0] if pages else '-'}..{pages[-1] if pages else '-'}); drop-behind stats {stats}")

    if a.expect == "dropped":
        if cached > a.keep_max:
            fail(f"{cached} bytes of the view stay cached after it was read through, more than {a.keep_max}")
        if pages and pages[0] * PAGE < size - a.keep_max:
            fail(f"a cached page at byte {pages[0] * PAGE} lies more than {a.keep_max} bytes behind the end ({size})")
        if stats["dropped_bytes"] < size - a.keep_max or stats["failures"] != 0:
            fail(f"the stats do not show the view dropped behind its reader: {stats}")
    else:
        if cached < size * 0.9:
            fail(f"with drop-behind off only {cached} of {size} bytes stay cached")
        if stats["dropped_bytes"] != 0 or stats["keep_bytes"] != 0:
            fail(f"with drop-behind off the stats show drops: {stats}")

    second = read_in_order(path, request=3 << 20)
    if second != first:
        fail(f"{path}: a second read differs from the first")
    print("digest", hashlib.sha256(first).hexdigest())


if __name__ == "__main__":
    main()
