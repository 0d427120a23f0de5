#!/usr/bin/env bash
# Per-file FUSE overhead through a real mount: the kernel sends no OPEN,
# FLUSH or RELEASE (FUSE no-open), a raw file read a second time costs no
# request at all (dlfs.read_file) or one, the ioctl of Python's isatty()
# (open() with default buffering, counted as such), and the files whose
# bytes are made per reader (/.dlfs/stats, opportunistic .tar streams) are
# still fresh at every open, with their exact size known to stat, and do not
# pile up in the daemon. The first open() of a small raw file in memory costs
# no READ either: dlfsd pushes it into the page cache at the isatty().
# raw/ without its overlay (--raw-overlay off): the overlay answers isatty() in
# the kernel (36_raw_overlay tests that path); here the ioctl is what is tested.
source "$(dirname "$0")/lib.sh"
require_fuse
SRC="$(cd "$(dirname "$0")/../.." && pwd)"

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 400 --size 3K --dirs 4 --seed 30 >/dev/null
start_daemon "$WORK/mnt" "$WORK/dlfsd.log" --backend "$WORK/data" --name ds --extent-size 1MiB --raw-overlay off
wait_loaded "$WORK/mnt"
PYTHONPATH="$SRC/python" "$PYTHON" "$(dirname "$0")/check_no_open.py" --mnt "$WORK/mnt" --backend "$WORK/data" \
  --ctl "$DLFS_CTL" --socket "$(ctl_socket "$WORK/mnt")" --part plain
stop_daemon "$DAEMON_PID" "$WORK/mnt"

# The first open().read() of each file: pushed at its isatty() (the default,
# files up to 1 MiB), not pushed when off or when the files are larger.
for push in "default yes" "0 no" "2KiB no"; do
  set -- $push
  args=(); [ "$1" = default ] || args=(--raw-push-size "$1")
  start_daemon "$WORK/mnt-push" "$WORK/dlfsd-push-$1.log" --backend "$WORK/data" --name ds --extent-size 1MiB --raw-overlay off "${args[@]}"
  wait_loaded "$WORK/mnt-push"
  PYTHONPATH="$SRC/python" "$PYTHON" "$(dirname "$0")/check_no_open.py" --mnt "$WORK/mnt-push" --backend "$WORK/data" \
    --ctl "$DLFS_CTL" --socket "$(ctl_socket "$WORK/mnt-push")" --part push --pushed "$2"
  stop_daemon "$DAEMON_PID" "$WORK/mnt-push"
done

# Opportunistic order: each open of a .tar is its own stream.
start_daemon "$WORK/mnt2" "$WORK/dlfsd2.log" --backend "$WORK/data" --name ds --extent-size 1MiB --raw-overlay off \
  --order opportunistic
wait_loaded "$WORK/mnt2"
PYTHONPATH="$SRC/python" "$PYTHON" "$(dirname "$0")/check_no_open.py" --mnt "$WORK/mnt2" --backend "$WORK/data" \
  --ctl "$DLFS_CTL" --socket "$(ctl_socket "$WORK/mnt2")" --part opportunistic
stop_daemon "$DAEMON_PID" "$WORK/mnt2"
log "ok"
