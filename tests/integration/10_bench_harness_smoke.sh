#!/usr/bin/env bash
# The benchmark harness runs end to end (quick mode): it mounts dlfsd and the
# ceiling, runs fio against all three targets and the metadata walk, writes
# results.json and leaves nothing mounted. Ratios are not judged here.
source "$(dirname "$0")/lib.sh"
require_fuse
command -v fio >/dev/null || fail "fio is not installed (tools/install-deps.sh installs it)"
build_dir=$(dirname "$(dirname "$DLFSD")")
"$PYTHON" "$(dirname "$0")/../../tools/bench/run_bench.py" --quick --build "$build_dir" --workdir "$WORK/bench" \
  >"$WORK/bench.out" 2>&1 || { cat "$WORK/bench.out"; fail "run_bench.py failed"; }
tail -15 "$WORK/bench.out"
"$PYTHON" "$(dirname "$0")/check_bench_results.py" "$WORK/bench/results.json"
grep -q " $WORK/bench/" /proc/mounts && fail "the harness left a mount"
log "ok"
