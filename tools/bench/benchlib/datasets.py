"""The benchmarks' datasets, generated once under a workdir and reused: a
`<dir>.complete` marker says a directory was written to the end (an
interrupted run regenerates it)."""
import math
import os
import shutil
import subprocess

from . import SRC

GEN = os.path.join(SRC, "tools/gen_dataset.py")


def _once(path, make):
    marker = path + ".complete"
    if os.path.exists(marker):
        return
    shutil.rmtree(path, ignore_errors=True)
    make()
    open(marker, "w").close()


def ensure_dataset(path, count, size, dirs, jitter=0.0):
    """`count` files of `size` bytes (+-jitter) in `dirs` directories (gen_dataset.py files)."""
    cmd = ["/usr/bin/python3", GEN, "files", path, "--count", str(count), "--size", str(size), "--dirs", str(dirs),
           "--seed", "1"]
    if jitter:
        cmd += ["--size-jitter", str(jitter)]
    _once(path, lambda: subprocess.run(cmd, check=True))


def ensure_fixed(path, records, record_size, file_bytes=256 << 20):
    """`records` fixed-size records in files of about `file_bytes` (gen_dataset.py fixed)."""
    files = max(1, math.ceil(records * record_size / file_bytes))
    _once(path, lambda: subprocess.run(["/usr/bin/python3", GEN, "fixed", path, "--records", str(records),
                                        "--record-size", str(record_size), "--files", str(files), "--seed", "1"],
                                       check=True))


def ensure_filler(workdir, total):
    """Unrelated files that fill the page cache when read (256 MiB each); their paths."""
    d = os.path.join(workdir, f"filler-{total}")
    if not os.path.exists(d + ".complete"):
        os.makedirs(d, exist_ok=True)
        chunk = 256 << 20
        for i in range((total + chunk - 1) // chunk):
            n = min(chunk, total - i * chunk)
            subprocess.run(["dd", "if=/dev/urandom", f"of={os.path.join(d, f'f{i:03d}')}", "bs=1M",
                            f"count={max(1, n >> 20)}", "status=none"], check=True)
        open(d + ".complete", "w").close()
    return sorted(os.path.join(d, n) for n in os.listdir(d))
