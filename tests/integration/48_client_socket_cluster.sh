#!/usr/bin/env bash
# The client socket on a node of a two-node cluster (network namespaces, UCX
# over tcp), read as an unprivileged user: samples of this node's stripe
# are located in its memory, the other node's are fetched from it (one-sided
# gets) and staged, and every rank's view equals the mount's, on both
# nodes. Then rounds over the two nodes' memory (a dataset 3x their budget):
# the same, every sample staged from a round buffer or the other node.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
require_fuse
command -v nsenter >/dev/null || skip "nsenter (util-linux) not installed"
require_netns ucx
N=2
PORT_BASE=$(free_port_base $N)
CHECK="$(dirname "$0")/check_client_socket.py"
outsider_setup
"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 400 --size 12K --size-jitter 0.5 --dirs 4 --seed 48 >/dev/null
make_token "$WORK/token"
ucx_cluster_up "c$$" $N "$PORT_BASE"
PEERS=$(IFS=,; echo "${PEER_ADDRS[*]}")

# pass TAG [FLAGS...]: both nodes' daemons (mountpoints mnt<TAG><i>), joined.
pass() {
  local tag=$1 i
  shift
  PIDS=()
  for i in 0 1; do
    DAEMON_WRAP=(nsenter "--net=/var/run/netns/${NETNS_NAMES[$i]}" --)
    start_daemon "$WORK/mnt$tag$i" "$WORK/$tag$i.log" --backend "$WORK/data" --name d --seed 48 \
      --extent-size 64KiB --peers "$PEERS" --rank "$i" --token-file "$WORK/token" "$@"
    PIDS+=("$DAEMON_PID")
  done
  DAEMON_WRAP=()
  up() { stat_field "$WORK/mnt$tag$1" 'sum(m["state"] in ("up", "self") for m in s["cluster"]["members"])'; }
  for _ in $(seq 1 200); do
    [ "$(up 0)" = 2 ] && [ "$(up 1)" = 2 ] && return 0
    sleep 0.1
  done
  fail "pass $tag: the nodes did not join: $(tail -3 "$WORK/${tag}0.log" "$WORK/${tag}1.log")"
}

# Striped: each node holds half; both read every rank's view of W 2.
pass s
wait_loaded "$WORK/mnts0"
wait_loaded "$WORK/mnts1"
for i in 0 1; do
  "${OUTSIDER[@]}" "$PYTHON" "$CHECK" formats "$WORK/mnts$i" d:both --worlds 2 ||
    fail "node $i's client socket on a striped dataset"
done
got=$(stat_field "$WORK/mnts0" 's["datasets"][0]["bytes_by_source"]["remote"]')
[ "${got:-0}" -gt 0 ] || fail "node 0 read no byte from node 1 (bytes_by_source.remote = $got)"
log "striped: node 0 fetched $got bytes from node 1 (for the socket and for the mount's views)"
for i in 0 1; do stop_daemon "${PIDS[$i]}" "$WORK/mnts$i"; done

# Rounds over the two nodes' memory: 1.6 MiB each, the dataset about 5 MB.
pass r --memory-budget 1600KiB --round-chunk 64KiB
for i in 0 1; do
  "${OUTSIDER[@]}" "$PYTHON" "$CHECK" formats "$WORK/mntr$i" d:staged --worlds 2 ||
    fail "node $i's client socket on a dataset in rounds over the nodes"
done
for i in 0 1; do stop_daemon "${PIDS[$i]}" "$WORK/mntr$i"; done
log "ok"
