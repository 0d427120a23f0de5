#!/usr/bin/env bash
# Issue 33, clients no one here wrote: Hugging Face datasets (4.8.5) and
# pyarrow (23.0.1), from the project's environment, unchanged, read Parquet
# and Arrow files through a dataset's raw/ as from the backend directory.
# The backend: 3 Parquet files written by pyarrow (snappy, zstd, none; row
# groups of 25 rows) and a dataset saved with Dataset.save_to_disk (3 Arrow
# IPC files). Two root dlfsd over it: one as deployed (raw/ under the
# read-only overlay), one with --raw-overlay off. As an unprivileged user
# (uid 60001, no groups), offline (HF_HUB_OFFLINE=1, and in a network
# namespace of its own when unshare works), for each mount
# (check_client_hf_datasets.py):
#  - load_dataset("parquet", data_files=<raw>/parquet/*.parquet),
#    load_dataset(<raw>/parquet) (builder inferred from the listing) and
#    Dataset.from_parquet: every row as pyarrow reads it from the backend,
#    in order; all convert into Arrow files in the cache ($WORK/hf), which
#    the dataset maps (the mount is read once, at the conversion);
#  - Dataset.load_from_disk(<raw>/arrow_ds) memory-maps the .arrow files
#    from the mount itself (cache_files and /proc/self/maps name them):
#    every row, 40 at random, the features as over the backend;
#  - pyarrow.parquet.read_table of each file, 3 row groups each at random,
#    pyarrow.memory_map + ipc.open_stream of each .arrow file: the backend's
#    tables.
source "$(dirname "$0")/lib.sh"
require_fuse
command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
require_venv datasets pyarrow.parquet
HERE="$(cd "$(dirname "$0")" && pwd)"
CHECK="$HERE/check_client_hf_datasets.py"
HF_ENV=(HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 HF_HOME="$WORK/hf/home" HF_DATASETS_CACHE="$WORK/hf/cache")
NONET=()
unshare --net true 2>/dev/null && NONET=(unshare --net)
READER=("${NONET[@]}" setpriv --reuid=60001 --regid=60001 --clear-groups
  env HOME="$WORK/hf/home" PYTHONDONTWRITEBYTECODE=1 "${HF_ENV[@]}")
t0=$(date +%s)

umask 022
chmod 0755 "$WORK"  # root's 0700 mktemp directory: the reader must reach the mounts and the backend
mkdir -p "$WORK/hf/home" "$WORK/hf/cache" && chown -R 60001:60001 "$WORK/hf"
env HF_HUB_OFFLINE=1 HF_HOME="$WORK/maker-hf" "$VENV_PYTHON" "$CHECK" make "$WORK/tables" || fail "making the Parquet and Arrow files"

start_daemon "$WORK/mnt" "$WORK/d.log" --backend "$WORK/tables" --name tables
start_daemon "$WORK/mnt-plain" "$WORK/d-plain.log" --backend "$WORK/tables" --name tables --raw-overlay off
wait_loaded "$WORK/mnt"
wait_loaded "$WORK/mnt-plain"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || true
if grep -qw overlay /proc/filesystems; then
  for _ in $(seq 1 100); do grep -q " $WORK/mnt/tables/raw overlay" /proc/mounts && break; sleep 0.1; done
  grep -q " $WORK/mnt/tables/raw overlay" /proc/mounts || fail "no raw overlay over $WORK/mnt/tables/raw"
fi
log "reader: uid 60001${NONET:+, no network (unshare --net)}; raw/ of mnt $(grep -q " $WORK/mnt/tables/raw overlay" /proc/mounts && echo "under the raw overlay" || echo "without overlay"), mnt-plain without"

"${READER[@]}" "$VENV_PYTHON" "$CHECK" check --backend "$WORK/tables" --cache "$WORK/hf/cache" \
  --raw "$WORK/mnt/tables/raw" --raw "$WORK/mnt-plain/tables/raw" ||
  fail "datasets and pyarrow through raw/ (as uid 60001)"
if find "$WORK/hf/cache" -name '*.arrow' | grep -q .; then
  log "the datasets cache holds $(find "$WORK/hf/cache" -name '*.arrow' | wc -l) converted Arrow files"
else
  fail "load_dataset('parquet') left no Arrow file in $WORK/hf/cache"
fi

stop_daemon "${DAEMON_PIDS[0]}" "$WORK/mnt"
stop_daemon "${DAEMON_PIDS[1]}" "$WORK/mnt-plain"
log "ok in $(($(date +%s) - t0)) s"
