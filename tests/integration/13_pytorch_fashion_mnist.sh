#!/usr/bin/env bash
# A real client: PyTorch's DataLoader (3 worker processes) reads Debian's
# Fashion-MNIST through the epoch views of W = 2 ranks and gets every training
# image exactly once per epoch, with its right label, in the planned order;
# the tar view of the same epoch holds the same images under names that give
# the sample id back.
source "$(dirname "$0")/lib.sh"
require_fuse
"$PYTHON" -c 'import torch' 2>/dev/null || skip "python3-torch is not installed"
[ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || skip "dataset-fashion-mnist is not installed"
TOOLS="$(cd "$(dirname "$0")/../../tools" && pwd)"

backend=$("$PYTHON" "$TOOLS/fashion_mnist.py" prepare "$WORK/fmnist")
start_daemon "$WORK/mnt" "$WORK/d.log" --backend "$backend" --name fmnist --format fixed --record-size 784 \
  --header-bytes 16 --seed 11 --world-size 2
"$PYTHON" "$(dirname "$0")/check_pytorch_loader.py" "$WORK/mnt/fmnist/epochs" "$TOOLS" ||
  fail "PyTorch DataLoader through the epoch views"
stop_daemon "$DAEMON_PID" "$WORK/mnt"
log "ok"
