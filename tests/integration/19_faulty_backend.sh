#!/usr/bin/env bash
# A backend that fails: dlfsd reads it through tests/tools/faulty_backend.cc
# (LD_PRELOAD), which fails every pread of bad_* files with EIO, returns short
# reads for short_* and delays slow_*. Twice: with memory for everything
# (the loader's path, small extents so failed extents sit next to good ones,
# then on-demand reads of what the loader could not load) and with a budget
# of a third of the dataset (epochs in rounds, raw/ on demand). Both times:
# EIO for the failing files, never zeros or holes, every other byte right,
# the failures counted in stats and named in the log, the daemon still serving.
source "$(dirname "$0")/lib.sh"
require_fuse
: "${FAULTY_BACKEND:?FAULTY_BACKEND must point at the faulty_backend module}"

CHECK=("$PYTHON" "$(dirname "$0")/check_faulty_backend.py")
"${CHECK[@]}" make "$WORK/backend"
size=$(du -sb "$WORK/backend" | cut -f1)
DAEMON_WRAP=(env LD_PRELOAD="$FAULTY_BACKEND" DLFS_FAULT_EIO="$WORK/backend/*/bad_*"
             DLFS_FAULT_SHORT="$WORK/backend/*/short_*" DLFS_FAULT_DELAY="$WORK/backend/*/slow_*"
             DLFS_FAULT_DELAY_MS=5 DLFS_FAULT_LOG="$WORK/faults.log")

wait_loaded() {  # MNT: until the load ended (done or failed)
  for _ in $(seq 1 300); do
    state=$(stat_field "$1" 's["datasets"][0]["load"]["state"]')
    [ "$state" != loading ] && return 0
    sleep 0.1
  done
  fail "load did not end"
}

log "memory for everything: loader, then on-demand reads"
start_daemon "$WORK/mnt1" "$WORK/d1.log" --backend "$WORK/backend" --name ds --extent-size 64KiB
wait_loaded "$WORK/mnt1"
[ "$(stat_field "$WORK/mnt1" 's["datasets"][0]["load"]["state"]')" = failed ] || fail "load state is not 'failed'"
failed=$(stat_field "$WORK/mnt1" 's["datasets"][0]["load"]["extents_failed"]')
[ "$failed" -ge 1 ] || fail "no failed extents counted"
"${CHECK[@]}" check "$WORK/mnt1" ds "$WORK/backend"
grep -q "bad_" "$WORK/d1.log" || fail "the log does not name a failing file"
stop_daemon "$DAEMON_PID" "$WORK/mnt1"

log "a third of the dataset in memory: epochs in rounds, raw/ on demand"
start_daemon "$WORK/mnt2" "$WORK/d2.log" --backend "$WORK/backend" --name ds --extent-size 64KiB \
  --memory-budget $((size / 3)) --round-chunk 64KiB
rounds=$(stat_field "$WORK/mnt2" 's["datasets"][0]["plan"]["rounds_per_epoch"]')
[ "$rounds" -ge 2 ] || fail "expected epochs in rounds, plan says $rounds round(s)"
"${CHECK[@]}" check "$WORK/mnt2" ds "$WORK/backend"
kill -0 "$DAEMON_PID" || fail "dlfsd died"
stop_daemon "$DAEMON_PID" "$WORK/mnt2"

log "direct I/O: the loader reads aligned files past the page cache; where the file system refuses, the ordinary way"
"$PYTHON" "$GEN_DATASET" files "$WORK/aligned" --count 16 --size 64K --dirs 2 --seed 19 >/dev/null
DAEMON_WRAP=()
start_daemon "$WORK/mnt3" "$WORK/d3.log" --backend "$WORK/aligned" --name ds --extent-size 256KiB
wait_loaded "$WORK/mnt3"
[ "$(stat_field "$WORK/mnt3" 's["datasets"][0]["load"]["state"]')" = done ] || fail "load of the aligned dataset failed"
[ "$(stat_field "$WORK/mnt3" 's["datasets"][0]["backend_direct_io"]["in_use"]')" = True ] ||
  fail "O_DIRECT not in use on $(findmnt -n -o FSTYPE -T "$WORK/aligned")"
direct=$(stat_field "$WORK/mnt3" 's["datasets"][0]["backend_direct_io"]["reads"]')
[ "$direct" -ge 16 ] || fail "only $direct direct reads for 16 aligned files"
same_tree "$WORK/aligned" "$WORK/mnt3/ds/raw"
stop_daemon "$DAEMON_PID" "$WORK/mnt3"
DAEMON_WRAP=(env LD_PRELOAD="$FAULTY_BACKEND" DLFS_FAULT_NO_DIRECT="$WORK/aligned/*" DLFS_FAULT_LOG="$WORK/faults.log")
start_daemon "$WORK/mnt4" "$WORK/d4.log" --backend "$WORK/aligned" --name ds --extent-size 256KiB
wait_loaded "$WORK/mnt4"
[ "$(stat_field "$WORK/mnt4" 's["datasets"][0]["load"]["state"]')" = done ] ||
  fail "a file system without direct I/O failed the load"
[ "$(stat_field "$WORK/mnt4" 's["datasets"][0]["backend_direct_io"]["in_use"]')" = False ] ||
  fail "O_DIRECT still tried after the file system refused it"
same_tree "$WORK/aligned" "$WORK/mnt4/ds/raw"
stop_daemon "$DAEMON_PID" "$WORK/mnt4"
log "direct I/O: $direct direct reads; refused: $(grep -c '^nodirect ' "$WORK/faults.log") refusal(s), every byte right"

log "a stat that fails and then works (a network file system under load): the scan tries again"
DAEMON_WRAP=(env LD_PRELOAD="$FAULTY_BACKEND" DLFS_FAULT_STAT_EIO="$WORK/aligned/*" DLFS_FAULT_STAT_TIMES=2
             DLFS_FAULT_LOG="$WORK/faults.log")
start_daemon "$WORK/mnt5" "$WORK/d5.log" --backend "$WORK/aligned" --name ds --extent-size 256KiB
wait_loaded "$WORK/mnt5"
[ "$(stat_field "$WORK/mnt5" 's["datasets"][0]["skipped"]["unreadable"]')" = 0 ] ||
  fail "files whose stat failed twice were left out: $(grep -m1 unreadable "$WORK/d5.log")"
same_tree "$WORK/aligned" "$WORK/mnt5/ds/raw"
stop_daemon "$DAEMON_PID" "$WORK/mnt5"
DAEMON_WRAP=(env LD_PRELOAD="$FAULTY_BACKEND" DLFS_FAULT_STAT_EIO="$WORK/aligned/*/*00.bin" DLFS_FAULT_STAT_TIMES=9
             DLFS_FAULT_LOG="$WORK/faults.log")
start_daemon "$WORK/mnt6" "$WORK/d6.log" --backend "$WORK/aligned" --name ds --extent-size 256KiB
gone=$(stat_field "$WORK/mnt6" 's["datasets"][0]["skipped"]["unreadable"]')
[ "$gone" -ge 1 ] || fail "files whose stat always fails were not reported unreadable"
grep -q "cannot stat: Input/output error" "$WORK/d6.log" || fail "the log does not say why a stat failed"
stop_daemon "$DAEMON_PID" "$WORK/mnt6"
log "stat: $(grep -c '^stat_eio ' "$WORK/faults.log") failed stats injected; passing ones retried, lasting ones ($gone) reported with their error"

for kind in eio short delay nodirect stat_eio; do
  grep -q "^$kind " "$WORK/faults.log" || fail "no '$kind' fault was injected: the shim did not take"
done
log "ok ($(grep -c '^eio ' "$WORK/faults.log") EIO, $(grep -c '^short ' "$WORK/faults.log") short, $(grep -c '^delay ' "$WORK/faults.log") slow preads injected)"
