#!/usr/bin/env bash
# A backend that changes under the mount (cache/changed_files.h has the rule).
# The memory budget holds only the first third of the dataset. After the load,
# four backend files change: a resident one and one straddling the end of
# the resident part are rewritten in place (same size, mtime a minute on),
# one on the backend only grows, one is deleted. Reads give the scanned bytes
# (the resident file) or EIO (the others: never new bytes, never a mix of
# memory and a changed backend); every other file keeps serving; the log,
# stats, `dlfs-ctl status` and `dlfs-ctl verify` name the changed files.
source "$(dirname "$0")/lib.sh"
require_fuse
CHECK="$(dirname "$0")/check_backend_changes.py"

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 48 --size 256K --size-jitter 0.5 --dirs 3 --seed 17 >/dev/null
# About 12 MiB in 1 MiB extents, 4 MiB of it in memory; --shuffle-ratio 1:
# no rounds, so the budget goes to the storage buffer.
start_daemon "$WORK/mnt" "$WORK/dlfsd.log" --backend "$WORK/data" --name ds --extent-size 1MiB \
  --memory-budget 4MiB --shuffle-ratio 1
wait_loaded "$WORK/mnt"
[ "$(stat_field "$WORK/mnt" 's["datasets"][0]["capacity_bytes"]')" = $((4 << 20)) ] || fail "capacity is not 4 MiB"
cp -a "$WORK/data" "$WORK/scanned"
mapfile -t picked < <("$PYTHON" "$CHECK" pick "$WORK/mnt" "$WORK/data")
resident=${picked[0]} straddle=${picked[1]} grown=${picked[2]} gone=${picked[3]}
log "resident: $resident, straddling: $straddle, on the backend: $grown (grows), $gone (deleted)"

"$PYTHON" "$CHECK" rewrite "$WORK/data/$resident" --same-size
"$PYTHON" "$CHECK" rewrite "$WORK/data/$straddle" --same-size
"$PYTHON" "$CHECK" rewrite "$WORK/data/$grown" --grow
rm "$WORK/data/$gone"
sync; echo 3 >/proc/sys/vm/drop_caches

log "reading every file: scanned bytes or EIO"
"$PYTHON" "$CHECK" read "$WORK/mnt" "$WORK/scanned" --eio "$straddle" "$grown" "$gone"
"$PYTHON" "$CHECK" stats "$WORK/mnt" --count 3 --changed "$straddle:mtime" "$grown:size" "$gone:vanished"
for f in "$straddle" "$grown" "$gone"; do
  grep -q "\[ds\] backend file '$f' changed since the scan" "$WORK/dlfsd.log" || fail "the log does not name $f"
done
sock=$(ctl_socket "$WORK/mnt")
"$DLFS_CTL" --socket "$sock" status | tee "$WORK/status.txt"
grep -q "3 backend file(s) changed since the scan" "$WORK/status.txt" || fail "status does not count the changed files"
grep -q "$grown: size" "$WORK/status.txt" || fail "status does not name $grown"

# verify reads the resident extents' backend bytes: it finds the resident
# file changed and says so (exit 1), naming it as changed, not as corrupt.
rc=0; "$DLFS_CTL" --socket "$sock" verify >"$WORK/verify.txt" 2>&1 || rc=$?
cat "$WORK/verify.txt"
[ "$rc" -eq 1 ] || fail "verify exited $rc with changed backend files (want 1)"
grep -q "^CHANGED: ds: 4 backend file(s) changed" "$WORK/verify.txt" || fail "verify does not count 4 changed files"
grep -q "  $resident: .*mtime" "$WORK/verify.txt" || fail "verify does not name $resident"
if grep -q "MISMATCH" "$WORK/verify.txt"; then fail "verify calls a changed backend a mismatch"; fi
"$PYTHON" "$CHECK" stats "$WORK/mnt" --count 4 --changed "$resident:mtime"

# Known changed now, the resident file still serves its scanned bytes; the
# daemon keeps serving everything else, and stops cleanly.
sync; echo 3 >/proc/sys/vm/drop_caches
"$PYTHON" "$CHECK" read "$WORK/mnt" "$WORK/scanned" --eio "$straddle" "$grown" "$gone"
stop_daemon "$DAEMON_PID" "$WORK/mnt"
log "ok"
