#!/usr/bin/env bash
# Views drop their pages behind the reader (fs/kernel/drop_behind.h): after an
# epoch view is read through in order, the kernel's page cache holds only its
# last few MiB, the bytes are right (each member is its backend file, a second
# read from dlfsd's memory equals the first), and the stats count the drops.
# With --view-drop-behind 0 the whole view stays cached, with the same bytes.
source "$(dirname "$0")/lib.sh"
require_fuse
CHECK="$(dirname "$0")/check_drop_behind.py"

# 160 MiB in 640 files: a view several steps (32 MiB) longer than what is kept (16 MiB).
"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 640 --size 256K --dirs 4 --seed 34 >/dev/null

start_daemon "$WORK/mnt" "$WORK/dlfsd.log" --backend "$WORK/data" --name ds --seed 34
wait_loaded "$WORK/mnt"
"$PYTHON" "$CHECK" --mnt "$WORK/mnt" --backend "$WORK/data" --ctl "$DLFS_CTL" --socket "$(ctl_socket "$WORK/mnt")" \
  --expect dropped --epoch 0 | tee "$WORK/on.txt"
"$PYTHON" "$CHECK" --mnt "$WORK/mnt" --backend "$WORK/data" --ctl "$DLFS_CTL" --socket "$(ctl_socket "$WORK/mnt")" \
  --expect dropped --epoch 1 >/dev/null
stop_daemon "$DAEMON_PID" "$WORK/mnt"

start_daemon "$WORK/mnt2" "$WORK/dlfsd2.log" --backend "$WORK/data" --name ds --seed 34 --view-drop-behind 0
wait_loaded "$WORK/mnt2"
"$PYTHON" "$CHECK" --mnt "$WORK/mnt2" --backend "$WORK/data" --ctl "$DLFS_CTL" --socket "$(ctl_socket "$WORK/mnt2")" \
  --expect kept --epoch 0 | tee "$WORK/off.txt"
stop_daemon "$DAEMON_PID" "$WORK/mnt2"

[ "$(grep '^digest' "$WORK/on.txt")" = "$(grep '^digest' "$WORK/off.txt")" ] ||
  fail "epoch 0's view differs between drop-behind on and off"
log "ok"
