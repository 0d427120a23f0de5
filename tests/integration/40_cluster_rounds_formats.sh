#!/usr/bin/env bash
# Rounds over the job's memory (issue 37) for every dataset format, several
# datasets in one config: three nodes in network namespaces (UCX over tcp,
# as 39_cluster_rounds), one TOML file (the same on every node but the rank)
# with a small plain-files dataset that fits the budget striped ("fit"), then
# a TFRecord dataset, an LMDB dataset (python3-lmdb), WebDataset tar shards,
# plain files in opportunistic order, and files in sample groups (group_by
# first-dot), each larger than the memory the three nodes have left for it
# together (about 6 MB against 3 x 1.5 MiB: R about 0.3).
#
# By default one pass: every dataset with a shuffle_ratio of its own, the
# budget shared by all of them (each takes the round slots its R needs, in
# config order), all streamed by the three nodes at the same time (W = 3,
# two epochs, as training would). DLFS_ROUNDS_SHARED=0 runs one pass per
# format instead, the config in a rotated order (fit, the format under test,
# the others; no shuffle_ratio: the format under test takes what fit left).
# Checks: every sample served is the source's, byte for byte, by the method
# of that format's single-node scenario, and across the ranks of an epoch
# every sample appears once (padding aside); each dataset's rounds span the
# 3 nodes (plan.round_nodes); each node loaded its part of every round of
# both epochs, in one sequence, each once (a node whose readers start over
# 1 s after the others', as can happen with fifteen readers starting on two
# cores, finds the first rounds released idle and starts later: noted, a
# failure with DLFS_ROUNDS_STRICT=1), and got bytes of rounds from the others;
# RL is DeepIO's formula's, and the nodes read about the dataset once per
# epoch from the backend. Printed per dataset: R, RL, rounds per epoch,
# backend bytes per epoch over all nodes against the dataset's size, bytes
# from peers.
#
# Knobs (debugging):
#   DLFS_ROUNDS_ONLY=tfr,lmdb,wds,opp,grp   these datasets only;
#   DLFS_ROUNDS_SHARED=0   one pass per format (above);
#   DLFS_ROUNDS_STRICT=1   a node that skips rounds fails the test;
#   DLFS_ROUNDS_LATE=S     the last node's readers start S seconds late (it
#                          starts at the round the others read: follow);
#   DLFS_ROUNDS_TF_EMPTY=K every Kth TFRecord record empty.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
require_fuse
command -v nsenter >/dev/null || skip "nsenter (util-linux) not installed"
require_netns ucx
N=3
EPOCHS=2
HERE="$(cd "$(dirname "$0")" && pwd)"
CHECK="$HERE/check_cluster_rounds_formats.py"
export PYTHONPATH="$HERE/../../python${PYTHONPATH:+:$PYTHONPATH}"
PORT_BASE=$(free_port_base $N)
SHARED=${DLFS_ROUNDS_SHARED:-1}
LATE=${DLFS_ROUNDS_LATE:-0}
STRICT=${DLFS_ROUNDS_STRICT:-0}

# Datasets (name:kind) of about 6 MB each, in rounds over the 1.5 MiB a node
# has left after "fit" (300 KB, striped over the nodes): R 0.29-0.38, 3-4
# rounds per epoch, about 0.7 MB of each round a rank (rounds much smaller
# than the kernel's 1 MiB reads send more reads across rounds to the backend).
BUDGET=$((1600 * 1024))
CHUNK=64KiB
WINDOW=32
DATASETS=(tfr:tfrecord lmdb:lmdb wds:wds opp:files grp:groups)
if ! "$PYTHON" -c 'import lmdb' 2>/dev/null; then
  log "the LMDB dataset is left out: python3-lmdb is not installed (tools/install-deps.sh installs it)"
  DATASETS=(tfr:tfrecord wds:wds opp:files grp:groups)
fi
if [ -n "${DLFS_ROUNDS_ONLY:-}" ]; then
  kept=()
  for d in "${DATASETS[@]}"; do [[ ,$DLFS_ROUNDS_ONLY, == *,${d%%:*},* ]] && kept+=("$d"); done
  DATASETS=("${kept[@]}")
fi
TF_EMPTY=${DLFS_ROUNDS_TF_EMPTY:-0}
for d in "${DATASETS[@]}"; do
  "$PYTHON" "$CHECK" make "${d#*:}" "$WORK/src/${d%%:*}" --empty-every "$TF_EMPTY" || fail "making the ${d%%:*} dataset"
done
"$PYTHON" "$GEN_DATASET" files "$WORK/src/fit" --count 60 --size 5K --dirs 3 --seed 40 >/dev/null
for d in "${DATASETS[@]}"; do
  log "${d%%:*} (${d#*:}): $(du -sb --apparent-size "$WORK/src/${d%%:*}" | cut -f1) bytes"
done

make_token "$WORK/token"
ucx_cluster_up "f$$" $N "$PORT_BASE"
PEERS=$(printf '"%s",' "${PEER_ADDRS[@]}")  # TOML strings
PEERS=${PEERS%,}

# dataset_toml NAME [RATIO]: NAME's [[dataset]] table.
dataset_toml() {
  local name=$1 kind ratio=${2:-} d
  for d in "${DATASETS[@]}" fit:fit; do [ "${d%%:*}" = "$name" ] && kind=${d#*:}; done
  printf '[[dataset]]\nname = "%s"\nbackend = "%s"\nseed = 40\nround_chunk = "%s"\n' "$name" "$WORK/src/$name" "$CHUNK"
  case $kind in
    tfrecord) echo 'format = "tfrecord"' ;;
    lmdb) echo 'format = "lmdb"' ;;
    wds) printf 'format = "tar"\ngroup_by = "first-dot"\n' ;;
    groups) echo 'group_by = "first-dot"' ;;
  esac
  [ "$name" = opp ] && printf 'order = "opportunistic"\nopportunistic_window = %d\n' $WINDOW
  [ -n "$ratio" ] && echo "shuffle_ratio = $ratio"
  echo
}

# cluster P BUDGET RATIO NAME...: starts the three daemons of pass P
# (mountpoints mnt-P-<i>) with one config file each: [cache] with BUDGET,
# the cluster, the datasets NAME... in that order (each with shuffle_ratio
# RATIO unless it is empty; never "fit"). Waits for the joins; sets PIDS.
cluster() {
  local p=$1 budget=$2 ratio=$3 i name
  shift 3
  PIDS=()
  for i in $(seq 0 $((N - 1))); do
    {
      printf '[cache]\nmemory_budget = "%d"\nextent_size = "%s"\n\n' "$budget" "$CHUNK"
      printf '[cluster]\npeers = [%s]\nrank = %d\ntoken_file = "%s"\n\n' "$PEERS" "$i" "$WORK/token"
      for name in "$@"; do dataset_toml "$name" "$([ "$name" = fit ] || echo "$ratio")"; done
    } >"$WORK/$p-c$i.toml"
    DAEMON_WRAP=(nsenter "--net=/var/run/netns/${NETNS_NAMES[$i]}" --)
    start_daemon "$WORK/mnt-$p-$i" "$WORK/$p-d$i.log" --config "$WORK/$p-c$i.toml"
    PIDS+=("$DAEMON_PID")
  done
  DAEMON_WRAP=()
  up() { stat_field "$WORK/mnt-$p-$1" 'sum(m["state"] in ("up", "self") for m in s["cluster"]["members"])'; }
  for _ in $(seq 1 200); do
    ok=1
    for i in $(seq 0 $((N - 1))); do [ "$(up "$i")" = $N ] || ok=0; done
    [ $ok = 1 ] && break
    sleep 0.1
  done
  [ $ok = 1 ] || fail "pass $p: the nodes did not all join: $(for i in 0 1 2; do tail -3 "$WORK/$p-d$i.log"; done)"
}

# stream P NAME...: each node streams its rank's view of each NAME, epoch
# after epoch, all nodes and datasets at once, into
# $WORK/views-P/NAME/epochs/<e>/N/<rank>.<tar|tfrecord> (TFRecord: the
# .tfrecord view in epoch 0, the .tar in the others); then copies the
# .index of each (the plan: no data read) and the .tar's user.dlfs.order
# (<rank>.order).
stream() {
  local p=$1 i e name ext pids=()
  shift
  for name in "$@"; do
    for i in $(seq 0 $((N - 1))); do
      (
        [ "$i" = $((N - 1)) ] && sleep "$LATE"
        for e in $(seq 0 $((EPOCHS - 1))); do
          ext=tar
          [ "$name" = tfr ] && [ "$e" = 0 ] && ext=tfrecord
          mkdir -p "$WORK/views-$p/$name/epochs/$e/$N"
          cat "$WORK/mnt-$p-$i/$name/epochs/$e/$N/$i.$ext" >"$WORK/views-$p/$name/epochs/$e/$N/$i.$ext"
        done
      ) &
      pids+=($!)
    done
  done
  for pid in "${pids[@]}"; do wait "$pid" || fail "pass $p: a node's reader failed"; done
  for name in "$@"; do
    for i in $(seq 0 $((N - 1))); do
      for e in $(seq 0 $((EPOCHS - 1))); do
        cat "$WORK/mnt-$p-$i/$name/epochs/$e/$N/$i.index" >"$WORK/views-$p/$name/epochs/$e/$N/$i.index"
        "$PYTHON" -c 'import os, sys; sys.stdout.buffer.write(os.getxattr(sys.argv[1], "user.dlfs.order"))' \
          "$WORK/mnt-$p-$i/$name/epochs/$e/$N/$i.tar" >"$WORK/views-$p/$name/epochs/$e/$N/$i.order"
      done
    done
  done
}

# check_views P NAME: NAME's streamed views.
check_views() {
  local p=$1 name=$2 kind=files d
  for d in "${DATASETS[@]}"; do [ "${d%%:*}" = "$name" ] && kind=${d#*:}; done
  log "pass $p: $name's views"
  "$PYTHON" "$CHECK" views "$kind" "$WORK/src/$name" $EPOCHS $N "$WORK/views-$p/$name" \
    $([ "$name" = opp ] && echo "--window $WINDOW") || fail "pass $p: the streamed views of $name are wrong"
}

# check_rounds P NAME [STATS ARGS...]: NAME's rounds in the nodes' logs and stats.
check_rounds() {
  local p=$1 name=$2
  shift 2
  for i in $(seq 0 $((N - 1))); do
    grep -q "\[$name\] epochs in rounds over the memory of $N nodes" "$WORK/$p-d$i.log" ||
      fail "node $i: $name's rounds do not span the nodes: $(grep -i "\[$name\].*round" "$WORK/$p-d$i.log")"
  done
  "$PYTHON" "$CHECK" stats "$name" $EPOCHS "$WORK"/stats-$p-*.json "$@" $([ "$STRICT" = 1 ] && echo --strict) \
    >"$WORK/figures-$name.txt" ||
    { cat "$WORK/figures-$name.txt"; grep -h "is down\|is back" "$WORK/$p"-d*.log | cut -c1-200;
      fail "pass $p: $name's rounds over the nodes"; }
  cat "$WORK/figures-$name.txt"
}

NAMES=()
for d in "${DATASETS[@]}"; do NAMES+=("${d%%:*}"); done
if [ "$SHARED" = 1 ]; then
  # Every dataset in rounds of R 0.25 (about 0.8 MB over the nodes, 0.27 MB
  # a node and a chunk: two slots of 0.7 MB), the budget of a pass for each.
  cluster shared $((BUDGET * (${#NAMES[@]} + 1))) 0.25 fit "${NAMES[@]}"
  stream shared fit "${NAMES[@]}"
  for i in $(seq 0 $((N - 1))); do cat "$WORK/mnt-shared-$i/.dlfs/stats" >"$WORK/stats-shared-$i.json"; done
  check_views shared fit
  for name in "${NAMES[@]}"; do
    check_views shared "$name"
    check_rounds shared "$name" --ratio 0.25
  done
  for i in $(seq 0 $((N - 1))); do stop_daemon "${PIDS[$i]}" "$WORK/mnt-shared-$i"; done
else
  for name in "${NAMES[@]}"; do
    T0=$SECONDS
    others=()
    for o in "${NAMES[@]}"; do [ "$o" = "$name" ] || others+=("$o"); done
    cluster "$name" $BUDGET "" fit "$name" "${others[@]}"
    stream "$name" fit "$name"
    for i in $(seq 0 $((N - 1))); do cat "$WORK/mnt-$name-$i/.dlfs/stats" >"$WORK/stats-$name-$i.json"; done
    check_views "$name" fit
    check_views "$name" "$name"
    check_rounds "$name" "$name" --budget $BUDGET --before fit
    for i in $(seq 0 $((N - 1))); do stop_daemon "${PIDS[$i]}" "$WORK/mnt-$name-$i"; done
    log "pass $name: $((SECONDS - T0)) s"
  done
fi
log "figures:"
for name in "${NAMES[@]}"; do grep -E "^(\[$name\]|NOTE)" "$WORK/figures-$name.txt"; done
log "ok"
