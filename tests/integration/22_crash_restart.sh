#!/usr/bin/env bash
# Crash recovery. A dlfsd killed with SIGKILL leaves its mount dead (every
# request: ENOTCONN); started again with the same command line, with no manual
# step, it unmounts that dead mount itself (and logs it), mounts, and serves
# the backend's bytes. What must not be unmounted is refused and left as it
# was: a live daemon's mount, a stopped daemon's mount (it does not answer in
# time, but it is not dead), and a file system that is not DLFS (a tmpfs).
source "$(dirname "$0")/lib.sh"
require_fuse

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 400 --size 40K --size-jitter 0.5 --dirs 4 --seed 22 >/dev/null
MNT=$WORK/mnt
ARGS=(--backend "$WORK/data" --name ds --extent-size 256KiB)

# dlfs_mounts PATH: how many DLFS mounts the mount table lists at PATH.
dlfs_mounts() { awk -v m="$1" '$5 == m && / - fuse\.dlfs dlfs /' /proc/self/mountinfo | wc -l; }
# mount_ids PATH: the ids of every mount at PATH (whatever its type).
mount_ids() { awk -v m="$1" '$5 == m { print $1 }' /proc/self/mountinfo | tr '\n' ' '; }
# listing_errno PATH: "ok", or the errno name a listing of PATH fails with.
listing_errno() {
  "$PYTHON" -c 'import errno, os, sys
try:
    os.listdir(sys.argv[1]); print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))' "$1"
}
# second_dlfsd PATH: runs another dlfsd on PATH (the first's command line);
# it must exit non-zero within 30 s. Its output is left in SECOND_OUT.
second_dlfsd() {
  local rc=0
  SECOND_OUT=$(timeout 30 "$DLFSD" --mountpoint "$1" --control-socket "$(ctl_socket "$1")" "${ARGS[@]}" 2>&1) || rc=$?
  [ "$rc" -ne 0 ] || fail "a second dlfsd started on $1: $SECOND_OUT"
  [ "$rc" -ne 124 ] || fail "a second dlfsd on $1 hung (30 s)"
}

# restart_daemon LOG: start_daemon's command line again, after a crash. The
# dead mount's cached entries still show .dlfs/stats (and mount ids are
# reused), so it waits until the path lists again (the dead mount is gone)
# and has .dlfs/stats (the new mount is up).
restart_daemon() {
  local logf=$1
  "$DLFSD" --mountpoint "$MNT" --control-socket "$(ctl_socket "$MNT")" "${ARGS[@]}" >"$logf" 2>&1 &
  DAEMON_PID=$!
  DAEMON_PIDS+=("$DAEMON_PID")
  for _ in $(seq 1 300); do
    [ "$(listing_errno "$MNT")" = ok ] && [ -e "$MNT/.dlfs/stats" ] && return 0
    kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$logf" >&2; fail "dlfsd exited instead of mounting again"; }
    sleep 0.1
  done
  cat "$logf" >&2
  fail "dlfsd did not mount $MNT again within 30 s"
}

# ---- SIGKILL, then the same command line again -------------------------------
start_daemon "$MNT" "$WORK/d1.log" "${ARGS[@]}"
same_tree "$WORK/data" "$MNT/ds/raw"
kill -KILL "$DAEMON_PID"
wait_exit "$DAEMON_PID"
for _ in $(seq 1 50); do [ "$(listing_errno "$MNT")" = ENOTCONN ] && break; sleep 0.1; done
[ "$(listing_errno "$MNT")" = ENOTCONN ] || fail "after SIGKILL, listing $MNT gave $(listing_errno "$MNT"), not ENOTCONN"
[ "$(dlfs_mounts "$MNT")" = 1 ] || fail "the dead mount is not in the mount table as fuse.dlfs"
log "SIGKILL: $MNT is dead (ENOTCONN), still mounted"

restart_daemon "$WORK/d2.log"
grep -q "unmounted a DLFS mount whose daemon died" "$WORK/d2.log" || { cat "$WORK/d2.log"; fail "the restart did not log the dead mount it unmounted"; }
[ "$(dlfs_mounts "$MNT")" = 1 ] || fail "$(dlfs_mounts "$MNT") DLFS mounts at $MNT after the restart, not 1"
same_tree "$WORK/data" "$MNT/ds/raw"
log "restarted with the same command line: dead mount cleared, every file equals the backend"

# ---- a live mount is refused ------------------------------------------------
ids=$(mount_ids "$MNT")
second_dlfsd "$MNT"
echo "$SECOND_OUT" | grep -q "is busy: a running dlfsd serves it" || fail "live mount: unexpected refusal: $SECOND_OUT"
[ "$(mount_ids "$MNT")" = "$ids" ] || fail "the live mount changed under a refused second dlfsd"
same_tree "$WORK/data" "$MNT/ds/raw"
log "live mount refused: $(echo "$SECOND_OUT" | tail -1)"

# ---- a stopped daemon's mount does not answer: refused, within a bound ------
kill -STOP "$DAEMON_PID"
t0=$(date +%s%N)
second_dlfsd "$MNT"
took=$((($(date +%s%N) - t0) / 1000000))
kill -CONT "$DAEMON_PID"
echo "$SECOND_OUT" | grep -q "did not answer within" || fail "stopped daemon: unexpected refusal: $SECOND_OUT"
[ "$took" -lt 15000 ] || fail "the refusal of a stopped daemon's mount took $took ms"
[ "$(mount_ids "$MNT")" = "$ids" ] || fail "a stopped daemon's mount was unmounted"
same_tree "$WORK/data" "$MNT/ds/raw"
log "stopped daemon's mount refused in $took ms and kept; serves again after SIGCONT"
stop_daemon "$DAEMON_PID" "$MNT"

# ---- another file system is refused, named and left alone -------------------
FOREIGN=$WORK/foreign
mkdir -p "$FOREIGN"
mount -t tmpfs -o size=1m dlfs-test-tmpfs "$FOREIGN" || skip "cannot mount a tmpfs here"
CLEANUP_HOOKS+=("grep -q ' $FOREIGN ' /proc/mounts && umount -l '$FOREIGN'")
ids=$(mount_ids "$FOREIGN")
second_dlfsd "$FOREIGN"   # empty: the mount is the only reason to refuse
echo "$SECOND_OUT" | grep -q "is busy: a tmpfs file system (source 'dlfs-test-tmpfs')" ||
  fail "tmpfs: unexpected refusal: $SECOND_OUT"
[ "$(mount_ids "$FOREIGN")" = "$ids" ] || fail "the tmpfs was unmounted or covered"
[ "$(listing_errno "$FOREIGN")" = ok ] || fail "the tmpfs does not answer after the refusal"
umount "$FOREIGN"
log "tmpfs refused and left mounted: $(echo "$SECOND_OUT" | tail -1)"
log "ok"
