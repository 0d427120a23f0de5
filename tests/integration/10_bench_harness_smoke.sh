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
"$PYTHON" - "$WORK/bench/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["rows"], "no fio rows"
for row in r["rows"]:
    for t in ("dlfs", "ceiling", "backend"):
        assert row["cold_median_bps"][t] > 0 and row["warm_bps"][t] > 0, (row["workload"], t)
assert r["metadata"]["median_seconds"]["dlfs"] > 0
assert r["dlfs_memory"]["metadata_bytes_per_sample"] > 0
print("results.json: %d fio rows, metadata and memory figures present" % len(r["rows"]))
PY
grep -q " $WORK/bench/" /proc/mounts && fail "the harness left a mount"
log "ok"
