"""Reads every raw file with open() from two processes, twice, and an epoch
view once; asserts the raw bytes are the backend's and prints the view's
digest (the scenario compares it across transports)."""
import argparse
import hashlib
import os
import sys
from multiprocessing import Pool


def read_all(args):
    mnt_raw, backend, names = args
    bad = []
    for _ in range(2):
        for name in names:
            with open(os.path.join(mnt_raw, name), "rb") as f:
                got = f.read()
            with open(os.path.join(backend, name), "rb") as f:
                want = f.read()
            if got != want:
                bad.append(name)
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mnt", required=True)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--epoch", type=int, default=0)
    a = ap.parse_args()
    names = sorted(os.path.relpath(os.path.join(d, f), a.backend) for d, _, fs in os.walk(a.backend) for f in fs)
    raw = os.path.join(a.mnt, "ds", "raw")
    with Pool(2) as pool:
        bad = sum(pool.map(read_all, [(raw, a.backend, names[i::2]) for i in range(2)]), [])
    if bad:
        sys.exit(f"FAIL: {len(bad)} raw files differ from the backend, first {bad[0]}")
    print(f"raw: {len(names)} files x 2 passes x 2 processes equal to the backend")
    epoch_dir = os.path.join(a.mnt, "ds", "epochs", str(a.epoch))
    views = sorted(os.listdir(epoch_dir))
    if not views:
        sys.exit(f"FAIL: no view in {epoch_dir}")
    for v in views:
        p = os.path.join(epoch_dir, v)
        if os.path.isdir(p):
            continue
        with open(p, "rb") as f:
            data = f.read()
        if len(data) != os.stat(p).st_size:
            sys.exit(f"FAIL: {p}: read {len(data)} bytes of {os.stat(p).st_size}")
        print(f"view {v} {len(data)} {hashlib.sha256(data).hexdigest()}")


if __name__ == "__main__":
    main()
