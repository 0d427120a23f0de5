#!/usr/bin/env bash
# What someone without the job token can do to a cluster's port: nothing.
# Three daemons on this host (UCX over tcp on loopback, as in
# cluster_scenario.sh), node 2 absent at first.
# Checks: garbage (random bytes, absurd lengths, a reset, HTTP: port_abuse.py)
# and half-open TCP connections to node 0's cluster port leave it serving
# correct bytes, its peer's stripe still from memory, and a daemon restarted
# meanwhile is admitted again; a daemon with another job's token is refused
# (both sides log it), learns no stripe and reads correct bytes from the
# backend; every daemon exits 0 at the end (no crash, no thread stuck).
source "$(dirname "$0")/lib.sh"
require_fuse
N=3
PORT_BASE=$(free_port_base $N)
ABUSE="$(dirname "$0")/port_abuse.py"

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 600 --size 30K --size-jitter 0.9 --dirs 4 --seed 8 >/dev/null
make_token "$WORK/token"
make_token "$WORK/wrong-token"
ADDRS=()
for i in $(seq 0 $((N - 1))); do ADDRS+=("127.0.0.1:$((PORT_BASE + i))"); done
PEERS=$(IFS=,; echo "${ADDRS[*]}")
export UCX_TLS=tcp UCX_WARN_UNUSED_ENV_VARS=n

PIDS=()
# node I [TOKEN_FILE]: starts (or restarts) node I's daemon.
node() {
  local i=$1 token=${2:-$WORK/token}
  start_daemon "$WORK/mnt$i" "$WORK/d$i.log" --backend "$WORK/data" --name d --seed 5 --extent-size 256K \
    --memory-budget 1G --peers "$PEERS" --rank "$i" --token-file "$token" --log-level info
  PIDS[$i]=$DAEMON_PID
}
# state OBSERVER PEER: the peer's state as the observer's status shows it.
state() { stat_field "$WORK/mnt$1" "s['cluster']['members'][$2]['state']"; }
# wait_state OBSERVER PEER STATE [SECONDS]
wait_state() {
  local secs=${4:-30}
  for _ in $(seq 1 $((secs * 10))); do [ "$(state "$1" "$2")" = "$3" ] && return 0; sleep 0.1; done
  return 1
}
bytes_from() { stat_field "$WORK/mnt$1" "s['datasets'][0]['bytes_by_source']['$2']"; }
check_views() {
  "$PYTHON" "$(dirname "$0")/check_views.py" "$1" d "$WORK/data" --format files --samples 600 --epochs "$2" --world-sizes 1 \
    --remainder pad --threads 4 >/dev/null
}
alive() { kill -0 "${PIDS[$1]}" 2>/dev/null && [ -e "$WORK/mnt$1/.dlfs/stats" ]; }

node 0
node 1
wait_state 0 1 up && wait_state 1 0 up || { tail -5 "$WORK/d0.log" "$WORK/d1.log"; fail "nodes 0 and 1 never joined"; }
wait_loaded "$WORK/mnt0"
wait_loaded "$WORK/mnt1"
same_tree "$WORK/data" "$WORK/mnt0/d/raw"
[ "$(bytes_from 0 remote)" -gt 0 ] || fail "node 0 read nothing from node 1's memory"
log "nodes 0 and 1 joined (node 2 absent: its stripe comes from the backend)"

# Half-open connections held on node 0's port for the rest of the scenario...
"$PYTHON" "$ABUSE" hold 127.0.0.1 "$PORT_BASE" --count 24 --until "$WORK/release" --max-seconds 200 >"$WORK/hold.out" 2>&1 &
HOLDER=$!
for _ in $(seq 1 100); do grep -q holding "$WORK/hold.out" && break; sleep 0.1; done
grep -q "holding 24" "$WORK/hold.out" || { cat "$WORK/hold.out"; fail "could not open the half-open connections"; }
# ...and garbage thrown at it.
"$PYTHON" "$ABUSE" garbage 127.0.0.1 "$PORT_BASE" --rounds 6 --seed 3 || fail "the garbage sender failed (the port went away?)"
sleep 1
alive 0 || { tail -20 "$WORK/d0.log"; fail "node 0 died of garbage on its port"; }
grep -Eq "Assertion|backtrace|Segmentation" "$WORK/d0.log" && { tail -20 "$WORK/d0.log"; fail "node 0 logged a crash"; }
[ "$(state 0 1)" = up ] && [ "$(state 1 0)" = up ] || fail "the garbage broke the join of nodes 0 and 1"
remote=$(bytes_from 0 remote)
check_views "$WORK/mnt0" 1 || fail "node 0 read wrong bytes after the garbage"
[ "$(bytes_from 0 remote)" -gt "$remote" ] || fail "node 0 stopped reading node 1's stripe from its memory"
log "garbage and 24 half-open connections on node 0's port: it serves correct bytes, node 1's stripe from memory"

# A daemon restarted while the half-open connections are held is admitted again.
kill -TERM "${PIDS[1]}"
wait_exit "${PIDS[1]}"
[ "$WAIT_RC" -eq 0 ] || fail "node 1 exited with $WAIT_RC"
node 1
wait_state 0 1 up && wait_state 1 0 up || { tail -5 "$WORK/d0.log" "$WORK/d1.log"; fail "node 1 was not admitted again"; }
# Node 0 may still show the old session up for a moment after the restart:
# wait (bounded) for it to admit the new one.
for _ in $(seq 1 200); do grep -q "rank 1 .* is back" "$WORK/d0.log" && break; sleep 0.1; done
grep -q "rank 1 .* is back" "$WORK/d0.log" || fail "node 0 did not log node 1 back within 20 s"
log "node 1 restarted and admitted while the port is abused"

# Another job's token: refused on both sides, no stripe learnt, correct bytes.
node 2 "$WORK/wrong-token"
for _ in $(seq 1 100); do
  grep -q "refused this node: wrong job token" "$WORK/d2.log" && grep -q "refused a join .*wrong job token" "$WORK/d0.log" && break
  sleep 0.1
done
grep -q "refused a join .*wrong job token" "$WORK/d0.log" || fail "node 0 did not log refusing the wrong token"
grep -q "refused this node: wrong job token" "$WORK/d2.log" || fail "node 2 did not log that it was refused"
wait_state 2 0 refused 10 && wait_state 0 2 refused 10 || fail "states: $(state 2 0) / $(state 0 2), not refused"
for r in 0 1; do
  stripes=$(stat_field "$WORK/mnt2" "s['cluster']['members'][$r]['stripes']")
  [ "$stripes" = "{}" ] || fail "the refused node knows rank $r's stripes: $stripes"
done
same_tree "$WORK/data" "$WORK/mnt2/d/raw" || fail "the refused node read wrong bytes"
[ "$(bytes_from 2 remote)" = 0 ] || fail "the refused node got $(bytes_from 2 remote) bytes from the others' memory"
log "another job's token: refused and logged on both sides, no stripe learnt, correct bytes from the backend"

touch "$WORK/release"
wait "$HOLDER" || fail "the half-open holder failed"
for i in 0 1 2; do
  stop_daemon "${PIDS[$i]}" "$WORK/mnt$i"
  grep -Eq "Assertion|backtrace" "$WORK/d$i.log" && fail "node $i logged a crash"
done
log "ok"
