#!/usr/bin/env bash
# A stop while the raw overlay (fs/kernel/raw_overlay.h) is being mounted:
# dlfsd must exit 0 and leave nothing mounted, not hang. The overlay's mount
# reads xattrs of the FUSE directory below it; once dlfsd's FUSE loop has
# ended no one answers them, and with FUSE over io_uring the unmount alone
# does not end the connection: the mounting thread waited, past SIGKILL, for
# ever, and the overlay's superblock it held blocked every sync(2) on the
# machine (a CI run of 33_passthrough_while_loading). dlfsd now aborts the
# connection (fs/kernel/fuse_connection.h). The test hook
# DLFS_TEST_ONLY_HOLD_OVERLAY_XATTRS leaves those getxattrs unanswered, so the
# mount is certain to be in flight at the stop.
source "$(dirname "$0")/lib.sh"
require_fuse
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || true
grep -qw overlay /proc/filesystems || skip "this kernel has no overlayfs"

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 50 --size 2K --seed 58 >/dev/null
DAEMON_WRAP=(env DLFS_TEST_ONLY_HOLD_OVERLAY_XATTRS=1)
start_daemon "$WORK/mnt" "$WORK/dlfsd.log" --backend "$WORK/data" --name ds
wait_loaded "$WORK/mnt"

# mount_thread: a thread of dlfsd inside overlayfs's mount, waiting on FUSE.
mount_thread() {
  local t
  for t in /proc/"$DAEMON_PID"/task/*; do
    grep -q "ovl_fill_super" "$t/stack" 2>/dev/null && { basename "$t"; return 0; }
  done
  return 1
}
for _ in $(seq 1 100); do mount_thread >/dev/null && break; sleep 0.1; done
tid=$(mount_thread) || { cat "$WORK/dlfsd.log" >&2; fail "no thread of dlfsd is mounting the overlay (the hook did not hold it)"; }
log "thread $tid of dlfsd waits in overlayfs's mount on the FUSE mount; stopping dlfsd"

# The mount's FUSE connection (the minor of its device): to unwedge the
# machine below if the stop fails (the mount is gone from the table by then).
fusectl_before=$(grep -c " /sys/fs/fuse/connections fusectl " /proc/mounts || true)
conn=$(awk -v m="$WORK/mnt" '$5 == m {split($3, d, ":"); print d[2]}' /proc/self/mountinfo | head -n 1)
kill -TERM "$DAEMON_PID"
for _ in $(seq 1 150); do [ -d "/proc/$DAEMON_PID/task/$tid" ] || break; sleep 0.1; done
if [ -d "/proc/$DAEMON_PID/task/$tid" ]; then
  # Unwedge the machine before failing: the thread would never end.
  [ "$fusectl_before" != 0 ] || mount -t fusectl none /sys/fs/fuse/connections 2>/dev/null || true
  [ -n "$conn" ] && echo 1 >"/sys/fs/fuse/connections/$conn/abort" 2>/dev/null
  [ "$fusectl_before" != 0 ] || umount /sys/fs/fuse/connections 2>/dev/null || true
  cat "$WORK/dlfsd.log" >&2
  fail "15 s after SIGTERM dlfsd's overlay mount still waits on its own FUSE mount"
fi
wait_exit "$DAEMON_PID" 15
[ "$WAIT_RC" -eq 0 ] || { cat "$WORK/dlfsd.log" >&2; fail "dlfsd exited with $WAIT_RC after SIGTERM"; }
! grep -q " $WORK/mnt" /proc/mounts || fail "left mounted: $(grep " $WORK/mnt" /proc/mounts)"
grep -q "aborted FUSE connection" "$WORK/dlfsd.log" || { cat "$WORK/dlfsd.log" >&2; fail "the log does not say the connection was aborted"; }
[ "$(grep -c " /sys/fs/fuse/connections fusectl " /proc/mounts || true)" = "$fusectl_before" ] ||
  fail "dlfsd did not leave fusectl as it found it (mounted $fusectl_before times before, now: $(grep fusectl /proc/mounts))"
log "ok: dlfsd aborted its FUSE connection, exited 0 and left nothing mounted"
