#!/usr/bin/env bash
# Opportunistic order (DeepIO-Opp): with about half the dataset resident (a
# budget too small for rounds), each rank's tar stream yields whichever of the
# next planned samples is ready first, so resident samples move ahead of
# backend ones. Every sample of the rank still comes exactly once, with the
# right bytes, never more than the window away from its planned position; a
# re-read of the open stream returns the same bytes. Read-ahead is off for
# the daemon checked for samples served ahead (with it on, whether a sample is
# fetched before it is asked for is a race: every other check still holds).
source "$(dirname "$0")/lib.sh"
require_fuse
W=32
"$PYTHON" "$GEN_DATASET" fixed "$WORK/fixed" --records 4001 --record-size 3073 --files 2 --header 16 >/dev/null
for readahead in on off; do
flags=(); [ $readahead = off ] && flags=(--no-readahead)
start_daemon "$WORK/mnt-$readahead" "$WORK/d-$readahead.log" --backend "$WORK/fixed" --name c --format fixed \
  --record-size 3073 --header-bytes 16 --seed 8 --memory-budget 6M --extent-size 1M --round-chunk 16M --order opportunistic \
  --opportunistic-window $W "${flags[@]}"
wait_loaded "$WORK/mnt-$readahead"
"$PYTHON" "$(dirname "$0")/check_opportunistic.py" "$WORK/mnt-$readahead/c/epochs/0/2" "$WORK/fixed" $W $readahead \
  --world-size 2 --record-size 3073 --header-bytes 16 || fail "opportunistic streams (read-ahead $readahead)"
done
log "ok"
