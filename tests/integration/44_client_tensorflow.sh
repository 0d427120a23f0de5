#!/usr/bin/env bash
# Issue 33: TensorFlow, a client nobody here wrote, reads DLFS unchanged.
# TFRecord files of tf.train.Example protos written by TensorFlow's own
# tf.io.TFRecordWriter (plain: DLFS reads no compressed TFRecord) are served
# by dlfsd --format tfrecord, and an unprivileged user (60001, no groups; the
# backend is world-readable, so the views are too) reads them with the
# project venv's tensorflow-cpu (check_client_tensorflow.py):
#  - raw/: tf.data.TFRecordDataset over raw/'s files yields the backend's
#    records byte for byte and in order, and tf.io.parse_single_example
#    parses them into the features they were written with;
#    Dataset.list_files + interleave yields each record once;
#  - tf.io.gfile's glob, listdir, walk, stat, isdir and GFile see raw/ as they see
#    the backend directory;
#  - epochs 0 and 1, world size 2: TFRecordDataset over each rank's
#    <r>.tfrecord view yields exactly the records its <r>.index names, in
#    that order, byte for byte and parsed as written; the two ranks together
#    yield every record once; the two epochs' orders differ.
source "$(dirname "$0")/lib.sh"
require_fuse
require_venv  # tensorflow's import (seconds) is checked by the first step
# TensorFlow's C++ banners off (TF_ENABLE_ONEDNN_OPTS=0 only silences the
# oneDNN one here: no op of these checks computes with floats).
export TF_CPP_MIN_LOG_LEVEL=2 TF_ENABLE_ONEDNN_OPTS=0
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CHECK="$HERE/check_client_tensorflow.py"
SEED=44

outsider_setup
# HOMEs in WORK (matplotlib, which keras imports, writes its cache there): root's, the outsider's.
mkdir "$WORK/home-root"
SRC="$WORK/tfrecords"
rc=0
HOME="$WORK/home-root" "$VENV_PYTHON" "$CHECK" make "$SRC" 3 50 "$SEED" || rc=$?  # 77: TensorFlow does not import
[ "$rc" -eq 77 ] && skip "$VENV_PYTHON cannot import tensorflow: run tools/install-deps.sh"
[ "$rc" -eq 0 ] || fail "writing the TFRecord files with TensorFlow"

start_daemon "$WORK/mnt" "$WORK/d.log" --backend "$SRC" --name tf --format tfrecord --seed 7 --world-size 2
wait_loaded "$WORK/mnt"
grep -q "150 records in 3 TFRecord files" "$WORK/d.log" || { cat "$WORK/d.log" >&2; fail "dlfsd should find 150 records in 3 files"; }
HOME="$WORK/home" PYTHONPATH="$REPO/python" "${OUTSIDER[@]}" "$VENV_PYTHON" "$CHECK" check --mnt "$WORK/mnt" --dataset tf \
  --backend "$SRC" --seed "$SEED" --world-size 2 --epochs 0,1 ||
  fail "TensorFlow does not read DLFS as it reads the backend (FAIL line above)"
stop_daemon "$DAEMON_PID" "$WORK/mnt"
log "ok"
