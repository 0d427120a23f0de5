#!/usr/bin/env python3
"""Checks that the attributes of every entry under a mounted raw view match
the backend directory: the same file type, the same size (regular files),
the backend's permission bits without the write bits, and the same mtime
(nanoseconds). Walks the backend; every entry must exist in the view.

Used by 01_raw_view_equals_backend.sh:

  check_attrs.py BACKEND MOUNTED_RAW
"""
import argparse
import os
import stat

from checklib import fail


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("backend", help="the backend directory")
    ap.add_argument("mounted", help="the dataset's raw view (MNT/NAME/raw)")
    args = ap.parse_args()
    a, b = args.backend, args.mounted
    n = 0
    for dirpath, dirs, files in os.walk(a):
        for name in files + dirs:
            pa = os.path.join(dirpath, name)
            pb = os.path.join(b, os.path.relpath(pa, a))
            try:
                sa, sb = os.lstat(pa), os.lstat(pb)
            except OSError as e:
                fail(f"{pb}: {e}")
            if stat.S_IFMT(sa.st_mode) != stat.S_IFMT(sb.st_mode):
                fail(f"{pb}: file type {oct(stat.S_IFMT(sb.st_mode))}, backend {oct(stat.S_IFMT(sa.st_mode))}")
            if stat.S_ISREG(sa.st_mode) and sa.st_size != sb.st_size:
                fail(f"{pb}: size {sb.st_size}, backend {sa.st_size}")
            if stat.S_IMODE(sb.st_mode) != stat.S_IMODE(sa.st_mode) & 0o555:
                fail(f"{pb}: mode {oct(sb.st_mode)}, want the backend's {oct(sa.st_mode)} without write and special (setuid, setgid, sticky) bits")
            if sa.st_mtime_ns != sb.st_mtime_ns:
                fail(f"{pb}: mtime {sb.st_mtime_ns} ns, backend {sa.st_mtime_ns} ns")
            n += 1
    print(f"{n} entries: sizes, modes and mtimes match")


if __name__ == "__main__":
    main()
