#!/usr/bin/env bash
# FUSE over io_uring (fs/kernel/wire/fuse_uring.h) through a real mount:
#  - `--fuse-uring off` serves through /dev/fuse and leaves the fuse
#    module's enable_uring off; `auto` (the default) as root turns it on, says
#    so in the log, and every request then comes through the queues; so does
#    `on`;
#  - readers that arrive while the dataset scans are parked, answered later
#    from another thread, and the queues grow an entry for each instead of
#    stalling: stats answer at once;
#  - raw files read with Python's open() from two processes, and an epoch
#    view, have the backend's bytes, the same as through /dev/fuse;
#  - a queue that cannot set up its entries (test hook) leaves the mount
#    serving through /dev/fuse, not holding every request.
# The module parameter is put back as it was.
source "$(dirname "$0")/lib.sh"
require_fuse
PARAM=/sys/module/fuse/parameters/enable_uring
[ -e "$PARAM" ] || skip "this kernel has no FUSE over io_uring ($PARAM missing)"
ORIG=$(cat "$PARAM")
CLEANUP_HOOKS+=("echo $ORIG >$PARAM")
echo N >"$PARAM" || skip "cannot set $PARAM"
CHECK="$(dirname "$0")/check_fuse_uring.py"
uring() { stat_field "$1" "s['fuse']['uring']['$2']"; }
queues() { stat_field "$1" "s['fuse']['uring']['queues']['$2']"; }
now_ms() { date +%s%3N; }

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 500 --size 3K --dirs 5 --seed 35 >/dev/null

# off: /dev/fuse, and the parameter stays as it was.
start_daemon "$WORK/mnt-off" "$WORK/dlfsd-off.log" --backend "$WORK/data" --name ds --seed 35 --fuse-uring off
wait_loaded "$WORK/mnt-off"
[ "$(uring "$WORK/mnt-off" in_use)" = False ] || fail "--fuse-uring off used io_uring"
"$PYTHON" "$CHECK" --mnt "$WORK/mnt-off" --backend "$WORK/data" --epoch 0 | tee "$WORK/off.txt"
stop_daemon "$DAEMON_PID" "$WORK/mnt-off"
[ "$(cat "$PARAM")" = N ] || fail "--fuse-uring off changed $PARAM"

# auto (the default) as root: turns the parameter on, says so, and serves through the queues.
start_daemon "$WORK/mnt-auto" "$WORK/dlfsd-auto.log" --backend "$WORK/data" --name ds --seed 35
wait_loaded "$WORK/mnt-auto"
[ "$(cat "$PARAM")" = Y ] || fail "auto as root did not turn $PARAM on"
grep -q "turned on $PARAM" "$WORK/dlfsd-auto.log" || fail "auto turned $PARAM on without saying so"
[ "$(uring "$WORK/mnt-auto" in_use)" = True ] || fail "auto as root: io_uring not in use"
"$PYTHON" "$CHECK" --mnt "$WORK/mnt-auto" --backend "$WORK/data" --epoch 0 >/dev/null
stop_daemon "$DAEMON_PID" "$WORK/mnt-auto"
echo N >"$PARAM"

# On, with a scan held back 3 s. A queue hands a request over only when one
# of its entries commits (fs/kernel/wire/fuse_uring.h): the parked burst stays below the
# entries each CPU's queue keeps registered (2 per thread, 4 threads per
# queue on 2 CPUs), so nothing else has to wait for the scan.
DLFS_TEST_ONLY_SCAN_DELAY_MS=3000 START_WAIT_READY=0 \
  start_daemon "$WORK/mnt" "$WORK/dlfsd.log" --backend "$WORK/data" --name ds --seed 35 --fuse-uring on --fuse-threads 8 --raw-overlay off
[ "$(cat "$PARAM")" = Y ] || fail "--fuse-uring on did not turn $PARAM on"
[ "$(uring "$WORK/mnt" in_use)" = True ] || { cat "$WORK/dlfsd.log" >&2; fail "--fuse-uring on: not in use"; }
threads=$(queues "$WORK/mnt" threads)
mapfile -t files < <(cd "$WORK/data" && find . -type f | LC_ALL=C sort | sed -n 1,8p)
readers=()
for f in "${files[@]}"; do
  cat "$WORK/mnt/ds/raw/$f" >"$WORK/read-$(echo "$f" | tr / _)" &
  readers+=($!)
done
# The kernel sends one LOOKUP for readers of one name (the others wait for
# it): names of their own in the dataset's root park a request each.
missing=()
for i in $(seq 1 6); do
  stat "$WORK/mnt/ds/missing-$i" >/dev/null 2>&1 &
  missing+=($!)
done
sleep 0.5
t1=$(now_ms)
timeout 5 cat "$WORK/mnt/.dlfs/stats" >"$WORK/stats-while-parked.json" || fail "stats did not answer while readers were parked"
[ $(( $(now_ms) - t1 )) -lt 2000 ] || fail "stats took $(( $(now_ms) - t1 )) ms while ${#readers[@]} readers were parked"
grep -q '"state": "scanning"' "$WORK/stats-while-parked.json" || fail "the scan ended before the readers parked"
for p in "${readers[@]}"; do wait "$p" || fail "a parked reader failed"; done
for p in "${missing[@]}"; do ! wait "$p" || fail "a stat of a missing name succeeded"; done
for f in "${files[@]}"; do
  cmp -s "$WORK/data/$f" "$WORK/read-$(echo "$f" | tr / _)" || fail "parked reader of $f got other bytes"
done
parked=$(queues "$WORK/mnt" parked)
elsewhere=$(queues "$WORK/mnt" replies_from_other_threads)
entries=$(queues "$WORK/mnt" entries)
[ "$parked" -ge "${#missing[@]}" ] || fail "only $parked requests parked for ${#missing[@]} names looked up during the scan"
[ "$elsewhere" -ge "$parked" ] || fail "$parked requests parked but $elsewhere replies came from another thread"
[ "$entries" -ge $((threads * 2 + parked)) ] ||
  fail "the queues hold $entries entries: $threads threads x 2 and one more per parked request ($parked) expected"
[ "$(queues "$WORK/mnt" register_failures)" = 0 ] || fail "the kernel refused entries: $(cat "$WORK/dlfsd.log")"
log "${#readers[@]} readers and ${#missing[@]} lookups during the scan on $threads threads: $parked parked, $elsewhere replies from other threads, $entries entries"

wait_loaded "$WORK/mnt"
before=$(queues "$WORK/mnt" requests)
"$PYTHON" "$CHECK" --mnt "$WORK/mnt" --backend "$WORK/data" --epoch 0 | tee "$WORK/on.txt"
after=$(queues "$WORK/mnt" requests)
# The benchmark that times these round trips runs on the mount and reports them.
out=$("$PYTHON" "$(dirname "$0")/../../tools/bench/fuse_roundtrip_bench.py" "$WORK/mnt/ds/raw" ioctl --procs 2 --repeat 1)
grep -qE 'ioctl procs=2: [0-9,]+ opens/s' <<<"$out" || fail "fuse_roundtrip_bench printed: $out"
[ "$(queues "$WORK/mnt" requests)" -ge $((after + 500)) ] || fail "fuse_roundtrip_bench's ioctls did not come through the queues"
after=$(queues "$WORK/mnt" requests)
# Every open() sends its isatty() ioctl, twice over the files (two passes).
[ $((after - before)) -ge 1000 ] || fail "only $((after - before)) requests came through the queues for 1000 opens"
stop_daemon "$DAEMON_PID" "$WORK/mnt"

# A queue whose threads cannot set up their entries makes the kernel give
# io_uring up (the ring would never be ready): the mount serves through
# /dev/fuse instead of holding every request.
DLFS_TEST_ONLY_URING_SETUP_FAIL=1 start_daemon "$WORK/mnt-fail" "$WORK/dlfsd-fail.log" --backend "$WORK/data" \
  --name ds --seed 35 --fuse-uring on
wait_loaded "$WORK/mnt-fail"
[ "$(queues "$WORK/mnt-fail" register_failures)" -ge 1 ] || fail "the failed queue setup was not counted"
grep -q "requests go through /dev/fuse" "$WORK/dlfsd-fail.log" || fail "the failed queue setup was not logged"
"$PYTHON" "$CHECK" --mnt "$WORK/mnt-fail" --backend "$WORK/data" --epoch 0 >"$WORK/fail.txt"
[ "$(queues "$WORK/mnt-fail" requests)" = 0 ] || fail "requests came through a ring the kernel was told to give up"
stop_daemon "$DAEMON_PID" "$WORK/mnt-fail"
log "a queue that fails its setup: served through /dev/fuse"

[ "$(grep '^view' "$WORK/off.txt")" = "$(grep '^view' "$WORK/on.txt")" ] ||
  fail "epoch 0's view differs between /dev/fuse and io_uring"
log "ok"
