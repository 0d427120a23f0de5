#!/usr/bin/env bash
# The loaders benchmark (tools/bench/loaders_bench.py, issue 33) runs end to end
# in quick mode on the local backend: DLFS's views (by sample and by batch),
# views read by webdataset and raw/, against plain files, Mosaic Streaming,
# WebDataset (1k and 10k buffers) and DALI's file and TFRecord readers (and
# FFCV when DLFS_FFCV_PYTHON names a Python with ffcv), on 2,000 x 3 KiB and
# 300 x 110 KiB samples converted into each format; check_loaders_bench.py checks its JSON (every variant, both
# epochs, every sample delivered, memory figures, shuffle measures in range,
# DLFS's orders uniform, a WebDataset buffer's not), then that nothing stayed
# mounted or running. Speeds are not judged. Skips (77) without the project's
# Python environment ($VENV_PYTHON: tools/install-deps.sh makes .venv).
source "$(dirname "$0")/lib.sh"
require_fuse
[ -n "${VENV_PYTHON:-}" ] && [ -x "$VENV_PYTHON" ] ||
  skip "no project Python environment at '${VENV_PYTHON:-}' (VENV_PYTHON; tools/install-deps.sh makes .venv)"
"$VENV_PYTHON" -c 'import torch, webdataset, streaming, nvidia.dali' 2>/dev/null ||
  skip "$VENV_PYTHON lacks torch, webdataset, streaming or nvidia.dali (tools/install-deps.sh installs them)"
bench=$(dirname "$0")/../../tools/bench
CLEANUP_HOOKS+=(leftovers_in_work)
build_dir=$(dirname "$(dirname "$DLFSD")")
"$PYTHON" "$bench/loaders_bench.py" --quick --backends local --build "$build_dir" --python "$VENV_PYTHON" \
  --workdir "$WORK/bench" --json "$WORK/loaders.json" --plots "$WORK" >"$WORK/bench.out" 2>&1 ||
  { cat "$WORK/bench.out"; fail "loaders_bench.py failed"; }
sed -n '/^Loaders, /,$p' "$WORK/bench.out"
png=
"$PYTHON" -c 'import matplotlib' 2>/dev/null && png=$WORK/loaders_vs_peers.png
"$PYTHON" "$(dirname "$0")/check_loaders_bench.py" "$WORK/loaders.json" --backends local ${png:+--png "$png"}
grep -qE " $WORK/bench/" /proc/mounts && fail "the benchmark left a mount: $(grep " $WORK/bench/" /proc/mounts)"
procs=$(pgrep -a -f "$WORK/" || true)
[ -z "$procs" ] || fail "the benchmark left processes running: $procs"
log "ok"
