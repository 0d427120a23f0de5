#!/usr/bin/env python3
"""First touch of fresh anonymous memory, after the page cache was dropped
against after another process freed as much anonymous memory.

Why: in load_bench.py's A/B runs the build that runs right after phase a
reads faster during the load than the one after it, whichever build it is
(docs/benchmark-notes.md, session 26). Each daemon faults its stripe (GiBs of
anonymous memory, huge pages where given) while readers read, and on a VM
whose balloon reports free pages to the host, memory freed in large blocks
may cost a host fault when touched again. This measures that cost directly,
with no daemon involved:

  after-cache: read SIZE of files into the page cache, drop it, touch SIZE
  after-anon:  touch SIZE in a child process, let it exit, touch SIZE

each after WAIT seconds (the kernel's reporting delay is 2 s), alternating
which goes first, medians. (On this project's VM, session 26: after-anon was
the faster, 1.82 against 1.06 GB/s, so it does not explain load_bench's
position effect.)

Usage: fresh_memory.py [--size 4G] [--repeat 5] [--wait 3] [--workdir DIR]
(root: drop_caches). Prints seconds per touch and GB/s, and the ratio.
"""
import mmap
import os
import statistics
import subprocess
import sys
import time

from benchlib import cli, readers
from benchlib.readers import drop_caches

PAGE = 4096


def touch(size):
    """Seconds to write one byte to every page of `size` fresh bytes (huge pages advised)."""
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        m.madvise(mmap.MADV_HUGEPAGE)
    t0 = time.perf_counter()
    for off in range(0, size, PAGE):
        m[off] = 1
    secs = time.perf_counter() - t0
    m.close()
    return secs


def files_of(workdir, size):
    """Files totalling `size` bytes (made once, 64 MiB each)."""
    d = os.path.join(workdir, f"cache-{size}")
    os.makedirs(d, exist_ok=True)
    chunk = 64 << 20
    names = [os.path.join(d, f"f{i}") for i in range((size + chunk - 1) // chunk)]
    for n in names:
        if not os.path.exists(n) or os.path.getsize(n) != chunk:
            with open(n, "wb") as f:
                f.write(os.urandom(chunk))
    return names


def after_cache(a, names):
    drop_caches()
    for n in names:  # into the page cache
        with open(n, "rb", buffering=0) as f:
            while f.read(8 << 20):
                pass
    drop_caches()
    time.sleep(a.wait)
    return touch(a.size)


def after_anon(a):
    drop_caches()
    # A child touches the memory and frees it at its exit, in large blocks.
    subprocess.run([sys.executable, __file__, "--child", str(a.size)], check=True)
    time.sleep(a.wait)
    return touch(a.size)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        touch(int(sys.argv[2]))
        return 0
    ap = cli.parser(__doc__, workdir="/tmp/dlfs-fresh-memory", repeat=5, build=None)
    ap.add_argument("--size", type=cli.size_arg, default=4 << 30, help="bytes touched (default 4G)")
    ap.add_argument("--wait", type=float, default=3.0, help="seconds between freeing and touching (default 3)")
    a = ap.parse_args()
    cli.require_root(ap, "writes /proc/sys/vm/drop_caches")
    readers.set_settle(0)  # the waits between freeing and touching are --wait's
    names = files_of(a.workdir, a.size)
    res = {"after-cache": [], "after-anon": []}
    for rep in range(a.repeat):
        order = ["after-cache", "after-anon"] if rep % 2 == 0 else ["after-anon", "after-cache"]
        for kind in order:
            secs = after_cache(a, names) if kind == "after-cache" else after_anon(a)
            res[kind].append(secs)
            print(f"rep {rep} {kind}: {secs:.2f} s ({a.size / secs / 1e9:.2f} GB/s)", flush=True)
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"\n{a.size >> 20} MiB touched, medians of {a.repeat}, {a.wait:.0f} s after freeing:")
    for k, v in med.items():
        print(f"  {k:12s} {v:.2f} s ({a.size / v / 1e9:.2f} GB/s)")
    print(f"  after-anon / after-cache: {med['after-anon'] / med['after-cache']:.2f}x the time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
