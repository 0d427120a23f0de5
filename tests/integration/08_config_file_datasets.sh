#!/usr/bin/env bash
# One daemon, two datasets from a TOML config (one files, one fixed), with a
# memory budget that only the first fits: both trees equal their backends,
# the budget goes to datasets in config order, flags override the file.
source "$(dirname "$0")/lib.sh"
require_fuse

"$PYTHON" "$GEN_DATASET" files "$WORK/imgs" --count 200 --size 20K --dirs 4 --seed 8 >/dev/null
"$PYTHON" "$GEN_DATASET" fixed "$WORK/recs" --records 3000 --record-size 3073 --files 3 >/dev/null
imgs_bytes=$(find "$WORK/imgs" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
cat >"$WORK/job.toml" <<TOML
[daemon]
mountpoint = "$WORK/not-this-one"     # overridden by --mountpoint below
log_level = "info"
[cache]
memory_budget = "$((imgs_bytes + 1048576))"
extent_size = "1MiB"
[[dataset]]
name = "imgs"
backend = "$WORK/imgs"
[[dataset]]
name = "recs"
backend = "$WORK/recs"
format = "fixed"
record_size = 3073
TOML
start_daemon "$WORK/mnt" "$WORK/dlfsd.log" --config "$WORK/job.toml"
wait_loaded "$WORK/mnt"
[ "$(ls "$WORK/mnt" | tr '\n' ' ')" = "imgs recs " ] || fail "root lists $(ls "$WORK/mnt")"
same_tree "$WORK/imgs" "$WORK/mnt/imgs/raw"
same_tree "$WORK/recs" "$WORK/mnt/recs/raw"
[ "$(stat_field "$WORK/mnt" 's["datasets"][1]["samples"]')" = 3000 ] || fail "recs: wrong sample count"
imgs_resident=$(stat_field "$WORK/mnt" 's["datasets"][0]["resident_bytes"]')
recs_capacity=$(stat_field "$WORK/mnt" 's["datasets"][1]["capacity_bytes"]')
[ "$imgs_resident" = "$imgs_bytes" ] || fail "imgs should be fully resident ($imgs_resident of $imgs_bytes)"
[ "$recs_capacity" -le 1048576 ] || fail "recs got $recs_capacity bytes of memory, more than the budget left"
from_backend=$(stat_field "$WORK/mnt" 's["datasets"][1]["served"]["bytes_from_backend"]')
[ "$from_backend" -gt 0 ] || fail "recs beyond the budget should have been read from the backend"
stop_daemon "$DAEMON_PID" "$WORK/mnt"
log "ok"
