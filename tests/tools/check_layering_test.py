#!/usr/bin/env python3
"""tools/check_layering.py passes on the tree and refuses what it must: an
include from a lower room of fs/ into a higher one, two fs/ modules that
include each other, and an include from client/ (which stands alone) into
the project. Usage: check_layering_test.py SOURCE_ROOT"""
import os
import subprocess
import sys
import tempfile


def run(script, root):
    return subprocess.run([sys.executable, script, root], capture_output=True, text=True)


def write(root, path, includes):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write("".join(f'#include "{i}"\n' for i in includes))


def main():
    src = sys.argv[1]
    script = os.path.join(src, "tools", "check_layering.py")
    failures = []
    real = run(script, src)
    if real.returncode != 0:
        failures.append("the source tree breaks its layering:\n" + real.stderr)
    with tempfile.TemporaryDirectory() as t:
        write(t, "fs/views/view.h", ["fs/dataset/dataset.h"])
        write(t, "fs/dataset/dataset.h", ["common/status.h"])
        ok = run(script, t)
        if ok.returncode != 0:
            failures.append("a tree that follows the order was refused:\n" + ok.stderr)
        write(t, "fs/dataset/dataset.h", ["fs/views/view.h"])
        up = run(script, t)
        if up.returncode == 0 or "fs/views/ is above fs/dataset/" not in up.stderr:
            failures.append("an include from fs/dataset into fs/views was not refused: " + up.stderr)
    with tempfile.TemporaryDirectory() as t:
        write(t, "fs/kernel/a.h", [])
        write(t, "fs/kernel/a.cc", ["fs/kernel/a.h", "fs/kernel/b.h"])
        write(t, "fs/kernel/b.h", [])
        write(t, "fs/kernel/b.cc", ["fs/kernel/b.h", "fs/kernel/a.h"])
        loop = run(script, t)
        if loop.returncode == 0 or "fs/kernel/a, fs/kernel/b" not in loop.stderr:
            failures.append("two modules that include each other were not refused: " + loop.stderr)
    with tempfile.TemporaryDirectory() as t:
        write(t, "client/a.cc", ["client/a.h"])
        write(t, "client/a.h", [])
        alone = run(script, t)
        if alone.returncode != 0:
            failures.append("client/ including its own headers was refused:\n" + alone.stderr)
        write(t, "client/a.cc", ["client/a.h", "common/status.h"])
        leak = run(script, t)
        if leak.returncode == 0 or "client/ stands alone" not in leak.stderr:
            failures.append("an include from client/ into common/ was not refused: " + leak.stderr)
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
