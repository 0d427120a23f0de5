#!/usr/bin/env bash
# Epoch views, whole dataset in memory (R = 1): tar (Python's tarfile and GNU
# tar), bin, index, directory views and seeks agree with the backend;
# every sample once per epoch across ranks (pad and drop, N prime and N < W);
# the same orders after a restart and in another process; xattrs; dlfs-ctl
# plan and shuffle-report.
source "$(dirname "$0")/lib.sh"
require_fuse
CHECK="$(dirname "$0")/check_views.py"

# Files of uneven sizes, one name long enough for a GNU long-name record and
# one that needs ustar's prefix field. 997 samples: prime.
"$PYTHON" "$GEN_DATASET" files "$WORK/tree" --count 995 --size 3K --size-jitter 0.6 --dirs 7 --seed 5 >/dev/null
long_dir="$WORK/tree/class_0001/$(printf 'd%.0s' $(seq 1 120))"
mkdir -p "$long_dir"
head -c 5000 /dev/urandom >"$long_dir/$(printf 'n%.0s' $(seq 1 90)).bin"
head -c 777 /dev/urandom >"$WORK/tree/class_0002/$(printf 'x%.0s' $(seq 1 150)).bin"
N=997

start_daemon "$WORK/mnt" "$WORK/d1.log" --backend "$WORK/tree" --name t --seed 42 --world-size 3
"$PYTHON" "$CHECK" "$WORK/mnt" t "$WORK/tree" --samples $N --epochs 0,1 --world-sizes 1,3,4 --tar-tool \
  --digest "$WORK/digest1" || fail "views of a files dataset"
# N < W: 1009 ranks of 997 samples, pad: every rank one sample.
[ "$(head -1 "$WORK/mnt/t/epochs/2/1009/1008.index" | grep -o 'samples=[0-9]*')" = samples=1 ] ||
  fail "N < W: a rank should get one (padded) sample"
# Listings: the configured world size, epochs_listed epochs.
[ "$(ls "$WORK/mnt/t/epochs")" = 0 ] || fail "epochs/ should list epoch 0 only"
[ "$(ls "$WORK/mnt/t/epochs/0")" = 3 ] || fail "epochs/0 should list world size 3"
[ "$(ls "$WORK/mnt/t/epochs/0/3" | wc -l)" = 9 ] || fail "epochs/0/3 should list 3 x (dir, index, tar)"
[ ! -e "$WORK/mnt/t/epochs/0/3/3.tar" ] || fail "rank 3 of 3 must not exist"
[ ! -e "$WORK/mnt/t/epochs/0/3/0.bin" ] || fail "a files dataset has no .bin view"
[ ! -e "$WORK/mnt/t/epochs/007" ] || fail "epoch names are canonical decimals"
[ "$("$PYTHON" -c 'import os,sys; print(os.getxattr(sys.argv[1], "user.dlfs.seed").decode())' "$WORK/mnt/t/epochs/0/3/0.tar")" = 42 ] ||
  fail "xattr user.dlfs.seed"
# dlfs-ctl plan agrees with the index.
sock=$(ctl_socket "$WORK/mnt")
plan=$("$DLFS_CTL" --socket "$sock" plan --epoch 1 --world-size 3 --rank 2 --show 5) || fail "dlfs-ctl plan failed"
grep -q "seed  *42" <<<"$plan" || fail "plan does not print the seed: $plan"
first=$(echo "$plan" | sed -n 's/^first samples: //p')
want=$(awk -F'\t' 'NR>1 && NR<=6 {printf "%s%s", sep, $2; sep=" "}' "$WORK/mnt/t/epochs/1/3/2.index")
[ "$first" = "$want" ] || fail "plan's first samples ($first) differ from the index ($want)"
report=$("$DLFS_CTL" --socket "$sock" shuffle-report --epochs 4) || fail "dlfs-ctl shuffle-report failed"
grep -q "position spread" <<<"$report" || fail "shuffle-report prints no metrics: $report"
"$DLFS_CTL" --socket "$sock" plan --rank 5 --world-size 3 >/dev/null 2>&1 && fail "plan accepted rank 5 of 3"
stop_daemon "$DAEMON_PID" "$WORK/mnt"

# Restart: the same orders (another process, same seed).
start_daemon "$WORK/mnt" "$WORK/d2.log" --backend "$WORK/tree" --name t --seed 42
"$PYTHON" "$CHECK" "$WORK/mnt" t "$WORK/tree" --samples $N --epochs 0,1 --world-sizes 1,3,4 --threads 2 \
  --digest "$WORK/digest2" >/dev/null || fail "views after restart"
cmp -s "$WORK/digest1" "$WORK/digest2" || fail "orders differ after a restart with the same seed"
stop_daemon "$DAEMON_PID" "$WORK/mnt"
# Another seed: other orders.
start_daemon "$WORK/mnt" "$WORK/d3.log" --backend "$WORK/tree" --name t --seed 43 --remainder drop
"$PYTHON" "$CHECK" "$WORK/mnt" t "$WORK/tree" --samples $N --epochs 0 --world-sizes 1,3,4 --remainder drop \
  --threads 2 >/dev/null || fail "views with remainder drop"
stop_daemon "$DAEMON_PID" "$WORK/mnt"

# Fixed-length records: the .bin view too.
"$PYTHON" "$GEN_DATASET" fixed "$WORK/fixed" --records 3001 --record-size 3073 --files 3 --header 16 >/dev/null
start_daemon "$WORK/mnt2" "$WORK/f.log" --backend "$WORK/fixed" --name c --format fixed --record-size 3073 \
  --header-bytes 16 --seed 9
"$PYTHON" "$CHECK" "$WORK/mnt2" c "$WORK/fixed" --format fixed --record-size 3073 --header-bytes 16 \
  --samples 3001 --epochs 0,3 --world-sizes 1,2 --tar-tool || fail "views of a fixed dataset"
stop_daemon "$DAEMON_PID" "$WORK/mnt2"
log "ok"
