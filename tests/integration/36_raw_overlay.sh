#!/usr/bin/env bash
# raw/ under dlfsd's read-only overlay (fs/kernel/raw_overlay.h) through a real mount:
#  - by default (root) the overlay covers <mnt>/ds/raw, also with ',' and ':'
#    in the mountpoint's path (overlayfs's separators, escaped); raw bytes are
#    the backend's, open()'s isatty() never reaches dlfsd, the first cold read
#    of a file costs a LOOKUP and a getxattr (pushed there, no READ), the next
#    one nothing; views and their xattrs are as without it;
#  - a stop detaches the overlay with the mount, also while a reader holds a
#    raw file open through it;
#  - a dlfsd killed with its overlay mounted leaves a dead mount that the next
#    dlfsd at that mountpoint clears (overlay included) and mounts afresh;
#  - not while the dataset loads (a slowed backend): once the load is done;
#  - none with allow_other off (the overlay would let every user read);
#  - --raw-overlay off mounts nothing and open() sends its ioctl again.
source "$(dirname "$0")/lib.sh"
require_fuse
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || true
grep -qw overlay /proc/filesystems || skip "this kernel has no overlayfs"
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
check() { PYTHONPATH="$SRC/python" "$PYTHON" "$(dirname "$0")/check_raw_overlay.py" "$@"; }

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 400 --size 3K --dirs 4 --seed 36 >/dev/null
MNT="$WORK/mnt,with:separators"
first=$(cd "$WORK/data" && find . -type f -print -quit)

start_daemon "$MNT" "$WORK/dlfsd.log" --backend "$WORK/data" --name ds --seed 36
wait_loaded "$MNT"
for _ in $(seq 1 100); do grep -q " $MNT/ds/raw overlay" /proc/mounts && break; sleep 0.1; done
check --mnt "$MNT" --backend "$WORK/data" --ctl "$DLFS_CTL" --socket "$(ctl_socket "$MNT")" --part overlay

# A stop while a reader holds a raw file open through the overlay.
"$PYTHON" -c 'import sys, time; f = open(sys.argv[1], "rb"); print("open", flush=True); time.sleep(5)' \
  "$MNT/ds/raw/$first" > "$WORK/holder.out" &
holder=$!
for _ in $(seq 1 50); do grep -q open "$WORK/holder.out" && break; sleep 0.1; done
grep -q open "$WORK/holder.out" || fail "the holder could not open a raw file"
stop_daemon "$DAEMON_PID" "$MNT"
wait "$holder" 2>/dev/null || true
log "stopped with a raw file held open: nothing left mounted"

# Killed with the overlay mounted: the next dlfsd clears the dead mount.
start_daemon "$MNT" "$WORK/dlfsd2.log" --backend "$WORK/data" --name ds --seed 36
wait_loaded "$MNT"
for _ in $(seq 1 100); do grep -q " $MNT/ds/raw overlay" /proc/mounts && break; sleep 0.1; done
grep -q " $MNT/ds/raw overlay" /proc/mounts || fail "no overlay over raw/ after the second start"
kill -KILL "$DAEMON_PID"
wait_exit "$DAEMON_PID"
grep -q " $MNT/ds/raw overlay" /proc/mounts || fail "the killed daemon's overlay is gone already (nothing to clear)"
start_daemon "$MNT" "$WORK/dlfsd3.log" --backend "$WORK/data" --name ds --seed 36
wait_loaded "$MNT"
grep -q "unmounted a DLFS mount whose daemon died" "$WORK/dlfsd3.log" || fail "the dead mount was not cleared: $(cat "$WORK/dlfsd3.log")"
for _ in $(seq 1 100); do [ "$(grep -c " $MNT/ds/raw overlay" /proc/mounts)" -eq 1 ] && break; sleep 0.1; done
[ "$(grep -c " $MNT/ds/raw overlay" /proc/mounts)" -eq 1 ] || fail "want one overlay over raw/ after the restart: $(grep " $MNT/" /proc/mounts)"
cmp "$MNT/ds/raw/$first" "$WORK/data/$first" || fail "raw/$first differs after the restart"
stop_daemon "$DAEMON_PID" "$MNT"
log "killed with its overlay: the next dlfsd cleared the dead mount and mounted afresh"

# Not while the dataset loads (each backend pread delayed 15 ms here): the
# overlay comes once the load is done.
: "${FAULTY_BACKEND:?FAULTY_BACKEND must point at the faulty_backend module}"
DAEMON_WRAP=(env LD_PRELOAD="$FAULTY_BACKEND" DLFS_FAULT_DELAY="$WORK/data/*" DLFS_FAULT_DELAY_MS=15)
start_daemon "$WORK/mnt-slow" "$WORK/dlfsd-slow.log" --backend "$WORK/data" --name ds --seed 36 --extent-size 64KiB \
  --loader-threads 1
DAEMON_WRAP=()
state=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["datasets"][0]["load"]["state"])' \
  "$WORK/mnt-slow/.dlfs/stats")
[ "$state" = loading ] || fail "the slowed load is already '$state': nothing to check"
grep -q " $WORK/mnt-slow/ds/raw overlay" /proc/mounts && fail "the overlay was mounted while the dataset loads"
wait_loaded "$WORK/mnt-slow"
for _ in $(seq 1 100); do grep -q " $WORK/mnt-slow/ds/raw overlay" /proc/mounts && break; sleep 0.1; done
grep -q " $WORK/mnt-slow/ds/raw overlay" /proc/mounts || fail "no overlay over raw/ after the load"
stop_daemon "$DAEMON_PID" "$WORK/mnt-slow"
log "the overlay waited for the load"

# allow_other off: FUSE lets only root in, and the overlay (which reads with
# root's credentials) would let everyone through: none is mounted.
cat >"$WORK/private.toml" <<TOML
[daemon]
allow_other = false
[[dataset]]
name = "ds"
backend = "$WORK/data"
TOML
start_daemon "$WORK/mnt-private" "$WORK/dlfsd-private.log" --config "$WORK/private.toml"
wait_loaded "$WORK/mnt-private"
sleep 0.3
grep -q " $WORK/mnt-private/ds/raw " /proc/mounts && fail "an overlay was mounted over raw/ with allow_other off"
grep -q "allow_other is off" "$WORK/dlfsd-private.log" || fail "the log does not say why raw/ has no overlay"
"$PYTHON" -c 'import json, sys; o = json.load(open(sys.argv[1]))["fuse"]["raw_overlay"]; sys.exit(0 if o["mode"] == "off" and not o["mounted"] and "allow_other" in o["reason"] else 1)' \
  "$WORK/mnt-private/.dlfs/stats" || fail "stats: raw_overlay is not off with allow_other off"
stop_daemon "$DAEMON_PID" "$WORK/mnt-private"
log "allow_other off: no overlay"

start_daemon "$WORK/mnt-off" "$WORK/dlfsd-off.log" --backend "$WORK/data" --name ds --seed 36 --raw-overlay off
wait_loaded "$WORK/mnt-off"
check --mnt "$WORK/mnt-off" --backend "$WORK/data" --ctl "$DLFS_CTL" --socket "$(ctl_socket "$WORK/mnt-off")" --part off
stop_daemon "$DAEMON_PID" "$WORK/mnt-off"
log "ok"
