#!/usr/bin/env python3
"""libdlfs-client (client/dlfs_client.h, through ctypes) against real views.

  check_c_client.py LIB DATASET_DIR views EPOCHS WORLD_SIZES
  check_c_client.py LIB DATASET_DIR restart MARK GO

views: for each epoch and world size, every rank's view read through the
library in batches equals the mount's view: the `.index` file's sample ids
in order, and each sample's bytes those of its member in `<r>.tar`.
restart: reads epochs/0/1/0 in batches of 50, writes MARK after the first
half and waits for GO (the scenario restarts dlfsd meanwhile), then reads the
rest (the library reconnects) and checks both halves.
"""
import ctypes
import os
import sys
import tarfile
import time

from checklib import fail

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from dlfs.index import ViewIndex, view_path  # noqa: E402


class Member(ctypes.Structure):
    _fields_ = [("offset", ctypes.c_uint32), ("length", ctypes.c_uint32)]


class Sample(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("length", ctypes.c_uint64), ("sample_id", ctypes.c_uint64),
                ("members", ctypes.c_uint32), ("member", ctypes.POINTER(Member))]


def load(path):
    lib = ctypes.CDLL(path)
    lib.dlfs_client_open.restype = ctypes.c_void_p
    lib.dlfs_client_open.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.dlfs_client_view.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                                     ctypes.POINTER(ctypes.c_uint64)]
    lib.dlfs_client_batch.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.POINTER(Sample),
                                      ctypes.POINTER(ctypes.c_uint32)]
    lib.dlfs_client_error.restype = ctypes.c_char_p
    lib.dlfs_client_error.argtypes = [ctypes.c_void_p]
    lib.dlfs_client_close.argtypes = [ctypes.c_void_p]
    lib.dlfs_client_samples.restype = ctypes.c_uint64
    lib.dlfs_client_samples.argtypes = [ctypes.c_void_p]
    return lib


def open_client(lib, ds_dir):
    err = ctypes.create_string_buffer(1024)
    c = lib.dlfs_client_open(ds_dir.encode(), err, len(err))
    if not c:
        fail(f"dlfs_client_open({ds_dir}): {err.value.decode()}")
    return c


def select(lib, c, epoch, world, rank):
    n = ctypes.c_uint64()
    if lib.dlfs_client_view(c, epoch, world, rank, ctypes.byref(n)) != 0:
        fail(f"view {epoch}/{world}/{rank}: {lib.dlfs_client_error(c).decode()}")
    return n.value


def batches(lib, c, start, stop, size):
    """(position, sample id, bytes) of positions [start, stop)."""
    out = (Sample * size)()
    got = ctypes.c_uint32()
    pos = start
    while pos < stop:
        rc = lib.dlfs_client_batch(c, pos, min(size, stop - pos), out, ctypes.byref(got))
        if rc != 0:
            fail(f"batch at {pos}: {lib.dlfs_client_error(c).decode()} ({rc})")
        if got.value == 0:
            fail(f"batch at {pos} of {stop}: nothing")
        # Copied at once: staged samples are valid only for slots - 1 further calls.
        for i in range(got.value):
            s = out[i]
            yield pos + i, s.sample_id, ctypes.string_at(s.data, s.length) if s.length else b""
        pos += got.value


def expect_view(index, tar, items, what):
    for pos, sid, data in items:
        if sid != index.ids[pos]:
            fail(f"{what}: position {pos} is sample {sid}, the .index says {index.ids[pos]}")
        want = tar[index.offsets[pos]:index.offsets[pos] + index.lengths[pos]]
        if data != want:
            fail(f"{what}: position {pos} (sample {sid}): {len(data)} bytes differ from the .tar member's {len(want)}")


def check_views(lib, ds_dir, epochs, worlds):
    c = open_client(lib, ds_dir)
    checked = 0
    for epoch in epochs:
        for world in worlds:
            for rank in range(world):
                stem = view_path(ds_dir, epoch, world, rank)
                index = ViewIndex(stem + ".index")
                with open(stem + ".tar", "rb") as f:
                    tar = f.read()
                n = select(lib, c, epoch, world, rank)
                if n != len(index.ids):
                    fail(f"{stem}: the library's view has {n} samples, the .index {len(index.ids)}")
                expect_view(index, tar, list(batches(lib, c, 0, n, 64)), stem)
                checked += n
    lib.dlfs_client_close(c)
    print(f"views: {checked} samples equal to the mount's views")


def check_members(lib, ds_dir, world):
    """A grouped dataset: every sample's members, through dlfs_sample.member, equal the .tar view's members."""
    c = open_client(lib, ds_dir)
    if not lib.dlfs_client_grouped(c):
        fail(f"{ds_dir}: the library says the dataset is not grouped")
    checked = 0
    for rank in range(world):
        n = select(lib, c, 0, world, rank)
        with tarfile.open(view_path(ds_dir, 0, world, rank) + ".tar") as t:
            want = [t.extractfile(m).read() for m in t if m.isfile()]
        got = []
        out = (Sample * 100)()
        count = ctypes.c_uint32()
        pos = 0
        while pos < n:
            if lib.dlfs_client_batch(c, pos, 100, out, ctypes.byref(count)) != 0 or count.value == 0:
                fail(f"batch at {pos}: {lib.dlfs_client_error(c).decode()}")
            for i in range(count.value):
                s = out[i]
                for j in range(s.members):
                    m = s.member[j]
                    got.append(ctypes.string_at(s.data + m.offset, m.length) if m.length else b"")
            pos += count.value
        if got != want:
            bad = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            fail(f"rank {rank} of {world}: {len(got)} members through the library, {len(want)} in the .tar view; "
                 f"the first difference at member {bad}")
        checked += len(got)
    lib.dlfs_client_close(c)
    print(f"members: {checked} members of grouped samples equal to the mount's .tar views")


def check_restart(lib, ds_dir, mark, go):
    c = open_client(lib, ds_dir)
    n = select(lib, c, 0, 1, 0)
    stem = view_path(ds_dir, 0, 1, 0)
    index = ViewIndex(stem + ".index")
    with open(stem + ".tar", "rb") as f:
        tar = f.read()
    first = list(batches(lib, c, 0, n // 2, 50))
    expect_view(index, tar, first, stem + " before the restart")
    with open(mark, "w") as f:
        f.write("half\n")
    deadline = time.time() + 120
    while not os.path.exists(go):
        if time.time() > deadline:
            fail(f"{go} did not appear within 120 s")
        time.sleep(0.1)
    rest = list(batches(lib, c, n // 2, n, 50))
    expect_view(index, tar, rest, stem + " after the restart")
    print(f"restart: {n} samples of {stem} read across dlfsd's restart")
    lib.dlfs_client_close(c)


def main():
    lib = load(sys.argv[1])
    ds_dir, mode = sys.argv[2], sys.argv[3]
    if mode == "views":
        check_views(lib, ds_dir, [int(e) for e in sys.argv[4].split(",")], [int(w) for w in sys.argv[5].split(",")])
    elif mode == "members":
        check_members(lib, ds_dir, int(sys.argv[4]))
    elif mode == "restart":
        check_restart(lib, ds_dir, sys.argv[4], sys.argv[5])
    else:
        fail(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
