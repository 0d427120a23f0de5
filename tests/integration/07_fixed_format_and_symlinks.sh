#!/usr/bin/env bash
# A fixed-record dataset (CIFAR-10 binary style) and a tree with symlinks and a
# fifo: the raw view equals the backend, the sample count is right, symlinks
# (also ones pointing out of the root) and special files are skipped, not followed.
source "$(dirname "$0")/lib.sh"
require_fuse

"$PYTHON" "$GEN_DATASET" fixed "$WORK/fixed" --records 5000 --record-size 3073 --files 5 --header 16 >/dev/null
start_daemon "$WORK/mnt1" "$WORK/fixed.log" --backend "$WORK/fixed" --name cifar --format fixed --record-size 3073 --header-bytes 16
same_tree "$WORK/fixed" "$WORK/mnt1/cifar/raw"
[ "$(stat_field "$WORK/mnt1" 's["datasets"][0]["samples"]')" = 5000 ] || fail "fixed: wrong sample count"
[ "$(stat_field "$WORK/mnt1" 's["datasets"][0]["format"]')" = fixed ] || fail "fixed: wrong format"
stop_daemon "$DAEMON_PID" "$WORK/mnt1"

"$PYTHON" "$GEN_DATASET" files "$WORK/tree" --count 50 --size 2K --dirs 2 --seed 7 >/dev/null
mkdir -p "$WORK/outside"; echo secret >"$WORK/outside/secret.txt"
ln -s "$WORK/outside" "$WORK/tree/escape_dir"
ln -s "$WORK/outside/secret.txt" "$WORK/tree/escape_file"
mkfifo "$WORK/tree/a_fifo"
start_daemon "$WORK/mnt2" "$WORK/tree.log" --backend "$WORK/tree" --name t
for n in escape_dir escape_file a_fifo; do
  [ ! -e "$WORK/mnt2/t/raw/$n" ] || fail "$n should be skipped"
done
[ "$(stat_field "$WORK/mnt2" 's["datasets"][0]["skipped"]["symlinks"]')" = 2 ] || fail "symlinks not counted"
[ "$(stat_field "$WORK/mnt2" 's["datasets"][0]["skipped"]["special"]')" = 1 ] || fail "fifo not counted"
[ "$(stat_field "$WORK/mnt2" 's["datasets"][0]["samples"]')" = 50 ] || fail "wrong sample count with symlinks"
grep -qi "symlink" "$WORK/tree.log" || fail "skipped symlinks not reported in the log"
stop_daemon "$DAEMON_PID" "$WORK/mnt2"
log "ok"
