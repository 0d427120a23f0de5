#!/usr/bin/env bash
# libdlfs-client (docs/client.md) on a real mount: the views read through the
# library equal the mount's (ids of the .index, bytes of the .tar), for two
# epochs and world sizes 1 and 2, and the members of WebDataset shards' samples; a reader keeps going across dlfsd's
# restart (the library reconnects); dlfs-bench-client reads a view and its
# JSON holds sane figures. Skips while dlfsd serves no client socket.
source "$(dirname "$0")/lib.sh"
require_fuse
: "${DLFS_CLIENT_LIB:?DLFS_CLIENT_LIB must point at libdlfs-client.so}"
: "${DLFS_BENCH_CLIENT:?DLFS_BENCH_CLIENT must point at dlfs-bench-client}"
CHECK="$(dirname "$0")/check_c_client.py"

"$PYTHON" "$GEN_DATASET" files "$WORK/files" --count 1500 --size 3K --size-jitter 0.5 --dirs 6 --seed 5 >/dev/null
args=(--backend "$WORK/files" --name ds --seed 11 --world-size 2)
start_daemon "$WORK/mnt" "$WORK/d.log" "${args[@]}"
DS_PID=$DAEMON_PID
wait_loaded "$WORK/mnt"
"$PYTHON" - "$WORK/mnt/ds/epochs/0/1/0.index" <<'PY' || skip "dlfsd serves no client socket (no user.dlfs.client_socket)"
import os, sys
os.getxattr(sys.argv[1], "user.dlfs.client_socket")
PY

"$PYTHON" "$CHECK" "$DLFS_CLIENT_LIB" "$WORK/mnt/ds" views 0,1 1,2 || fail "the library's views differ from the mount's"

# WebDataset shards: grouped samples whose members have tar headers between them.
"$PYTHON" "$(dirname "$0")/check_cluster_rounds_formats.py" make wds "$WORK/shards" || fail "making the shards"
start_daemon "$WORK/mntw" "$WORK/w.log" --backend "$WORK/shards" --name wds --format tar --seed 3
wait_loaded "$WORK/mntw"
"$PYTHON" "$CHECK" "$DLFS_CLIENT_LIB" "$WORK/mntw/wds" members 2 || fail "the library's members of tar shards"
stop_daemon "$DAEMON_PID" "$WORK/mntw"

# A reader across a restart: it reads half the view, dlfsd restarts, it reads the rest.
"$PYTHON" "$CHECK" "$DLFS_CLIENT_LIB" "$WORK/mnt/ds" restart "$WORK/half" "$WORK/go" &
reader=$!
for _ in $(seq 1 300); do [ -e "$WORK/half" ] && break; kill -0 "$reader" 2>/dev/null || break; sleep 0.1; done
[ -e "$WORK/half" ] || fail "the reader did not read the first half"
stop_daemon "$DS_PID" "$WORK/mnt"
start_daemon "$WORK/mnt" "$WORK/d2.log" "${args[@]}"
touch "$WORK/go"
wait_exit "$reader" 120
[ "$WAIT_RC" -eq 0 ] || fail "the reader across dlfsd's restart failed ($WAIT_RC)"

"$DLFS_BENCH_CLIENT" "$WORK/mnt/ds" --epoch 1 --world-size 2 --rank 1 --batch 64 --repeat 3 --json "$WORK/bench.json" ||
  fail "dlfs-bench-client failed"
"$PYTHON" - "$WORK/bench.json" <<'PY' || fail "dlfs-bench-client's JSON is not sane"
import json, sys
b = json.load(open(sys.argv[1]))
assert b["samples"] == 750 and b["bytes"] > 0, b
assert b["api"]["gb_per_s"] > 0 and b["memcpy"]["gb_per_s"] > 0 and b["ratio"] > 0, b
assert len(b["api"]["seconds"]) == 3, b
PY
stop_daemon "$DAEMON_PID" "$WORK/mnt"
log "ok"
