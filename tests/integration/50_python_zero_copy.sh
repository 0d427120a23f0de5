#!/usr/bin/env bash
# python/dlfs through dlfsd's client socket (docs/python.md, "Zero-copy
# reads"), as an unprivileged user, against the same classes through the
# mount: files, sample groups, WebDataset shards and fixed records, for W 1
# and 2, one and two workers, TarView samples and batches, SampleBatches,
# BinView, and the torch datasets in DataLoaders of 2 workers. A dlfsd with
# client_socket off: "auto" reads the mount, zero_copy=True is refused. A
# reader across a dlfsd restart reconnects and reads on.
source "$(dirname "$0")/lib.sh"
require_fuse
"$PYTHON" -c 'import torch, numpy' 2>/dev/null || skip "python3-torch or numpy is not installed"
HERE="$(cd "$(dirname "$0")" && pwd)"
CHECK="$HERE/check_python_zero_copy.py"
MAKE="$HERE/check_cluster_rounds_formats.py"
export PYTHONPATH="$HERE/../../python${PYTHONPATH:+:$PYTHONPATH}"
outsider_setup

"$PYTHON" "$GEN_DATASET" files "$WORK/src/files" --count 700 --size 3K --size-jitter 0.5 --dirs 5 --seed 50 >/dev/null
"$PYTHON" "$MAKE" make groups "$WORK/src/groups" || fail "making the groups dataset"
"$PYTHON" "$MAKE" make wds "$WORK/src/wds" || fail "making the shards"
"$PYTHON" "$GEN_DATASET" fixed "$WORK/src/fixed" --records 900 --record-size 512 --files 3 --header 16 >/dev/null
{
  for k in files groups wds fixed; do
    printf '[[dataset]]\nname = "%s"\nbackend = "%s"\nseed = 50\n' "$k" "$WORK/src/$k"
    case $k in
      wds) echo 'format = "tar"' ;;
      groups) echo 'group_by = "first-dot"' ;;
      fixed) printf 'format = "fixed"\nrecord_size = 512\nheader_bytes = 16\n' ;;
    esac
    echo
  done
} >"$WORK/all.toml"
start_daemon "$WORK/mnt" "$WORK/all.log" --config "$WORK/all.toml"
MAIN_PID=$DAEMON_PID
wait_loaded "$WORK/mnt"
for k in files groups wds; do
  "${OUTSIDER[@]}" PYTHONPATH="$PYTHONPATH" "$PYTHON" "$CHECK" same "$WORK/mnt/$k" || fail "python/dlfs on $k"
done
"${OUTSIDER[@]}" PYTHONPATH="$PYTHONPATH" "$PYTHON" "$CHECK" same "$WORK/mnt/fixed" --fixed || fail "python/dlfs on fixed"

# Without a client socket: the mount, and a clear refusal where the socket is required.
start_daemon "$WORK/mnt-off" "$WORK/off.log" --backend "$WORK/src/files" --name files --seed 50 --client-socket off
wait_loaded "$WORK/mnt-off"
"${OUTSIDER[@]}" PYTHONPATH="$PYTHONPATH" "$PYTHON" "$CHECK" fallback "$WORK/mnt-off/files" || fail "the fallback"
stop_daemon "$DAEMON_PID" "$WORK/mnt-off"

# A reader across a restart of dlfsd.
"${OUTSIDER[@]}" PYTHONPATH="$PYTHONPATH" "$PYTHON" "$CHECK" restart "$WORK/mnt/files" "$WORK/home/half" "$WORK/go" &
reader=$!
for _ in $(seq 1 300); do [ -e "$WORK/home/half" ] && break; kill -0 "$reader" 2>/dev/null || break; sleep 0.1; done
[ -e "$WORK/home/half" ] || fail "the reader did not read the first half"
stop_daemon "$MAIN_PID" "$WORK/mnt"
start_daemon "$WORK/mnt" "$WORK/all2.log" --config "$WORK/all.toml"
MAIN_PID=$DAEMON_PID
wait_loaded "$WORK/mnt"
touch "$WORK/go"
wait_exit "$reader" 120
[ "$WAIT_RC" -eq 0 ] || fail "the Python reader across dlfsd's restart failed ($WAIT_RC)"
stop_daemon "$MAIN_PID" "$WORK/mnt"
log "ok"
