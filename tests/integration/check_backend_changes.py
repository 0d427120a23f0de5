#!/usr/bin/env python3
"""The checks of 17_backend_changes.sh: a backend that changes under a mount
whose memory budget holds only the first part of the dataset.

  check_backend_changes.py pick MNT DATA
      prints four relative paths, one a line: a file wholly resident, one
      that straddles the end of the resident part, and two wholly on the
      backend (from the dataset's capacity_bytes and the canonical order)
  check_backend_changes.py rewrite FILE (--same-size | --grow)
      new random bytes in place (same inode), mtime one minute later
  check_backend_changes.py read MNT SCANNED [--eio REL ...]
      every file of SCANNED (the tree as scanned) read through MNT/ds/raw:
      the --eio ones must fail with EIO, every other one must give exactly
      the scanned bytes (never the rewritten ones, never a mix)
  check_backend_changes.py stats MNT --count N [--changed REL:WHAT ...]
      stats list N changed files, among them each REL with WHAT in its reason
"""
import argparse
import errno
import os
import sys

from checklib import fail, mount_stats


def canonical_files(root):
    """Relative paths of the regular files below root, in the byte space's order."""
    out = []
    for d, _, files in os.walk(root):
        for f in files:
            out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out, key=lambda p: p.encode())


def stats(mnt):
    return mount_stats(mnt)["datasets"][0]


def pick(args):
    capacity = stats(args.mnt)["capacity_bytes"]
    resident, straddle, backend = [], [], []
    offset = 0
    for rel in canonical_files(args.data):
        size = os.path.getsize(os.path.join(args.data, rel))
        end = offset + size
        if size and end <= capacity:
            resident.append(rel)
        elif offset < capacity < end:
            straddle.append(rel)
        elif offset >= capacity and size:
            backend.append(rel)
        offset = end
    if not (resident and straddle and len(backend) >= 2):
        fail(f"pick: capacity {capacity} of {offset} bytes leaves no resident, straddling and two backend files")
    print("\n".join([resident[0], straddle[0], backend[-1], backend[-2]]))


def rewrite(args):
    st = os.stat(args.file)
    size = st.st_size + (4096 if args.grow else 0)
    with open(args.file, "r+b") as f:  # in place: the inode stays, only bytes and times move
        f.write(os.urandom(size))
        f.truncate(size)
    os.utime(args.file, ns=(st.st_atime_ns, st.st_mtime_ns + 60 * 10**9))


def read(args):
    eio = set(args.eio)
    checked = 0
    for rel in canonical_files(args.scanned):
        path = os.path.join(args.mnt, "ds", "raw", rel)
        with open(os.path.join(args.scanned, rel), "rb") as f:
            want = f.read()
        try:
            with open(path, "rb") as f:
                got = f.read()
        except OSError as e:
            if rel in eio and e.errno == errno.EIO:
                checked += 1
                continue
            fail(f"read {rel}: {e} (want {'EIO' if rel in eio else 'the scanned bytes'})")
        if rel in eio:
            fail(f"read {rel}: got {len(got)} bytes of a file changed on the backend, want EIO")
        if got != want:
            fail(f"read {rel}: {len(got)} bytes that are not the scanned version ({len(want)} bytes)")
        checked += 1
    print(f"{checked} files read: scanned bytes or EIO as expected")


def check_stats(args):
    changed = stats(args.mnt)["changed_files"]
    if changed["count"] != args.count:
        fail(f"stats: {changed['count']} changed files, want {args.count}: {changed}")
    listed = {f["path"]: f["what"] for f in changed["files"]}
    for item in args.changed:
        rel, what = item.rsplit(":", 1)
        if rel not in listed:
            fail(f"stats: {rel} not among the changed files {sorted(listed)}")
        if what not in listed[rel]:
            fail(f"stats: {rel} changed by {listed[rel]!r}, want {what!r} in it")
    print(f"stats: {changed['count']} changed files: {listed}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pick")
    p.add_argument("mnt")
    p.add_argument("data")
    p = sub.add_parser("rewrite")
    p.add_argument("file")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--same-size", action="store_true")
    g.add_argument("--grow", action="store_true")
    p = sub.add_parser("read")
    p.add_argument("mnt")
    p.add_argument("scanned")
    p.add_argument("--eio", nargs="*", default=[])
    p = sub.add_parser("stats")
    p.add_argument("mnt")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--changed", nargs="*", default=[], help="REL:WHAT")
    args = ap.parse_args()
    {"pick": pick, "rewrite": rewrite, "read": read, "stats": check_stats}[args.cmd](args)


if __name__ == "__main__":
    main()
