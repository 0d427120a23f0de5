#!/usr/bin/env bash
# The client socket (docs/client-protocol.md), spoken by a client written
# from the spec (client_wire.py), against the mount as the reference:
#  - every dataset format (files, sample groups, fixed records, LMDB,
#    TFRecord, WebDataset tar shards): each rank's view for W 1 and 3 through
#    the socket equals the mount's .tar view, sample by sample and member by
#    member, every sample located in the dataset memory once loaded;
#  - a dataset in rounds (W 2): the same, with samples staged;
#  - no FUSE request for a view read through the socket;
#  - an unprivileged user: reads a dataset it may read, is refused one it
#    may not (EACCES, and says who may);
#  - hostile clients (fuzzed packets, 16 bad requests in a row, a flood of
#    connections, a client killed mid-read): the daemon serves on, bytes right;
#  - a daemon stopped under a client: the client's mapped samples keep their
#    bytes, its next request sees the connection closed; a new daemon serves.
source "$(dirname "$0")/lib.sh"
require_fuse
HERE="$(cd "$(dirname "$0")" && pwd)"
CHECK="$HERE/check_client_socket.py"
MAKE="$HERE/check_cluster_rounds_formats.py"
outsider_setup

KINDS=(files groups tfrecord wds)
"$PYTHON" -c 'import lmdb' 2>/dev/null && KINDS+=(lmdb) ||
  log "the LMDB dataset is left out: python3-lmdb is not installed (tools/install-deps.sh installs it)"
for k in "${KINDS[@]}"; do "$PYTHON" "$MAKE" make "$k" "$WORK/src/$k" || fail "making the $k dataset"; done
"$PYTHON" "$GEN_DATASET" fixed "$WORK/src/fixed" --records 3000 --record-size 1024 --files 3 --header 16 >/dev/null

{
  printf '[cache]\nmemory_budget = "256MiB"\n\n'
  for k in "${KINDS[@]}" fixed; do
    printf '[[dataset]]\nname = "%s"\nbackend = "%s"\nseed = 5\n' "$k" "$WORK/src/$k"
    case $k in
      tfrecord) echo 'format = "tfrecord"' ;;
      lmdb) echo 'format = "lmdb"' ;;
      wds) echo 'format = "tar"' ;;
      groups) echo 'group_by = "first-dot"' ;;
      fixed) printf 'format = "fixed"\nrecord_size = 1024\nheader_bytes = 16\n' ;;
    esac
    echo
  done
  # Only root may read this one: its backend directory is 0700.
  printf '[[dataset]]\nname = "private"\nbackend = "%s"\n\n' "$WORK/src/private"
} >"$WORK/all.toml"
"$PYTHON" "$GEN_DATASET" files "$WORK/src/private" --count 50 --size 2K --seed 2 >/dev/null
chmod 0700 "$WORK/src/private"
start_daemon "$WORK/mnt" "$WORK/all.log" --config "$WORK/all.toml"
MAIN_PID=$DAEMON_PID
wait_loaded "$WORK/mnt"
SOCK=$(getfattr --only-values -n user.dlfs.client_socket "$WORK/mnt/files/epochs/0/1/0.index") ||
  fail "view files do not name the client socket"
[ "$(stat -c %a "$SOCK")" = 666 ] || fail "the client socket $SOCK is mode $(stat -c %a "$SOCK"), not 0666"

names=()
for k in "${KINDS[@]}" fixed; do names+=("$k:memory"); done
"$PYTHON" "$CHECK" formats "$WORK/mnt" "${names[@]}" --worlds 1,3 || fail "formats through the socket"
CTL_SOCK=$(ctl_socket "$WORK/mnt")
"$PYTHON" "$CHECK" fuse "$CTL_SOCK" "$WORK/mnt" files || fail "FUSE requests on the socket path"

# As an unprivileged user: a public dataset reads, the private one is refused.
"${OUTSIDER[@]}" "$PYTHON" "$CHECK" formats "$WORK/mnt" files:memory --worlds 2 ||
  fail "uid 60001 reading a public dataset through the socket"
"${OUTSIDER[@]}" "$PYTHON" "$CHECK" refused "$SOCK" private || fail "uid 60001 and the private dataset"
stat_field "$WORK/mnt" 's["client"]["refused"]' | grep -qx 1 || fail "the refusal is not counted in the stats"

"${OUTSIDER[@]}" "$PYTHON" "$CHECK" hostile "$WORK/mnt" files || fail "hostile clients"
# A client killed in the middle of reading batches.
"${OUTSIDER[@]}" "$PYTHON" "$CHECK" formats "$WORK/mnt" groups --worlds 1 >/dev/null 2>&1 &
victim=$!
sleep 0.3
kill -9 "$victim" 2>/dev/null || true
wait "$victim" 2>/dev/null || true
kill -0 "$MAIN_PID" || fail "dlfsd died under hostile clients"
"$PYTHON" "$CHECK" formats "$WORK/mnt" files:memory groups:memory --worlds 2 || fail "serving after hostile clients"

# A dataset in rounds (R 0.25 of its 6 MB): samples staged, bytes right, W 2.
start_daemon "$WORK/mntr" "$WORK/rounds.log" --backend "$WORK/src/files" --name rounds --seed 5 \
  --memory-budget 3MiB --shuffle-ratio 0.25 --extent-size 64KiB
wait_loaded "$WORK/mntr"
"$PYTHON" "$CHECK" formats "$WORK/mntr" rounds:staged --worlds 2 || fail "a dataset in rounds through the socket"

# The daemon stops under a client holding mapped samples; then a new daemon serves.
mkfifo "$WORK/go"
"$PYTHON" "$CHECK" hold "$WORK/mntr" rounds "$WORK/go" >"$WORK/hold.out" 2>&1 &
holder=$!
for _ in $(seq 1 100); do grep -q holding "$WORK/hold.out" && break; sleep 0.1; done
grep -q holding "$WORK/hold.out" || { cat "$WORK/hold.out"; fail "the holding client did not start"; }
stop_daemon "$DAEMON_PID" "$WORK/mntr"
echo stopped >"$WORK/go"
wait "$holder" || { cat "$WORK/hold.out"; fail "a client of a stopped daemon"; }
cat "$WORK/hold.out"
start_daemon "$WORK/mntr" "$WORK/rounds2.log" --backend "$WORK/src/files" --name rounds --seed 5 \
  --memory-budget 3MiB --shuffle-ratio 0.25 --extent-size 64KiB
wait_loaded "$WORK/mntr"
"$PYTHON" "$CHECK" formats "$WORK/mntr" rounds --worlds 1 || fail "the restarted daemon's socket"
stop_daemon "$DAEMON_PID" "$WORK/mntr"
stop_daemon "$MAIN_PID" "$WORK/mnt"
[ ! -e "$SOCK" ] || fail "the client socket $SOCK is left after dlfsd stopped"
log "ok"
