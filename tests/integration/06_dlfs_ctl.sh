#!/usr/bin/env bash
# dlfs-ctl against a live daemon: status and stats (human and --json), verify
# passes on a clean load and names the extent after the backend changes under
# the daemon; the socket is refused to other users.
source "$(dirname "$0")/lib.sh"
require_fuse

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 300 --size 64K --dirs 3 --seed 6 >/dev/null
start_daemon "$WORK/mnt" "$WORK/dlfsd.log" --backend "$WORK/data" --name ds --extent-size 1MiB
wait_loaded "$WORK/mnt"
sock=$(ctl_socket "$WORK/mnt")
ctl() { "$DLFS_CTL" --socket "$sock" "$@"; }

ctl status | tee "$WORK/status.txt"
grep -q "ds" "$WORK/status.txt" || fail "status does not list the dataset"
CHECK_JSON="$(dirname "$0")/check_ctl_json.py"
ctl status --json | "$PYTHON" "$CHECK_JSON" status --name ds
cat "$WORK/mnt/ds/raw/$(cd "$WORK/data" && find . -type f -print -quit)" >/dev/null
ctl stats --json | "$PYTHON" "$CHECK_JSON" stats --samples 300
ctl stats >"$WORK/stats.txt"
# One row per surface (raw, epochs), none for what is about them (the view ids).
grep -Eq '^ds +raw ' "$WORK/stats.txt" || { cat "$WORK/stats.txt"; fail "dlfs-ctl stats shows no raw/ row"; }
grep -Eq '^ds +ids ' "$WORK/stats.txt" && { cat "$WORK/stats.txt"; fail "dlfs-ctl stats shows the view ids as a view"; }

ctl verify | tee "$WORK/verify.txt"
grep -qi "ok" "$WORK/verify.txt" || fail "verify did not report ok"
ctl verify --json | "$PYTHON" "$CHECK_JSON" verify

# Change one byte of a backend file (same size): verify must fail and say where.
f=$(cd "$WORK/data" && find . -type f | LC_ALL=C sort | sed -n 100p)
printf '\xff' | dd of="$WORK/data/$f" bs=1 seek=1000 conv=notrunc status=none
rc=0; ctl verify >"$WORK/verify-bad.txt" 2>&1 || rc=$?
cat "$WORK/verify-bad.txt"
[ "$rc" -eq 1 ] || fail "verify exited $rc on a changed backend (want 1)"
grep -qi "backend" "$WORK/verify-bad.txt" || fail "verify did not say the backend differs"

# The mount keeps serving what it loaded; stats still answer.
ctl status >/dev/null

# Another user is refused by the control socket (root-only 0600 socket, peer check).
if id nobody >/dev/null 2>&1; then
  chmod 755 "$WORK"
  rc=0; out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups "$DLFS_CTL" --socket "$sock" status 2>&1) || rc=$?
  [ "$rc" -ne 0 ] || fail "user nobody could use the control socket"
  grep -qi "permission denied" <<<"$out" || fail "expected permission denied, got: $out"
fi

# Without a daemon: a clear error and exit 2.
rc=0; out=$("$DLFS_CTL" --socket "$WORK/none.sock" status 2>&1) || rc=$?
[ "$rc" -eq 2 ] || fail "dlfs-ctl without daemon exited $rc (want 2)"
grep -q "none.sock" <<<"$out" || fail "error does not name the socket: $out"

stop_daemon "$DAEMON_PID" "$WORK/mnt"
log "ok"
