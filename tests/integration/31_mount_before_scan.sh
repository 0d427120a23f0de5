#!/usr/bin/env bash
# dlfsd mounts before it scans (fs/daemon/daemon.h). With each scan held back by the
# test-only hook DLFS_TEST_ONLY_SCAN_DELAY_MS:
#  - the mount, the root listing, /.dlfs/stats and `dlfs-ctl status` answer
#    while the dataset is still "scanning";
#  - readers inside the dataset (more of them than FUSE worker threads) wait
#    and then get the backend's bytes, while stats keeps answering at once;
#  - `dlfs-ctl wait-ready` returns when the dataset is ready;
#  - a dataset whose scan fails after the mount: its waiting reader gets EIO,
#    dlfsd logs the dataset and the problem, unmounts and exits 2; with
#    serve_despite_failed_datasets the others stay served and wait-ready exits 1.
source "$(dirname "$0")/lib.sh"
require_fuse

DELAY_MS=10000  # long enough for a busy machine to start the readers while it lasts
"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 600 --size 4K --dirs 6 --seed 31 >/dev/null
sock=$(ctl_socket "$WORK/mnt")
ctl() { "$DLFS_CTL" --socket "$sock" "$@"; }
state_of() { stat_field "$WORK/mnt" "[d['state'] for d in s['datasets'] if d['name'] == '$1'][0]"; }
now_ms() { date +%s%3N; }

t0=$(now_ms)
DLFS_TEST_ONLY_SCAN_DELAY_MS=$DELAY_MS START_WAIT_READY=0 \
  start_daemon "$WORK/mnt" "$WORK/dlfsd.log" --backend "$WORK/data" --name ds --fuse-threads 4
pid=$DAEMON_PID
mounted_ms=$(( $(now_ms) - t0 ))
[ "$mounted_ms" -lt "$DELAY_MS" ] || fail "the mount came up after ${mounted_ms} ms, not before the scan (${DELAY_MS} ms late)"
[ "$(state_of ds)" = scanning ] || fail "stats say '$(state_of ds)' during the scan, expected scanning"
[ "$(ls "$WORK/mnt")" = ds ] || fail "the root does not list the dataset while it scans: $(ls "$WORK/mnt")"
ctl status | tee "$WORK/status.txt"
grep -q "scanning" "$WORK/status.txt" || fail "dlfs-ctl status does not say scanning"
log "mounted after ${mounted_ms} ms; stats, root listing and status answer while scanning"

# 8 readers (twice the FUSE worker threads), each cat of a different file.
mapfile -t files < <(cd "$WORK/data" && find . -type f | LC_ALL=C sort | sed -n 1,8p)
readers=()
for f in "${files[@]}"; do
  cat "$WORK/mnt/ds/raw/$f" >"$WORK/read-$(echo "$f" | tr / _)" 2>"$WORK/read.err" &
  readers+=($!)
done
ls -R "$WORK/mnt/ds/raw" >"$WORK/listing.txt" &
readers+=($!)
sleep 0.5
# The readers are parked, not holding workers: stats must still answer at once.
t1=$(now_ms)
timeout 5 cat "$WORK/mnt/.dlfs/stats" >"$WORK/stats-while-waiting.json" || fail "stats did not answer while readers waited"
[ $(( $(now_ms) - t1 )) -lt 2000 ] || fail "stats took $(( $(now_ms) - t1 )) ms while readers waited"
grep -q '"state": "scanning"' "$WORK/stats-while-waiting.json" || fail "the scan ended before the readers could wait (raise DELAY_MS)"
for p in "${readers[@]}"; do kill -0 "$p" 2>/dev/null || fail "a reader finished before the scan was done"; done
log "${#readers[@]} readers wait; stats answered in $(( $(now_ms) - t1 )) ms"

ctl --timeout 60 wait-ready || fail "dlfs-ctl wait-ready failed"
[ "$(state_of ds)" = ready ] || fail "wait-ready returned while stats say $(state_of ds)"
for p in "${readers[@]}"; do wait "$p" || fail "a waiting reader failed: $(cat "$WORK/read.err")"; done
for f in "${files[@]}"; do
  cmp -s "$WORK/data/$f" "$WORK/read-$(echo "$f" | tr / _)" || fail "$f read while scanning differs from the backend"
done
[ "$(grep -v ':$' "$WORK/listing.txt" | grep -c . )" -ge 600 ] || fail "the listing made while scanning misses entries"
same_tree "$WORK/data" "$WORK/mnt/ds/raw"
log "the readers got the backend's bytes once the dataset was ready"
stop_daemon "$pid" "$WORK/mnt"

# A second dataset whose scan fails after the mount (records do not divide the files).
cat >"$WORK/bad.toml" <<TOML
[daemon]
mountpoint = "$WORK/mnt2"
[[dataset]]
name = "good"
backend = "$WORK/data"
[[dataset]]
name = "bad"
backend = "$WORK/data"
format = "fixed"
record_size = 3000
TOML
mkdir -p "$WORK/mnt2"
MOUNTS+=("$WORK/mnt2")
DLFS_TEST_ONLY_SCAN_DELAY_MS=3000 "$DLFSD" --config "$WORK/bad.toml" --control-socket "$WORK/ctl-mnt2.sock" >"$WORK/bad.log" 2>&1 &
bad_pid=$!
DAEMON_PIDS+=("$bad_pid")
for _ in $(seq 1 100); do [ -e "$WORK/mnt2/.dlfs/stats" ] && break; sleep 0.05; done
[ -e "$WORK/mnt2/.dlfs/stats" ] || { cat "$WORK/bad.log" >&2; fail "the mount with a bad dataset never came up"; }
rc=0; cat "$WORK/mnt2/bad/raw/$(cd "$WORK/data" && find . -type f -print -quit)" >/dev/null 2>"$WORK/bad-read.err" || rc=$?
[ "$rc" -ne 0 ] || fail "a read in the failed dataset succeeded"
grep -q "Input/output error" "$WORK/bad-read.err" || fail "a read in the failed dataset did not get EIO: $(cat "$WORK/bad-read.err")"
wait_exit "$bad_pid"
[ "$WAIT_RC" -eq 2 ] || { cat "$WORK/bad.log" >&2; fail "dlfsd exited $WAIT_RC after a failed scan, expected 2"; }
grep -q "dataset 'bad'" "$WORK/bad.log" || { cat "$WORK/bad.log" >&2; fail "the log does not name the failed dataset"; }
if grep -q " $WORK/mnt2 fuse" /proc/mounts; then fail "dlfsd left its mount after a failed scan"; fi
log "failed scan: reader got EIO, dlfsd exited 2: $(grep -m1 "dataset 'bad'" "$WORK/bad.log")"

# The same with serve_despite_failed_datasets: "good" stays served, "bad" answers EIO.
sed 's/^\[daemon\]$/[daemon]\nserve_despite_failed_datasets = true/' "$WORK/bad.toml" >"$WORK/keep.toml"
START_WAIT_READY=0 start_daemon "$WORK/mnt2" "$WORK/keep.log" --config "$WORK/keep.toml"
keep_pid=$DAEMON_PID
rc=0; "$DLFS_CTL" --socket "$(ctl_socket "$WORK/mnt2")" --timeout 60 wait-ready 2>"$WORK/wait.err" || rc=$?
[ "$rc" -eq 1 ] || fail "wait-ready exited $rc with a failed dataset, expected 1"
grep -q "dataset 'bad'" "$WORK/wait.err" || fail "wait-ready does not name the failed dataset: $(cat "$WORK/wait.err")"
first=$(cd "$WORK/data" && find . -type f | LC_ALL=C sort | sed -n 1p)
cat "$WORK/mnt2/bad/raw/$first" >/dev/null 2>"$WORK/keep-bad.err" && fail "a read in the failed dataset succeeded"
grep -q "Input/output error" "$WORK/keep-bad.err" || fail "the failed dataset did not answer EIO: $(cat "$WORK/keep-bad.err")"
cmp -s "$WORK/data/$first" "$WORK/mnt2/good/raw/$first" || fail "the good dataset is not served beside the failed one"
[ "$(stat_field "$WORK/mnt2" "[d['state'] for d in s['datasets']]")" = "['ready', 'failed']" ] ||
  fail "stats states: $(stat_field "$WORK/mnt2" "[d['state'] for d in s['datasets']]")"
stat_field "$WORK/mnt2" "s['datasets'][1]['error']" | grep -q "3000-byte records" || fail "stats do not say why 'bad' failed"
stop_daemon "$keep_pid" "$WORK/mnt2"
log "serve_despite_failed_datasets: good served, bad EIO, wait-ready exit 1, clean stop"
log "ok"
