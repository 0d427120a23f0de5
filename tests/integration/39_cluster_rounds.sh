#!/usr/bin/env bash
# Rounds over the job's memory (issue 37): three nodes in network namespaces
# (UCX over tcp), a dataset about 2.5x their aggregate memory budget. The
# plan's rounds span the three nodes (R is the aggregate's); each node
# streams its rank's view of two epochs (W = 3) at the same time, as
# training would, as an unprivileged user (the daemons run as root). Checks: every view's bytes are the backend's and every
# file is in one rank's view per epoch; every node got chunks of rounds from
# the others' memory; all nodes together read about the dataset once per
# epoch from the backend (per-node rounds read it once per node). Then a
# node killed while the others stream epoch 2: their views stay exact (the
# dead node's chunks come from the backend). Before that, a node whose rank
# reads nothing follows the others' rounds and serves its part of them; after
# it, the killed node restarts and catches up with the round the others are at.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
require_fuse
command -v nsenter >/dev/null || skip "nsenter (util-linux) not installed"
command -v setpriv >/dev/null || skip "setpriv (util-linux) not installed"
require_netns ucx
N=3
EPOCHS=2
PORT_BASE=$(free_port_base $N)
CHECK="$(dirname "$0")/check_cluster_rounds.py"

# ~12 MB in 600 files; 1.6 MiB per node: 4.8 MiB in all, 0.4 of the dataset.
# Larger, for a measurement (docs/views.md): DLFS_ROUNDS_FILE_SIZE=200K
# DLFS_ROUNDS_BUDGET=16MiB DLFS_ROUNDS_CHUNK=1MiB (124 MB, rounds of 7 MB a rank).
FILE_SIZE=${DLFS_ROUNDS_FILE_SIZE:-20K}
BUDGET=${DLFS_ROUNDS_BUDGET:-1600KiB}
CHUNK=${DLFS_ROUNDS_CHUNK:-64K}
"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 600 --size "$FILE_SIZE" --size-jitter 0.5 --dirs 6 --seed 39 >/dev/null
TOTAL=$(du -sb --apparent-size "$WORK/data" | cut -f1)
# Readable by all on the backend, so the views are (docs/deploy.md, "Local users").
chmod 0755 "$WORK"
# The trainers' user: no root, no entry in /etc/passwd.
TRAINER=(setpriv --reuid=60001 --regid=60001 --clear-groups)
make_token "$WORK/token"
ucx_cluster_up "r$$" $N "$PORT_BASE"
PEERS=$(IFS=,; echo "${PEER_ADDRS[*]}")

# node I SPAN TAG LOG [FLAGS...]: starts node I's daemon (mountpoint mnt<TAG><I>) in its namespace.
node() {
  local i=$1 span=$2 tag=$3 logf=$4
  shift 4
  DAEMON_WRAP=(nsenter "--net=/var/run/netns/${NETNS_NAMES[$i]}" --)
  start_daemon "$WORK/mnt$tag$i" "$logf" --backend "$WORK/data" --name d --seed 39 --extent-size "$CHUNK" \
    --memory-budget "$BUDGET" --round-chunk "$CHUNK" --round-span "$span" --peers "$PEERS" --rank "$i" \
    --token-file "$WORK/token" "$@"
  DAEMON_WRAP=()
}
# joined TAG: waits until every node sees all N members up.
joined() {
  local tag=$1 i ok
  up() { stat_field "$WORK/mnt$tag$1" 'sum(m["state"] in ("up", "self") for m in s["cluster"]["members"])'; }
  for _ in $(seq 1 200); do
    ok=1
    for i in $(seq 0 $((N - 1))); do [ "$(up "$i")" = $N ] || ok=0; done
    [ $ok = 1 ] && return 0
    sleep 0.1
  done
  fail "the nodes did not all join: $(for i in 0 1 2; do tail -3 "$WORK/d$tag$i.log"; done)"
}
# cluster SPAN [TAG [FLAGS...]]: starts the three daemons with round_span SPAN and waits for the joins.
cluster() {
  local span=$1 tag=${2:-} i
  shift $(($# < 2 ? $# : 2))
  for i in $(seq 0 $((N - 1))); do node "$i" "$span" "$tag" "$WORK/d$tag$i.log" "$@"; done
  joined "$tag"
}
# stream TAG DIR: each node streams its rank's view, epoch after epoch, all nodes at once.
stream() {
  local tag=$1 dir=$2 i pids=()
  mkdir -p "$dir"
  for i in $(seq 0 $((N - 1))); do
    (for e in $(seq 0 $((EPOCHS - 1))); do
      "${TRAINER[@]}" cat "$WORK/mnt$tag$i/d/epochs/$e/$N/$i.tar" >"$dir/e$e-r$i.tar"
    done) &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || fail "a node's reader failed"; done
}

# First each node's own rounds (round_span = node), for the comparison;
# without read-ahead rings, which in rounds would fetch from the backend the
# samples of rounds not loaded yet (rounds over the nodes have none).
cluster node p --no-readahead
stream p "$WORK/views-node"
"$PYTHON" "$CHECK" views "$WORK/data" $EPOCHS $N "$WORK"/views-node/*.tar || fail "the per-node views are wrong"
for i in $(seq 0 $((N - 1))); do cat "$WORK/mntp$i/.dlfs/stats" >"$WORK/node-stats$i.json"; done
"$PYTHON" "$CHECK" stats "$TOTAL" $EPOCHS "$WORK"/node-stats*.json --per-node || fail "per-node rounds: no figures"
for i in $(seq 0 $((N - 1))); do stop_daemon "$(pgrep -f "dlfsd --mountpoint $WORK/mntp$i ")" "$WORK/mntp$i"; done

# Then rounds over the three nodes' memory (the default).
cluster cluster
for i in $(seq 0 $((N - 1))); do
  grep -q "rounds over the memory of $N nodes" "$WORK/d$i.log" || fail "node $i: rounds do not span the nodes: $(grep -i round "$WORK/d$i.log")"
done
log "$N nodes joined; $(grep -o 'rounds over the memory.*' "$WORK/d0.log")"
stream "" "$WORK/views"
"$PYTHON" "$CHECK" views "$WORK/data" $EPOCHS $N "$WORK"/views/*.tar || fail "the streamed views are wrong"
for i in $(seq 0 $((N - 1))); do cat "$WORK/mnt$i/.dlfs/stats" >"$WORK/stats$i.json"; done
"$PYTHON" "$CHECK" stats "$TOTAL" $EPOCHS "$WORK"/stats*.json || fail "the nodes did not share their rounds"

# two_ranks EPOCH DIR: nodes 0 and 1 start streaming their rank's view of EPOCH (pids in READERS).
two_ranks() {
  local e=$1 dir=$2 i
  mkdir -p "$dir"
  READERS=()
  for i in 0 1; do
    (cat "$WORK/mnt$i/d/epochs/$e/$N/$i.tar" >"$dir/e$e-r$i.tar") &
    READERS+=($!)
  done
}

# Nodes 0 and 1 stream epoch 2, node 2's rank reads nothing: node 2 follows
# the others' rounds (their heartbeats say where they are) and serves its
# part of each.
two_ranks 2 "$WORK/follow"
for pid in "${READERS[@]}"; do wait "$pid" || fail "a reader of epoch 2 failed"; done
"$PYTHON" "$CHECK" bytes "$WORK/data" "$WORK"/follow/*.tar || fail "views read beside a node without readers are wrong"
cat "$WORK/mnt2/.dlfs/stats" >"$WORK/follow-stats2.json"
"$PYTHON" "$CHECK" follow 2 "$WORK/follow-stats2.json" || fail "node 2 did not follow the others' rounds"

# Node 2 killed while nodes 0 and 1 stream epoch 3.
two_ranks 3 "$WORK/after"
sleep 0.05
kill -KILL "$(pgrep -f "dlfsd --mountpoint $WORK/mnt2 ")"
for pid in "${READERS[@]}"; do wait "$pid" || fail "a reader failed after node 2 died"; done
"$PYTHON" "$CHECK" bytes "$WORK/data" "$WORK"/after/*.tar || fail "views read while node 2 died are wrong"
log "node 2 killed mid-epoch: nodes 0 and 1 read exact views ($(stat_field "$WORK/mnt0" 's["datasets"][0]["views"]["epochs"]["backend_bytes"]') view bytes from the backend on node 0)"

# Node 2 restarts (its mount went with it) and catches up: nodes 0 and 1
# read epoch 4; node 2, whose rank reads nothing, loads its part of the
# rounds they are at and serves it.
fusermount3 -u -z "$WORK/mnt2" 2>/dev/null || umount -l "$WORK/mnt2" 2>/dev/null || true
node 2 cluster "" "$WORK/d2-restart.log"
joined ""
two_ranks 4 "$WORK/restart"
for pid in "${READERS[@]}"; do wait "$pid" || fail "a reader of epoch 4 failed"; done
"$PYTHON" "$CHECK" bytes "$WORK/data" "$WORK"/restart/*.tar || fail "views read beside a restarted node are wrong"
cat "$WORK/mnt2/.dlfs/stats" >"$WORK/restart-stats2.json"
"$PYTHON" "$CHECK" follow 4 "$WORK/restart-stats2.json" --caught-up || fail "the restarted node did not catch up with the others' rounds"
log "ok"
