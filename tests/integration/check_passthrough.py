#!/usr/bin/python3
"""Checks for 33_passthrough_while_loading.sh.

  make DIR           a dataset: 240 files of 64 KiB in one directory, so that
                     the load (in name order, 40 ms per file) takes seconds
  on MNT BACKEND     (DLFS_CTL and DLFS_SOCKET name dlfs-ctl and the daemon's
                     control socket) checks against a dlfsd that is loading it, passthrough on;
                     exits 77 when the kernel offers no passthrough
  off MNT BACKEND    the same reads with --passthrough off: none passed through
"""
import mmap
import os
import sys
import time

from checklib import ctl_stats, fail

COUNT, SIZE = 240, 64 * 1024
CTL = os.environ.get("DLFS_CTL", "dlfs-ctl")
SOCKET = os.environ.get("DLFS_SOCKET", "")


def name(i):
    return f"s{i:04d}.bin"


def make(d):
    os.makedirs(d, exist_ok=True)
    for i in range(COUNT):
        with open(os.path.join(d, name(i)), "wb") as f:
            f.write(os.urandom(SIZE))


def stats(mnt):
    """Through the control socket: reading /.dlfs/stats would count requests itself."""
    s = ctl_stats(CTL, SOCKET)
    return s, s["datasets"][0]


def read(path):
    with open(path, "rb", buffering=0) as f:
        return f.read()


def same(mnt, backend, i, how="read"):
    want = read(os.path.join(backend, name(i)))
    path = os.path.join(mnt, "ds/raw", name(i))
    if how == "mmap":
        with open(path, "rb", buffering=0) as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
            got = bytes(m)
    else:
        got = read(path)
    if got != want:
        fail(f"raw/{name(i)} ({how}) differs from the backend ({len(got)} bytes against {len(want)})")


def loading(mnt):
    return stats(mnt)[1]["load"]["state"] == "loading"


def wait_loaded(mnt):
    for _ in range(600):
        if not loading(mnt):
            return
        time.sleep(0.1)
    fail("the load did not end within 60 s")


def check_on(mnt, backend):
    s, ds = stats(mnt)
    pt = s["fuse"]["passthrough"]
    if not pt["offered"]:
        print("this kernel does not offer FUSE passthrough (Linux 6.9+, CONFIG_FUSE_PASSTHROUGH)")
        sys.exit(77)
    if not pt["in_use"]:
        fail(f"the kernel offers passthrough but dlfsd did not take it: {pt}")
    if not ds["passthrough"]:
        fail(f"passthrough auto, backend on {ds['backend_fs']}, yet the dataset is not passed through")
    if ds["load"]["state"] != "loading":
        fail("the load ended before the checks began: they would check nothing")

    # A changed backend file is never handed to the kernel: the last file is
    # loaded last, so it is still read from the backend, and must fail.
    changed = COUNT - 1
    with open(os.path.join(backend, name(changed)), "ab") as f:
        f.write(b"changed")
    try:
        read(os.path.join(mnt, "ds/raw", name(changed)))
        fail(f"raw/{name(changed)} changed on the backend after the scan but was read without an error")
    except OSError as e:
        if e.errno != 5:
            fail(f"raw/{name(changed)} (changed since the scan): {e}, expected EIO")

    # Files near the end are not loaded yet: each is a backend file handed to
    # the kernel, and reading it costs dlfsd no READ request.
    before = stats(mnt)
    tail = range(COUNT - 41, COUNT - 1)
    for i in tail:
        same(mnt, backend, i)
    after = stats(mnt)
    handed = after[1]["views"]["raw"]["passthrough_files"] - before[1]["views"]["raw"]["passthrough_files"]
    prefetched = after[1]["views"]["raw"]["prefetched_files"] - before[1]["views"]["raw"]["prefetched_files"]
    reads = after[0]["fuse"]["requests"]["read"] - before[0]["fuse"]["requests"]["read"]
    if handed != len(tail):
        fail(f"{len(tail)} files not in memory yet were read, {handed} backend files handed to the kernel")
    if prefetched != len(tail):
        fail(f"{len(tail)} names looked up before their opens, {prefetched} backend files prefetched")
    if reads != 0:
        fail(f"reads of passed-through files reached dlfsd: {reads} READ requests")

    # Held open across the end of the load: two opens of one file at once
    # (they must share the inode's backing file), one of them mmapped.
    held = COUNT - 50
    p = os.path.join(mnt, "ds/raw", name(held))
    f1 = open(p, "rb", buffering=0)
    f2 = open(p, "rb", buffering=0)
    m = mmap.mmap(f2.fileno(), 0, prot=mmap.PROT_READ)
    same(mnt, backend, COUNT - 60, "mmap")
    if not loading(mnt):
        fail("the load ended before the files were held open: make it slower")
    wait_loaded(mnt)
    want = read(os.path.join(backend, name(held)))
    if f1.read() != want or bytes(m) != want:
        fail(f"raw/{name(held)}, opened during the load, reads other bytes after it")
    m.close()
    f1.close()
    f2.close()

    # After the load: every file right, no OPEN reaches dlfsd (the first is
    # answered ENOSYS), and every backing file is closed.
    opens = stats(mnt)[0]["fuse"]["requests"]["open"]
    for i in range(COUNT - 1):
        same(mnt, backend, i)
    s, ds = stats(mnt)
    if ds["views"]["raw"]["prefetched_files"] != after[1]["views"]["raw"]["prefetched_files"] + 2:
        fail(f"prefetches after the load (only the two files held open were looked up during it): {ds['views']['raw']}")
    if s["fuse"]["requests"]["open"] - opens > 1:
        fail(f"OPEN requests still reach dlfsd after the load: {s['fuse']['requests']}")
    if not s["fuse"]["passthrough"]["window_over"]:
        fail(f"the passthrough window is not over after the load: {s['fuse']['passthrough']}")
    for _ in range(50):  # RELEASE is sent after close() returns
        if stats(mnt)[0]["fuse"]["passthrough"]["backing_files_open"] == 0:
            break
        time.sleep(0.1)
    else:
        fail(f"backing files left open: {stats(mnt)[0]['fuse']['passthrough']}")
    # Readers passed files through, so the rest of the load was read ahead for
    # them (cache/load_stager.h; load_staging auto: a local file system).
    if not ds["load_staging"] or ds["load"]["extents_staged"] == 0:
        fail(f"nothing staged while readers passed files through: load_staging {ds['load_staging']}, {ds['load']}")
    print(f"passthrough: {ds['views']['raw']['passthrough_files']} files read from the backend by the kernel, "
          f"{ds['load']['extents_staged']} extents staged")


def check_off(mnt, backend):
    s, ds = stats(mnt)
    if s["fuse"]["passthrough"]["in_use"]:
        fail(f"--passthrough off, yet passthrough is in use: {s['fuse']['passthrough']}")
    if ds["passthrough"]:
        fail("--passthrough off, yet the dataset says it is passed through")
    for i in range(COUNT - 41, COUNT):
        same(mnt, backend, i)
    same(mnt, backend, 5, "mmap")
    s, ds = stats(mnt)
    if ds["views"]["raw"]["passthrough_files"] != 0 or s["fuse"]["passthrough"]["backing_files"] != 0:
        fail(f"--passthrough off handed backend files to the kernel: {s['fuse']['passthrough']}")
    if s["fuse"]["requests"]["read"] == 0:
        fail("no READ reached dlfsd: the reads were not served by it")
    # dlfsd read those files from the backend while the load had yet to reach
    # them, and gave the bytes to the load (StorageBuffer::give), which does
    # not read them again; once loaded, they are served from memory, right.
    given = ds["load"]["bytes_given"]
    if given == 0:
        fail(f"misses during the load gave the load nothing: {ds['load']}")
    wait_loaded(mnt)
    for i in range(COUNT):
        same(mnt, backend, i)
    _, ds = stats(mnt)
    if ds["load"]["state"] != "done" or ds["load"]["extents_failed"] != 0:
        fail(f"the load with given bytes did not end done: {ds['load']}")
    print(f"passthrough off: {given} bytes read by misses given to the load, every file right after it")


def main():
    what = sys.argv[1]
    if what == "make":
        make(sys.argv[2])
    elif what == "on":
        check_on(sys.argv[2], sys.argv[3])
    elif what == "off":
        check_off(sys.argv[2], sys.argv[3])
    else:
        fail(f"unknown part {what!r}")


if __name__ == "__main__":
    main()
