#!/usr/bin/env bash
# Three daemons, one dataset striped across them, over real UCX endpoints.
#   cluster_scenario.sh netns   each "node" in its own network namespace,
#                               joined by veth pairs through a bridge; UCX over tcp
#   cluster_scenario.sh shm     three daemons on this host; UCX over shared memory
# Checks: every file and every epoch view read on every node equals the
# backend; with the whole dataset resident, nothing is read from the backend
# and every node gets the other stripes remotely (stats prove it); killing a
# daemon mid-epoch leaves the others' reads correct and complete (its stripe
# then comes from the backend); a daemon with a wrong token is refused and
# still reads correct bytes; restarted with the right token it rejoins and
# serves its stripe again; a daemon that stops answering (SIGSTOP) is marked
# down within a few seconds, after at most the reads then in flight waited on
# it, and comes back when it answers.
MODE=${1:?usage: cluster_scenario.sh netns|shm}
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
require_fuse
command -v nsenter >/dev/null || skip "nsenter (util-linux) not installed"
N=3
PORT_BASE=$(free_port_base $N)

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 900 --size 30K --size-jitter 0.9 --dirs 6 --seed 4 >/dev/null
make_token "$WORK/token"
make_token "$WORK/wrong-token"

ADDRS=()
if [ "$MODE" = netns ]; then
  require_netns ucx
  ucx_cluster_up "c$$" $N "$PORT_BASE"
  ADDRS=("${PEER_ADDRS[@]}")
else
  for i in $(seq 0 $((N - 1))); do ADDRS+=("127.0.0.1:$((PORT_BASE + i))"); done
  export UCX_TLS=posix,cma,sysv,tcp
fi
PEERS=$(IFS=,; echo "${ADDRS[*]}")
export UCX_WARN_UNUSED_ENV_VARS=n

# check_views MNT EPOCH W: every rank's views of that epoch equal the backend.
check_views() {
  "$PYTHON" "$(dirname "$0")/check_views.py" "$1" d "$WORK/data" --format files --samples 900 --epochs "$2" --world-sizes "$3" \
    --remainder pad --threads 4 >/dev/null
}

PIDS=()
# node I [TOKEN_FILE]: starts (or restarts) node I's daemon.
node() {
  local i=$1 token=${2:-$WORK/token}
  if [ "$MODE" = netns ]; then DAEMON_WRAP=(nsenter "--net=/var/run/netns/${NETNS_NAMES[$i]}" --); else DAEMON_WRAP=(); fi
  start_daemon "$WORK/mnt$i" "$WORK/d$i.log" --backend "$WORK/data" --name d --seed 5 --extent-size 256K \
    --memory-budget 1G --peers "$PEERS" --rank "$i" --token-file "$token" --log-level info
  PIDS[$i]=$DAEMON_PID
}
for i in $(seq 0 $((N - 1))); do node "$i"; done

# all_resident I: node I's status says every stripe is resident on its node.
all_resident() { [ "$(stat_field "$WORK/mnt$1" 's["cluster"]["all_resident"]')" = True ]; }
for _ in $(seq 1 300); do
  ok=1
  for i in $(seq 0 $((N - 1))); do all_resident "$i" || ok=0; done
  [ $ok = 1 ] && break
  sleep 0.1
done
[ $ok = 1 ] || { for i in 0 1 2; do cat "$WORK/mnt$i/.dlfs/stats"; tail -5 "$WORK/d$i.log"; done; fail "the cluster never became fully resident"; }
log "3 nodes joined and resident ($MODE)"

# Every file and every rank's epoch view, on every node, equal the backend.
for i in $(seq 0 $((N - 1))); do
  same_tree "$WORK/data" "$WORK/mnt$i/d/raw" || fail "node $i: raw tree differs from the backend"
  check_views "$WORK/mnt$i" 0 $N || fail "node $i: epoch views differ"
done
"$PYTHON" "$(dirname "$0")/check_striped_stats.py" "$WORK" $N || fail "stats do not show striped reads"
log "every node read every stripe from its owner's memory"

# Kill node 2 while node 0 streams a view; node 0's reads stay correct and
# complete, over TCP and over shared memory alike (docs/deploy.md, "A killed
# peer and the survivors"). Its dead mount stays: node 2's next start clears it.
DEATH=KILL
check_views "$WORK/mnt0" 1 1 >"$WORK/reader.out" 2>&1 &
READER=$!
sleep 0.05
kill -"$DEATH" "${PIDS[2]}"
wait "$READER" || { cat "$WORK/reader.out"; fail "a read on node 0 failed after node 2 died"; }
wait_exit "${PIDS[2]}"
same_tree "$WORK/data" "$WORK/mnt0/d/raw" || fail "node 0: raw tree differs after node 2 died"
for _ in $(seq 1 100); do
  st=$(stat_field "$WORK/mnt0" '[m["state"] for m in s["cluster"]["members"]][2]')
  [ "$st" != up ] && break
  sleep 0.1
done
[ "$st" != up ] || fail "node 2 still shown up 10 s after it died"
grep -q "rank 2 .* is down" "$WORK/d0.log" || fail "node 0 did not log node 2 down"
back=$(stat_field "$WORK/mnt0" 's["datasets"][0]["bytes_by_source"]["backend"]')
[ "$back" -gt 0 ] || fail "node 0 read node 2's stripe without the backend after it died"
log "node 2 killed (SIG$DEATH) mid-epoch: node 0 stayed correct ($back bytes from the backend)"

# A daemon with the wrong token is refused, and still serves correct bytes.
rmdir "$WORK/mnt2" 2>/dev/null || true
node 2 "$WORK/wrong-token"
sleep 2
grep -q "refused a join .*wrong job token" "$WORK/d0.log" || fail "node 0 did not refuse the wrong token"
grep -q "refused this node: wrong job token" "$WORK/d2.log" || fail "node 2 did not learn it was refused"
same_tree "$WORK/data" "$WORK/mnt2/d/raw" || fail "the refused node read wrong bytes"
by=$(stat_field "$WORK/mnt2" 's["datasets"][0]["bytes_by_source"]')
"$PYTHON" -c "import sys; b=eval(sys.argv[1]); assert b['remote'] == 0, b" "$by" || fail "refused node got remote bytes: $by"
kill -TERM "${PIDS[2]}"
wait_exit "${PIDS[2]}"
log "wrong token refused"

# Back with the right token: node 0 gets node 2's stripe from its memory again.
node 2
for _ in $(seq 1 300); do all_resident 0 && break; sleep 0.1; done
all_resident 0 || fail "node 2 did not rejoin"
grep -q "rank 2 .* is back" "$WORK/d0.log" || fail "node 0 did not log node 2 back"
before=$(stat_field "$WORK/mnt0" 's["datasets"][0]["bytes_by_source"]["backend"]')
check_views "$WORK/mnt0" 2 1 >/dev/null || fail "node 0 after rejoin"
after=$(stat_field "$WORK/mnt0" 's["datasets"][0]["bytes_by_source"]["backend"]')
[ "$after" = "$before" ] || fail "node 0 still read $((after - before)) bytes from the backend after node 2 came back"
# A peer that stops answering (SIGSTOP: its sockets stay open) is marked down
# within a few seconds; meanwhile reads wait at most a get's timeout, then use
# the backend, and stay correct. When it answers again it is back.
kill -STOP "${PIDS[1]}"
start=$(date +%s%N)
check_views "$WORK/mnt0" 3 1 || { kill -CONT "${PIDS[1]}"; fail "node 0's reads with node 1 stopped"; }
for _ in $(seq 1 100); do
  st=$(stat_field "$WORK/mnt0" '[m["state"] for m in s["cluster"]["members"]][1]')
  [ "$st" != up ] && break
  sleep 0.1
done
took=$((($(date +%s%N) - start) / 1000000))
kill -CONT "${PIDS[1]}"
[ "$st" != up ] || fail "node 1 stopped answering but was still up after ${took} ms"
# Whichever notices first (the reader's gets after get_timeout, the
# heartbeats after down_after, or node 2's down notice), node 1 is down at once, not after every read
# waited out a get: at most the batches in flight when it stopped failed.
grep -Eq "rank 1 .* is down: (no heartbeat|rank 2 found it silent|its gets missed their deadline)" "$WORK/d0.log" ||
  fail "node 0 did not log node 1's silence"
stalled=$(sed -n '/rank 2 .* is back/,$p' "$WORK/d0.log" | grep -c "gets of 'd' from rank 1 failed" || true)
[ "$stalled" -le 8 ] || fail "$stalled batches of gets waited on the stopped node 1 (each costs get_timeout)"
for _ in $(seq 1 300); do all_resident 0 && break; sleep 0.1; done
all_resident 0 || fail "node 1 did not come back after SIGCONT"
log "node 1 stopped: marked down within ${took} ms (reads correct meanwhile), back after SIGCONT"

"$DLFS_CTL" --socket "$(ctl_socket "$WORK/mnt0")" status | tee "$WORK/status.txt" | head -20
grep -Eq "^2 +${ADDRS[2]//./\\.} +up " "$WORK/status.txt" || fail "dlfs-ctl status does not show rank 2 up"
grep -q "the whole dataset is resident" "$WORK/status.txt" || fail "dlfs-ctl status does not say the dataset is resident"
log "ok"
