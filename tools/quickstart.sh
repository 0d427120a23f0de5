#!/usr/bin/env bash
# Quick start on one machine (a cluster of one): install, build, generate a
# sample dataset, start dlfsd on it, read its tree and an epoch view through
# the mount and print what was measured, then stop cleanly. Needs root (apt-get, FUSE mount).
# Usage: tools/quickstart.sh [--size 1G] [--file-size 256K] [--workdir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)

size=1G
file_size=256K
work=/tmp/dlfs-quickstart
while [ $# -gt 0 ]; do
  case $1 in
    --size) size=$2; shift 2 ;;
    --file-size) file_size=$2; shift 2 ;;
    --workdir) work=$2; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "quickstart.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# Only what the quick start runs: its packages (no test tools, no Python environment)
# and the two programs it starts (tools/run-tests.sh builds the rest in the same build/).
t_start=$(date +%s.%N)
tools/install-deps.sh --quickstart
t_installed=$(date +%s.%N)
# A unity build (sources compiled in groups: about half the compiler's time) without the
# tests; tools/run-tests.sh turns both back to normal when it finds build/ so configured.
[ -f build/build.ninja ] || meson setup build --buildtype=release -Dunity=on -Dtests=disabled
meson compile -C build dlfsd dlfs-ctl
t_built=$(date +%s.%N)

data=$work/sample
mnt=$work/mnt
mkdir -p "$work" "$mnt"
if [ ! -f "$work/.sample-complete-$size-$file_size" ]; then
  rm -rf "$data"
  count=$(/usr/bin/python3 -c "import sys
units={'K':1<<10,'M':1<<20,'G':1<<30}
def b(s): return int(float(s[:-1])*units[s[-1]]) if s[-1] in units else int(s)
print(max(1, b('$size')//b('$file_size')))")
  /usr/bin/python3 tools/gen_dataset.py files "$data" --count "$count" --size "$file_size" --dirs 16 --seed 1
  touch "$work/.sample-complete-$size-$file_size"
fi

t_generated=$(date +%s.%N)
sock=$work/dlfsd.sock
build/fs/dlfsd --mountpoint "$mnt" --backend "$data" --name sample --control-socket "$sock" >"$work/dlfsd.log" 2>&1 &
pid=$!
stop() {
  kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  grep -q " $mnt fuse" /proc/mounts && fusermount3 -u "$mnt" || true
}
trap stop EXIT
for _ in $(seq 1 300); do [ -e "$mnt/.dlfs/stats" ] && break; sleep 0.1; done
[ -e "$mnt/.dlfs/stats" ] || { cat "$work/dlfsd.log"; echo "dlfsd did not mount" >&2; exit 1; }
echo "== dlfsd mounted at $mnt; waiting for the scan, then the load"
build/tools/ctl/dlfs-ctl --socket "$sock" --timeout 300 wait-ready
until build/tools/ctl/dlfs-ctl --socket "$sock" status --json |
      /usr/bin/python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["datasets"][0]["load"]["state"]=="done" else 1)'; do
  sleep 0.5
done
build/tools/ctl/dlfs-ctl --socket "$sock" status

# Read the whole tree with 1 MiB reads: from the backend (cold), through the
# mount (cold: first read), and through the mount again (kernel page cache).
read_tree() {
  /usr/bin/python3 - "$1" <<'PY'
import os, sys, time
root = sys.argv[1]
paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
buf = bytearray(1 << 20)
t0 = time.perf_counter(); total = 0
for p in paths:
    fd = os.open(p, os.O_RDONLY)
    while True:
        n = os.readv(fd, [buf])
        if n == 0: break
        total += n
    os.close(fd)
dt = time.perf_counter() - t0
print(f"{len(paths)} files, {total/2**20:.0f} MiB in {dt:.2f} s: {total/dt/1e9:.2f} GB/s")
PY
}
sync; echo 3 >/proc/sys/vm/drop_caches
echo -n "backend, cold:        "; read_tree "$data"
echo -n "dlfs raw view, cold:  "; read_tree "$mnt/sample/raw"
echo -n "dlfs raw view, warm:  "; read_tree "$mnt/sample/raw"
build/tools/ctl/dlfs-ctl --socket "$sock" verify
build/tools/ctl/dlfs-ctl --socket "$sock" stats

# The epoch view: epoch 0, world size 1, rank 0 as a tar stream, read
# sequentially (what a training job does) with the Python client
# (python/dlfs: large reads, its own tar parser), checked against the backend.
echo "== epoch view $mnt/sample/epochs/0/1/0.tar"
build/tools/ctl/dlfs-ctl --socket "$sock" plan --show 5
sync; echo 3 >/proc/sys/vm/drop_caches
PYTHONPATH="$src/python" /usr/bin/python3 - "$mnt/sample" "$data" <<'PY'
import os, sys, time
import dlfs
ds, data = sys.argv[1], sys.argv[2]
t0 = time.perf_counter(); n = total = 0
checked = []
view = dlfs.TarView(ds, epoch=0, rank=0, world_size=1)  # dlfsd's client socket when it serves one, else the mount
for key, group in view.samples():  # (key, {ext: bytes})
    for ext, body in group.items():
        total += len(body)
        if len(checked) < 20:
            checked.append((f"{key}.{ext}", body))
    n += 1
dt = time.perf_counter() - t0
index = dlfs.ViewIndex(os.path.join(ds, "epochs/0/1/0.index"))
assert n == len(index), f"{n} samples, index lists {len(index)}"
# Spot-check the shuffle against the backend: the first 20 samples' bytes, in the index's order.
for (name, body), want in zip(checked, index.names):
    assert name == want, f"{name} where the index has {want}"
    with open(os.path.join(data, name), "rb") as f:
        assert f.read() == body, name
how = "through dlfsd's client socket" if view.client_socket else "through the mount"
print(f"epoch view, cold: {n} samples, {total/2**20:.0f} MiB in {dt:.2f} s: {n/dt:,.0f} samples/s, {total/dt/1e9:.2f} GB/s (python/dlfs, {how})")
print(f"first samples in epoch order: {', '.join(index.names[:3])} ...")
PY

t_end=$(date +%s.%N)
/usr/bin/python3 - "$t_start" "$t_installed" "$t_built" "$t_generated" "$t_end" <<'PY'
import sys
start, installed, built, generated, end = map(float, sys.argv[1:])
print(f"quick start: {end - start:.0f} s in all: install {installed - start:.0f} s, build {built - installed:.0f} s, "
      f"sample dataset {generated - built:.0f} s, mount, load and reads {end - generated:.0f} s")
PY
