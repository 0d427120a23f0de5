#!/usr/bin/env bash
# SIGTERM, SIGINT and `dlfs-ctl unmount` each unmount cleanly and the daemon
# exits 0, also while loading and while a reader holds a file open.
source "$(dirname "$0")/lib.sh"
require_fuse

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 200 --size 256K --dirs 2 --seed 5 >/dev/null

for how in TERM INT ctl; do
  mnt="$WORK/mnt-$how"
  start_daemon "$mnt" "$WORK/dlfsd-$how.log" --backend "$WORK/data" --name ds --loader-threads 1 --extent-size 256KiB
  f=$(cd "$mnt/ds/raw" && find . -type f -print -quit)
  cat "$mnt/ds/raw/$f" >/dev/null
  exec 9<"$mnt/ds/raw/$f"   # a reader keeps a file open across the stop
  case $how in
    ctl) "$DLFS_CTL" --socket "$(ctl_socket "$mnt")" unmount >"$WORK/ctl.out" 2>&1 || { cat "$WORK/ctl.out"; fail "dlfs-ctl unmount failed"; }
         wait_exit "$DAEMON_PID"
         [ "$WAIT_RC" -eq 0 ] || fail "dlfsd exited $WAIT_RC after dlfs-ctl unmount" ;;
    *)   kill "-$how" "$DAEMON_PID"
         wait_exit "$DAEMON_PID"
         [ "$WAIT_RC" -eq 0 ] || fail "dlfsd exited $WAIT_RC after SIG$how" ;;
  esac
  exec 9<&-
  grep -q " $mnt fuse" /proc/mounts && fail "$mnt still mounted after $how"
  [ ! -e "$(ctl_socket "$mnt")" ] || fail "control socket left behind after $how"
  grep -q "unmounting" "$WORK/dlfsd-$how.log" || fail "no unmount line in the log after $how"
  log "$how: unmounted, exit 0"
done
pgrep -f "$WORK" >/dev/null && fail "a daemon is still running"
log "ok"
