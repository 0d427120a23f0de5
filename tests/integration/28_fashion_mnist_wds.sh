#!/usr/bin/env bash
# Fashion-MNIST stored as WebDataset shards (<key>.png + <key>.cls, made with
# python3-pil and tarfile), served with format "tar": a PyTorch DataLoader
# (2 workers) per rank, W = 2, over dlfs.TarViewDataset decodes every image
# exactly once per epoch, equal to the source image, with its label.
source "$(dirname "$0")/lib.sh"
require_fuse
"$PYTHON" -c 'import torch' 2>/dev/null || skip "python3-torch is not installed"
"$PYTHON" -c 'import PIL' 2>/dev/null || skip "python3-pil is not installed"
[ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || skip "dataset-fashion-mnist is not installed"
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
CHECK="$(dirname "$0")/check_fashion_mnist_wds.py"
COUNT=${FMNIST_WDS_COUNT:-60000}  # the whole training split (about 100 s here); set fewer for a quick run

"$PYTHON" "$CHECK" make "$WORK/shards" "$SRC/tools" "$COUNT" || fail "making the shards"
# --format tar alone: WebDataset's key rule (first-dot) is the default, as a user of webdataset expects.
start_daemon "$WORK/mnt" "$WORK/d.log" --backend "$WORK/shards" --name fmnist --format tar \
  --seed 3 --world-size 2
wait_loaded "$WORK/mnt"
PYTHONPATH="$SRC/python" "$PYTHON" "$CHECK" check "$WORK/mnt/fmnist" "$SRC/tools" "$COUNT" ||
  fail "Fashion-MNIST WebDataset through the DataLoader"
stop_daemon "$DAEMON_PID" "$WORK/mnt"
log "ok"
