#!/usr/bin/env bash
# The Python client (python/dlfs, installed with pip) on real mounts: PyTorch DataLoaders with 2
# worker processes read the tar views of W = 2 ranks and get every sample
# exactly once per epoch, with the backend's bytes, in the planned order
# (also names longer than ustar allows); a resumed epoch gives the rest of
# the order; the map-style dataset over a fixed-record dataset's .bin views
# gives every record once with its sample id.
source "$(dirname "$0")/lib.sh"
require_fuse
"$PYTHON" -c 'import torch' 2>/dev/null || skip "python3-torch is not installed"
"$PYTHON" -m pip --version >/dev/null 2>&1 || skip "python3-pip is not installed"
SRC="$(cd "$(dirname "$0")/../.." && pwd)"

# The client as a user installs it (docs/python.md): pip, from a copy of the
# checkout (pip builds in the source directory), with Debian's setuptools.
cp -r "$SRC/python" "$WORK/pysrc"
"$PYTHON" -m pip install -q --no-build-isolation --no-deps --target "$WORK/site" "$WORK/pysrc" ||
  fail "pip install of python/ failed"

"$PYTHON" "$GEN_DATASET" files "$WORK/files" --count 1200 --size 3K --size-jitter 0.5 --dirs 6 --seed 3 >/dev/null
# Two more samples: one name split into ustar prefix + name, one that needs a GNU long name record.
long_dir="$WORK/files/$(printf 'p%.0s' {1..150})"
mkdir -p "$long_dir"
head -c 5000 /dev/urandom >"$long_dir/short_in_long_dir.bin"
head -c 7000 /dev/urandom >"$long_dir/$(printf 'n%.0s' {1..140}).bin"
start_daemon "$WORK/mnt" "$WORK/d.log" --backend "$WORK/files" --name ds --seed 9 --world-size 2

"$PYTHON" "$GEN_DATASET" fixed "$WORK/fixed" --records 3000 --record-size 1024 --files 3 --header 16 >/dev/null
start_daemon "$WORK/mntf" "$WORK/f.log" --backend "$WORK/fixed" --name fx --format fixed --record-size 1024 \
  --header-bytes 16 --seed 4 --world-size 2
wait_loaded "$WORK/mnt"
wait_loaded "$WORK/mntf"

PYTHONPATH="$WORK/site" "$PYTHON" "$(dirname "$0")/check_python_client.py" \
  "$WORK/mnt/ds" "$WORK/files" "$WORK/mntf/fx" "$WORK/fixed" || fail "the Python client on real views"
stop_daemon "$DAEMON_PID" "$WORK/mntf"
stop_daemon "${DAEMON_PIDS[0]}" "$WORK/mnt"
log "ok"
