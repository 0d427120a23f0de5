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
"$PYTHON" - "$WORK/mnt/fmnist/epochs" "$TOOLS" <<'PY' || fail "PyTorch DataLoader through the epoch views"
import sys, tarfile, time, warnings
warnings.filterwarnings("ignore", message="This DataLoader will create")
import numpy as np
import torch
sys.path.insert(0, sys.argv[2])
from fashion_mnist import EpochBinView, load_images, load_labels, read_index

epochs = sys.argv[1]
labels = load_labels("train")
images = np.frombuffer(load_images("train"), dtype=np.uint8).reshape(-1, 784)
n = len(labels)
assert n == 60000 and images.shape[0] == n

def stream(epoch, rank):
    view = f"{epochs}/{epoch}/2/{rank}"
    ds = EpochBinView(view, labels)
    loader = torch.utils.data.DataLoader(ds, batch_size=256, num_workers=3, shuffle=False)
    ids, t0 = [], time.perf_counter()
    for img, lab, sid in loader:
        sid = sid.numpy()
        got = (img.view(-1, 784) * 255).round().to(torch.uint8).numpy()
        assert (got == images[sid]).all(), f"epoch {epoch} rank {rank}: an image differs from the IDX file"
        assert (lab.numpy() == np.frombuffer(labels, np.uint8)[sid]).all(), "a label differs"
        ids.extend(sid.tolist())
    rate = len(ids) / (time.perf_counter() - t0)
    assert ids == ds.ids, f"epoch {epoch} rank {rank}: the DataLoader's order is not the planned order"
    return ids, rate

orders = {}
for epoch in (0, 1):
    both = []
    for rank in (0, 1):
        ids, rate = stream(epoch, rank)
        orders[(epoch, rank)] = ids
        both += ids
        print(f"epoch {epoch} rank {rank}: {len(ids)} images, {rate:,.0f} images/s through the DataLoader")
    assert len(both) == n and sorted(both) == list(range(n)), f"epoch {epoch}: not every image exactly once"
assert orders[(0, 0)] != orders[(1, 0)], "epochs 0 and 1 have the same order"
assert stream(0, 0)[0] == orders[(0, 0)], "reading epoch 0 again gave another order"

# The tar view: member names give the sample id back (<file>/<record>.bin).
meta, rows = read_index(f"{epochs}/0/2/0")
with tarfile.open(f"{epochs}/0/2/0.tar") as t:
    for k, m in enumerate(t):
        if k == 500:
            break
        sid = int(m.name.rsplit("/", 1)[1].split(".")[0])
        assert sid == rows[k][1], f"tar member {k} is {m.name}, index says sample {rows[k][1]}"
        assert t.extractfile(m).read() == images[sid].tobytes(), f"tar member {m.name} differs"
print("ok: every image once per epoch across 2 ranks, right labels, planned order, tar view consistent")
PY
stop_daemon "$DAEMON_PID" "$WORK/mnt"
log "ok"
