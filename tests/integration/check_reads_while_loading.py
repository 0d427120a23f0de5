#!/usr/bin/python3
"""Raw reads while the stripe loads, through a real mount (33_reads_while_loading).

--expect dropped: files read while the load runs have the right bytes, and a
  moment later the kernel holds none of their pages (fincore); the stats count
  the drops. Once the load is done, files read are kept by the kernel (a
  second read costs no FUSE read), and the files read during the load read
  right again.
--expect kept (dlfsd --kernel-cache-while-loading): files read during the
  load stay in the kernel's page cache; nothing is dropped.

The backend is slowed by the test (faulty_backend, DLFS_FAULT_DELAY) so that
the load lasts long enough to read during it; if it ends first, the check
says so and fails rather than judge nothing.
"""
import argparse
import json
import os
import subprocess
import sys
import time


def stats(mnt):
    with open(os.path.join(mnt, ".dlfs/stats")) as f:
        return json.load(f)


def load_state(mnt):
    return stats(mnt)["datasets"][0]["load"]["state"]


def fuse_reads(mnt):
    return stats(mnt)["fuse"]["requests"]["read"]


def resident_bytes(path):
    """Bytes of `path` in the kernel's page cache (fincore: mmap + mincore)."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path],
                         check=True, capture_output=True, text=True).stdout
    return int(out.strip())


def read_whole(path):
    fd = os.open(path, os.O_RDONLY)  # no isatty() ioctl: only reads reach the daemon
    try:
        chunks = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                return b"".join(chunks)
            chunks.append(b)
    finally:
        os.close(fd)


def same_bytes(mnt_file, backend_file):
    got = read_whole(mnt_file)
    with open(backend_file, "rb") as f:
        want = f.read()
    if got != want:
        sys.exit(f"FAIL: {mnt_file}: {len(got)} bytes read, differ from the backend's {len(want)}")


def wait_for(what, pred, seconds):
    end = time.time() + seconds
    while time.time() < end:
        if pred():
            return
        time.sleep(0.05)
    sys.exit(f"FAIL: {what} within {seconds} s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mnt", required=True)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--expect", choices=["dropped", "kept"], required=True)
    a = ap.parse_args()
    raw = os.path.join(a.mnt, "ds/raw")
    names = sorted(os.path.join(d, n)[len(a.backend) + 1:]
                   for d, _, ns in os.walk(a.backend) for n in ns)
    during, after = names[:12], names[-12:]

    if load_state(a.mnt) == "done":
        sys.exit("FAIL: the load was done before the first read; the backend delay is too short to test")
    for n in during:
        same_bytes(os.path.join(raw, n), os.path.join(a.backend, n))
    time.sleep(0.5)  # 10x the drop delay
    held = {n: resident_bytes(os.path.join(raw, n)) for n in during}
    if load_state(a.mnt) == "done":
        sys.exit("FAIL: the load ended before the page cache was looked at; the backend delay is too short")
    drops = stats(a.mnt)["fuse"]["page_cache_drops"]
    if a.expect == "dropped":
        if any(held.values()):
            sys.exit(f"FAIL: pages still cached after reads during the load: {held}")
        if not drops["enabled"] or drops["ranges"] < len(during) or drops["bytes"] <= 0:
            sys.exit(f"FAIL: stats count fewer drops than the {len(during)} files read: {drops}")
        print(f"during the load: {len(during)} files right, none left in the page cache; stats {drops}")
    else:
        if not all(held.values()):
            sys.exit(f"FAIL: pages dropped although --kernel-cache-while-loading: {held}")
        if drops["enabled"]:
            sys.exit(f"FAIL: the releaser runs although --kernel-cache-while-loading: {drops}")
        print(f"during the load: {len(during)} files right and kept in the page cache")

    wait_for("the load to finish", lambda: load_state(a.mnt) == "done", 60)
    ranges_at_done = stats(a.mnt)["fuse"]["page_cache_drops"].get("ranges", 0)
    for n in after + during:
        same_bytes(os.path.join(raw, n), os.path.join(a.backend, n))
    time.sleep(0.5)
    for n in after:
        p = os.path.join(raw, n)
        if resident_bytes(p) != os.path.getsize(p):
            sys.exit(f"FAIL: {n}, read after the load, is not wholly in the page cache")
    # Reading the stats file is itself FUSE reads: count what one look costs.
    r0 = fuse_reads(a.mnt)
    r1 = fuse_reads(a.mnt)
    for n in after:
        read_whole(os.path.join(raw, n))
    r2 = fuse_reads(a.mnt)
    if r2 - r1 != r1 - r0:
        sys.exit(f"FAIL: a second read after the load cost {r2 - r1 - (r1 - r0)} FUSE reads (want 0)")
    if stats(a.mnt)["fuse"]["page_cache_drops"].get("ranges", 0) != ranges_at_done:
        sys.exit("FAIL: pages were dropped after the load was done")
    print(f"after the load: {len(after + during)} files right, kept by the kernel, second reads cost no request")


if __name__ == "__main__":
    main()
