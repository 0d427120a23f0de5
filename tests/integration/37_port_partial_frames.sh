#!/usr/bin/env bash
# Unfinished frames on a cluster port cost bounded memory for bounded time
# (transport/control_channel.h): 500 connections greet as a daemon would,
# announce the largest frame (4 MiB) and send all of it but its last byte.
# Checks: node 0's resident memory grows by at most the channel's budget for
# unfinished frames (64 MiB) plus 32 MiB of slack while they are held; it
# reads correct bytes, node 1's stripe still from memory, meanwhile; every
# one of those connections is closed by the daemon within the frame timeout
# (5 s) or for the budget; 8 connections with small unfinished frames are
# closed by the timeout alone; both daemons exit 0.
source "$(dirname "$0")/lib.sh"
require_fuse
N=2
PORT_BASE=$(free_port_base $N)
ABUSE="$(dirname "$0")/port_abuse.py"
BUDGET_MIB=64
SLACK_MIB=32

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 400 --size 30K --size-jitter 0.9 --dirs 4 --seed 37 >/dev/null
make_token "$WORK/token"
PEERS="127.0.0.1:$PORT_BASE,127.0.0.1:$((PORT_BASE + 1))"
export UCX_TLS=tcp UCX_WARN_UNUSED_ENV_VARS=n
PIDS=()
for i in 0 1; do
  start_daemon "$WORK/mnt$i" "$WORK/d$i.log" --backend "$WORK/data" --name d --seed 5 --extent-size 256K \
    --memory-budget 1G --peers "$PEERS" --rank "$i" --token-file "$WORK/token" --log-level debug
  PIDS[$i]=$DAEMON_PID
done
for _ in $(seq 1 300); do
  [ "$(stat_field "$WORK/mnt0" "s['cluster']['members'][1]['state']")" = up ] && break
  sleep 0.1
done
[ "$(stat_field "$WORK/mnt0" "s['cluster']['members'][1]['state']")" = up ] || fail "nodes 0 and 1 never joined"
wait_loaded "$WORK/mnt0"
wait_loaded "$WORK/mnt1"
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
bytes_from() { stat_field "$WORK/mnt0" "s['datasets'][0]['bytes_by_source']['$1']"; }
same_tree "$WORK/data" "$WORK/mnt0/d/raw"
before=$(rss_kib "${PIDS[0]}")
remote=$(bytes_from remote)

"$PYTHON" "$ABUSE" partial 127.0.0.1 "$PORT_BASE" --count 500 --until "$WORK/release" --max-seconds 120 \
  >"$WORK/partial.out" 2>&1 &
HOLDER=$!
peak=$before
for _ in $(seq 1 300); do
  r=$(rss_kib "${PIDS[0]}"); [ "$r" -gt "$peak" ] && peak=$r
  grep -q holding "$WORK/partial.out" && break
  sleep 0.1
done
grep -q "holding 500" "$WORK/partial.out" || { cat "$WORK/partial.out"; fail "could not open the 500 connections"; }
# Reads go on while the frames are held (and while their connections are closed).
"$PYTHON" "$(dirname "$0")/check_views.py" "$WORK/mnt0" d "$WORK/data" --format files --samples 400 --epochs 1 \
  --world-sizes 1 --remainder pad --threads 4 >/dev/null || fail "node 0 read wrong bytes while the frames were held"
r=$(rss_kib "${PIDS[0]}"); [ "$r" -gt "$peak" ] && peak=$r
sleep 6  # past the frame timeout
r=$(rss_kib "${PIDS[0]}"); [ "$r" -gt "$peak" ] && peak=$r
touch "$WORK/release"
wait "$HOLDER" || fail "the partial-frame holder failed"
cat "$WORK/partial.out"
grep -q "closed by the daemon 500 of 500" "$WORK/partial.out" || fail "the daemon kept some unfinished frames past the timeout"
grown=$(( (peak - before) / 1024 ))
log "500 connections with 4 MiB - 1 byte frames: node 0's RSS $((before / 1024)) MiB -> peak $((peak / 1024)) MiB (+$grown MiB)"
[ "$grown" -le $((BUDGET_MIB + SLACK_MIB)) ] || fail "node 0's RSS grew by $grown MiB (bound: $BUDGET_MIB MiB budget + $SLACK_MIB MiB)"
grep -q "the largest holder is closed" "$WORK/d0.log" || fail "node 0 never closed a connection for the budget"

# Small unfinished frames, far below the budget: only the frame timeout closes them.
rm -f "$WORK/release"
"$PYTHON" "$ABUSE" partial 127.0.0.1 "$PORT_BASE" --count 8 --frame-bytes 1024 --until "$WORK/release" \
  --max-seconds 60 >"$WORK/small.out" 2>&1 &
HOLDER=$!
for _ in $(seq 1 100); do grep -q holding "$WORK/small.out" && break; sleep 0.1; done
sleep 7  # past the 5 s frame timeout
touch "$WORK/release"
wait "$HOLDER" || fail "the small-frame holder failed"
grep -q "closed by the daemon 8 of 8" "$WORK/small.out" || { cat "$WORK/small.out"; fail "unfinished small frames outlived the timeout"; }
grep -q "a frame unfinished after 5 s (1028 bytes of it arrived)" "$WORK/d0.log" || fail "node 0 logged no frame timeout"
kill -0 "${PIDS[0]}" || fail "node 0 died"
[ "$(stat_field "$WORK/mnt0" "s['cluster']['members'][1]['state']")" = up ] || fail "node 1 is no longer up for node 0"
same_tree "$WORK/data" "$WORK/mnt0/d/raw" || fail "node 0 read wrong bytes after the abuse"
[ "$(bytes_from remote)" -gt "$remote" ] || fail "node 0 stopped reading node 1's stripe from its memory"
for i in 0 1; do
  stop_daemon "${PIDS[$i]}" "$WORK/mnt$i"
  grep -Eq "Assertion|backtrace" "$WORK/d$i.log" && fail "node $i logged a crash"
done
log "ok"
