#!/usr/bin/env bash
# Issue 33: NVIDIA DALI, a client nobody here wrote, reads DLFS unchanged:
# CPU pipelines (device_id=None; this machine has no GPU) of the project
# venv's nvidia-dali, run by an unprivileged user (60001, no groups) against
# one dlfsd serving three world-readable datasets (check_client_dali.py):
#  (a) TFRecord files of tf.train.Examples (TensorFlow's writer), indexed by
#      `dlfs-ctl tfrecord index` before dlfsd starts (dlfsd locates the
#      records by those .idx files, and raw/ shows them as they are):
#      fn.readers.tfrecord over raw/ with them yields every record with the
#      features it was written with, in order, as over the backend; over
#      each rank's .tfrecord view with the DALI index dlfsd serves beside it,
#      <r>.tfrecord.idx (the same index DALI's tfrecord2idx makes through the mount,
#      and dlfs-ctl makes of a copy of the view) it yields the .index's
#      records in order; by mmap (DALI's default), read() and O_DIRECT;
#  (b) WebDataset shards (--format tar: WebDataset's first-dot keys, as
#      DALI's): fn.readers.webdataset over each rank's .tar view, without an
#      index, with the index DALI's wds2idx makes of it through the mount,
#      and by read(), yields each sample once, its members as in the backend
#      shards, in the .index's order; over raw/'s shards as over the backend's;
#  (c) an image tree of JPEGs (PIL) in class directories: fn.readers.file +
#      fn.decoders.image(device="cpu") over raw/ decode the same images with
#      the same labels as the same pipeline over the backend directory; over
#      the files of each rank's <r>/ directory view, the .index's images in
#      order, decoded as the backend's;
#  each with random_shuffle=True once: the same multiset of samples.
# A part whose reader needs a GPU is skipped with the reason (none here).
source "$(dirname "$0")/lib.sh"
require_fuse
require_venv nvidia.dali
export TF_CPP_MIN_LOG_LEVEL=2 TF_ENABLE_ONEDNN_OPTS=0  # TensorFlow's C++ banners (it writes the TFRecord files)
VENV_BIN=$(dirname "$VENV_PYTHON")
for tool in tfrecord2idx wds2idx; do [ -x "$VENV_BIN/$tool" ] || skip "DALI's $tool is not in $VENV_BIN: run tools/install-deps.sh"; done
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CHECK="$HERE/check_client_dali.py"
TF_SEED=45

outsider_setup
# HOMEs in WORK (matplotlib, which keras imports, writes its cache there): root's, the outsider's.
mkdir "$WORK/home-root"
rc=0
HOME="$WORK/home-root" "$VENV_PYTHON" "$HERE/check_client_tensorflow.py" make "$WORK/tfrecords" 3 40 "$TF_SEED" || rc=$?
[ "$rc" -eq 77 ] && skip "$VENV_PYTHON cannot import tensorflow, which writes the TFRecord files: run tools/install-deps.sh"
[ "$rc" -eq 0 ] || fail "writing the TFRecord files with TensorFlow"
"$DLFS_CTL" tfrecord index "$WORK/tfrecords" | grep -q "^wrote 3 indexes" || fail "dlfs-ctl tfrecord index"
"$VENV_PYTHON" "$CHECK" make-shards "$WORK/shards" 4 12 45 || fail "making the WebDataset shards"
"$VENV_PYTHON" "$CHECK" make-images "$WORK/images" 3 8 45 || fail "making the JPEGs"

cat >"$WORK/dlfs.toml" <<TOML
[[dataset]]
name = "tf"
backend = "$WORK/tfrecords"
format = "tfrecord"
seed = 5
world_size = 2
[[dataset]]
name = "wds"
backend = "$WORK/shards"
format = "tar"
seed = 6
world_size = 2
[[dataset]]
name = "images"
backend = "$WORK/images"
seed = 7
world_size = 2
TOML
MNT="$WORK/mnt"
start_daemon "$MNT" "$WORK/d.log" --config "$WORK/dlfs.toml"
wait_loaded "$MNT"
grep -q "120 records in 3 TFRecord files (3 located by their .idx, 0 by a scan)" "$WORK/d.log" ||
  { cat "$WORK/d.log" >&2; fail "dlfsd should locate the 120 records by the 3 .idx files"; }
[ "$(stat_field "$MNT" '[d["samples"] for d in s["datasets"] if d["name"] == "wds"][0]')" = 48 ] ||
  fail "the WebDataset shards should serve 48 samples (first-dot keys)"

# The indexes DALI's own tools make of the views, through the mount, as the
# outsider (into OUT, its directory); dlfs-ctl's of a copy of each .tfrecord view.
OUT="$WORK/out"
install -d -o 60001 -g 60001 "$OUT" "$OUT/copies"
as_outsider() { HOME="$WORK/home" PYTHONPATH="$REPO/python" "${OUTSIDER[@]}" "$@"; }
for r in 0 1; do
  as_outsider "$VENV_BIN/tfrecord2idx" "$MNT/tf/epochs/0/2/$r.tfrecord" "$OUT/tfrecord2idx-0-2-$r.idx" ||
    fail "tfrecord2idx on the view tf/epochs/0/2/$r.tfrecord"
  as_outsider cp "$MNT/tf/epochs/0/2/$r.tfrecord" "$OUT/copies/0-2-$r.tfrecord" || fail "copying a .tfrecord view"
  as_outsider "$VENV_BIN/wds2idx" "$MNT/wds/epochs/0/2/$r.tar" "$OUT/wds2idx-0-2-$r.idx" >/dev/null ||
    fail "wds2idx on the view wds/epochs/0/2/$r.tar"
done
as_outsider "$DLFS_CTL" tfrecord index "$OUT/copies" | grep -q "^wrote 2 indexes" || fail "dlfs-ctl tfrecord index of the copies"

rc=0
as_outsider "$VENV_PYTHON" "$CHECK" check --mnt "$MNT" --out "$OUT" --tfrecord "tf:$WORK/tfrecords:$TF_SEED" \
  --shards "wds:$WORK/shards" --images "images:$WORK/images" || rc=$?
[ "$rc" -eq 77 ] && skip "every DALI reader needs a GPU here"
[ "$rc" -eq 0 ] || fail "DALI does not read DLFS as it reads the backend (FAIL line above)"
stop_daemon "$DAEMON_PID" "$MNT"
log "ok"
