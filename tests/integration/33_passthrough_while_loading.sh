#!/usr/bin/env bash
# FUSE passthrough while a dataset loads (fs/kernel/backing_files.h), through a
# real mount: a raw file not in memory yet is read by the kernel from its
# backend file (its reads never reach dlfsd), with the backend's bytes, by
# read and by mmap, also opened twice at once and held open across the end
# of the load; a backend file changed since the scan is never handed over
# (EIO, as without passthrough); after the load no OPEN reaches dlfsd again
# and every backing file is closed. Then the same reads with
# --passthrough off, none of them passed through.
#
# The load takes seconds on purpose: dlfsd runs with the faulty backend
# module (LD_PRELOAD), which delays each of its preads of the dataset by
# 40 ms. The kernel's passthrough reads are not dlfsd's preads.
source "$(dirname "$0")/lib.sh"
require_fuse
: "${FAULTY_BACKEND:?FAULTY_BACKEND must point at the faulty_backend module}"
CHECK=("$PYTHON" "$(dirname "$0")/check_passthrough.py")

"${CHECK[@]}" make "$WORK/data"
DAEMON_WRAP=(env LD_PRELOAD="$FAULTY_BACKEND" DLFS_FAULT_DELAY="$WORK/data/*" DLFS_FAULT_DELAY_MS=40)

log "passthrough auto (the default; the backend is on a local file system)"
start_daemon "$WORK/mnt" "$WORK/dlfsd.log" --backend "$WORK/data" --name ds --extent-size 64KiB --loader-threads 2
rc=0
DLFS_SOCKET="$(ctl_socket "$WORK/mnt")" "${CHECK[@]}" on "$WORK/mnt" "$WORK/data" || rc=$?
[ "$rc" -eq 77 ] && { stop_daemon "$DAEMON_PID" "$WORK/mnt"; skip "this kernel offers no FUSE passthrough"; }
[ "$rc" -eq 0 ] || fail "passthrough checks failed (log: $WORK/dlfsd.log)"
grep -q "datasets loaded: raw files are served from memory only" "$WORK/dlfsd.log" ||
  fail "the log does not say when the passthrough window ended"
stop_daemon "$DAEMON_PID" "$WORK/mnt"

log "--passthrough off"
"${CHECK[@]}" make "$WORK/data2"
DAEMON_WRAP=(env LD_PRELOAD="$FAULTY_BACKEND" DLFS_FAULT_DELAY="$WORK/data2/*" DLFS_FAULT_DELAY_MS=40)
start_daemon "$WORK/mnt2" "$WORK/dlfsd2.log" --backend "$WORK/data2" --name ds --extent-size 64KiB \
  --loader-threads 2 --passthrough off
DLFS_SOCKET="$(ctl_socket "$WORK/mnt2")" "${CHECK[@]}" off "$WORK/mnt2" "$WORK/data2" || fail "--passthrough off checks failed"
stop_daemon "$DAEMON_PID" "$WORK/mnt2"
log "ok"
