#!/usr/bin/env bash
# Datasets larger than memory (R < 1): the epoch is served in rounds loaded
# while the previous one is read. Every sample once per epoch across ranks,
# right bytes, with ranks read concurrently; the per-round timeline in stats;
# R from the memory budget; a min_randomization refusal that names the memory.
source "$(dirname "$0")/lib.sh"
require_fuse
CHECK="$(dirname "$0")/check_views.py"

"$PYTHON" "$GEN_DATASET" fixed "$WORK/fixed" --records 6007 --record-size 3073 --files 4 --header 16 >/dev/null
common=(--backend "$WORK/fixed" --name c --format fixed --record-size 3073 --header-bytes 16 --seed 4 --round-chunk 64K)

for R in 0.5 0.25; do
  start_daemon "$WORK/mnt" "$WORK/r$R.log" "${common[@]}" --shuffle-ratio $R
  rounds=$(stat_field "$WORK/mnt" 's["datasets"][0]["plan"]["rounds_per_epoch"]')
  [ "$rounds" -ge 2 ] || fail "R=$R: expected several rounds per epoch, got $rounds"
  rl=$(stat_field "$WORK/mnt" 's["datasets"][0]["plan"]["randomization_level"]')
  "$PYTHON" -c "import sys; sys.exit(0 if 0.5 < $rl < 1 else 1)" || fail "R=$R: randomization level $rl out of (0.5, 1)"
  "$PYTHON" "$CHECK" "$WORK/mnt" c "$WORK/fixed" --format fixed --record-size 3073 --header-bytes 16 \
    --samples 6007 --epochs 0,1 --world-sizes 1,2 --threads 4 || fail "R=$R: views"
  # Both ranks of W=2 streamed at once, as two trainers would.
  "$PYTHON" "$(dirname "$0")/concurrent_rank_streams.py" "$WORK/mnt/c/epochs/2/2" "$WORK/fixed" --samples 6007 \
    --world-size 2 --record-size 3073 --header-bytes 16 || fail "R=$R: concurrent rank streams"
  loads=$(stat_field "$WORK/mnt" 'len([e for e in s["datasets"][0]["rounds"]["timeline"] if e["load_end_s"] > 0])')
  [ "$loads" -ge 4 ] || fail "R=$R: only $loads round loads in the timeline"
  failed=$(stat_field "$WORK/mnt" 'sum(e["failed"] for e in s["datasets"][0]["rounds"]["timeline"])')
  [ "$failed" = 0 ] || fail "R=$R: $failed round loads failed"
  stop_daemon "$DAEMON_PID" "$WORK/mnt"
done

# R from the memory budget: 8 MiB for an 18 MiB dataset gives rounds of 4 MiB.
start_daemon "$WORK/mnt" "$WORK/budget.log" "${common[@]}" --memory-budget 8MiB
ratio=$(stat_field "$WORK/mnt" 's["datasets"][0]["plan"]["shuffle_ratio"]')
"$PYTHON" -c "import sys; sys.exit(0 if 0.15 < $ratio < 0.3 else 1)" || fail "R from an 8 MiB budget is $ratio"
"$PYTHON" "$CHECK" "$WORK/mnt" c "$WORK/fixed" --format fixed --record-size 3073 --header-bytes 16 \
  --samples 6007 --epochs 0 --world-sizes 3 --threads 2 >/dev/null || fail "views with R from the budget"
stop_daemon "$DAEMON_PID" "$WORK/mnt"

# Nothing resident (budget 0): streams are fed by their read-ahead rings.
start_daemon "$WORK/mnt" "$WORK/zero.log" "${common[@]}" --memory-budget 0
"$PYTHON" "$CHECK" "$WORK/mnt" c "$WORK/fixed" --format fixed --record-size 3073 --header-bytes 16 \
  --samples 6007 --epochs 0 --world-sizes 2 --threads 2 >/dev/null || fail "views with nothing resident"
hits=$(stat_field "$WORK/mnt" 's["datasets"][0]["views"]["epochs"]["readahead_hits"]')
[ "$hits" -gt 1000 ] || fail "read-ahead served only $hits samples of a sequential stream"
log "read-ahead: $hits samples from the rings, $(stat_field "$WORK/mnt" 's["datasets"][0]["views"]["epochs"]["backend_reads"]') read by the reader"
stop_daemon "$DAEMON_PID" "$WORK/mnt"

# Demanding more randomness than the memory allows: refused, naming the memory.
rc=0
out=$(timeout 30 "$DLFSD" --mountpoint "$WORK/mnt" --control-socket "$WORK/x.sock" "${common[@]}" \
  --shuffle-ratio 0.1 --min-randomization 0.999 2>&1) || rc=$?
[ "$rc" = 2 ] || fail "min_randomization not met should exit 2, got $rc: $out"
grep -q "min_randomization" <<<"$out" || fail "refusal does not name min_randomization: $out"
grep -q "memory budget of at least" <<<"$out" || fail "refusal does not name the memory needed: $out"
grep -q " $WORK/mnt fuse" /proc/mounts && fail "mounted despite the refusal"
log "ok"
