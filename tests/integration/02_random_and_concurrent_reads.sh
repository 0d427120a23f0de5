#!/usr/bin/env bash
# Random offsets and sizes from 16 threads, and 8 concurrent whole-tree readers,
# fully resident and with a memory budget of a quarter of the dataset (so that
# reads mix memory and backend bytes, even inside one request).
source "$(dirname "$0")/lib.sh"
require_fuse

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 400 --size 600K --size-jitter 0.99 --dirs 4 --seed 2 >/dev/null
bytes=$(du -sb "$WORK/data" | cut -f1)

for budget in "100%" "$((bytes / 4))"; do
  mnt="$WORK/mnt-$(echo "$budget" | tr -d '%')"
  start_daemon "$mnt" "$WORK/dlfsd-$budget.log" --backend "$WORK/data" --name ds --extent-size 256KiB --memory-budget "$budget"
  log "budget $budget: random reads while loading"
  "$PYTHON" "$(dirname "$0")/random_reads.py" "$WORK/data" "$mnt/ds/raw" --threads 16 --reads 200 --seed 3
  wait_loaded "$mnt"
  log "budget $budget: random reads after loading"
  "$PYTHON" "$(dirname "$0")/random_reads.py" "$WORK/data" "$mnt/ds/raw" --threads 16 --reads 200 --seed 4
  log "budget $budget: 8 concurrent whole-tree readers"
  pids=()
  for i in $(seq 1 8); do
    (cd "$mnt/ds/raw" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum >"$WORK/sums-$i") &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || fail "a concurrent reader failed"; done
  (cd "$WORK/data" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum >"$WORK/sums-backend")
  for i in $(seq 1 8); do cmp -s "$WORK/sums-$i" "$WORK/sums-backend" || fail "concurrent reader $i saw different bytes"; done
  if [ "$budget" != "100%" ]; then
    from_backend=$(stat_field "$mnt" 's["datasets"][0]["served"]["bytes_from_backend"]')
    [ "$from_backend" -gt 0 ] || fail "budget $budget: expected some bytes from the backend"
    resident=$(stat_field "$mnt" 's["datasets"][0]["resident_bytes"]')
    [ "$resident" -le "$budget" ] || fail "resident $resident exceeds budget $budget"
  fi
  stop_daemon "$DAEMON_PID" "$mnt"
done
log "ok"
