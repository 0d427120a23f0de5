#!/usr/bin/env python3
"""A real client: PyTorch's DataLoader (3 worker processes, batches of 256)
reads Fashion-MNIST's training set through the .bin epoch views of W = 2
ranks (tools/fashion_mnist.py's EpochBinView) and checks: every image equals
the IDX file's and has its label; each rank's DataLoader order is the planned
order (the .index); across the ranks every image comes exactly once per epoch
(epochs 0 and 1); the two epochs have different orders; reading epoch 0
again gives the same order; the first 500 members of epoch 0 rank 0's tar
view are named after the index's sample ids and hold the same images.

Used by 13_pytorch_fashion_mnist.sh:

  check_pytorch_loader.py MNT/DATASET/epochs TOOLS_DIR

TOOLS_DIR holds fashion_mnist.py (EpochBinView, load_images, load_labels,
read_index).
"""
import argparse
import sys
import tarfile
import time
import warnings

from checklib import fail


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("epochs", help="the dataset's epochs directory (MNT/DATASET/epochs)")
    ap.add_argument("tools", help="the directory of fashion_mnist.py")
    args = ap.parse_args()

    warnings.filterwarnings("ignore", message="This DataLoader will create")
    import numpy as np
    import torch
    sys.path.insert(0, args.tools)
    from fashion_mnist import EpochBinView, load_images, load_labels, read_index

    epochs = args.epochs
    labels = load_labels("train")
    images = np.frombuffer(load_images("train"), dtype=np.uint8).reshape(-1, 784)
    n = len(labels)
    if not (n == 60000 and images.shape[0] == n):
        fail(f"the IDX files hold {n} labels and {images.shape[0]} images, want 60000 of each")

    def stream(epoch, rank):
        view = f"{epochs}/{epoch}/2/{rank}"
        ds = EpochBinView(view, labels)
        loader = torch.utils.data.DataLoader(ds, batch_size=256, num_workers=3, shuffle=False)
        ids, t0 = [], time.perf_counter()
        for img, lab, sid in loader:
            sid = sid.numpy()
            got = (img.view(-1, 784) * 255).round().to(torch.uint8).numpy()
            if not (got == images[sid]).all():
                fail(f"epoch {epoch} rank {rank}: an image differs from the IDX file")
            if not (lab.numpy() == np.frombuffer(labels, np.uint8)[sid]).all():
                fail(f"epoch {epoch} rank {rank}: a label differs")
            ids.extend(sid.tolist())
        rate = len(ids) / (time.perf_counter() - t0)
        if ids != ds.ids:
            fail(f"epoch {epoch} rank {rank}: the DataLoader's order is not the planned order")
        return ids, rate

    orders = {}
    for epoch in (0, 1):
        both = []
        for rank in (0, 1):
            ids, rate = stream(epoch, rank)
            orders[(epoch, rank)] = ids
            both += ids
            print(f"epoch {epoch} rank {rank}: {len(ids)} images, {rate:,.0f} images/s through the DataLoader")
        if not (len(both) == n and sorted(both) == list(range(n))):
            fail(f"epoch {epoch}: not every image exactly once")
    if orders[(0, 0)] == orders[(1, 0)]:
        fail("epochs 0 and 1 have the same order")
    if stream(0, 0)[0] != orders[(0, 0)]:
        fail("reading epoch 0 again gave another order")

    # The tar view: member names give the sample id back (<file>/<record>.bin).
    meta, rows = read_index(f"{epochs}/0/2/0")
    with tarfile.open(f"{epochs}/0/2/0.tar") as t:
        for k, m in enumerate(t):
            if k == 500:
                break
            sid = int(m.name.rsplit("/", 1)[1].split(".")[0])
            if sid != rows[k][1]:
                fail(f"tar member {k} is {m.name}, index says sample {rows[k][1]}")
            if t.extractfile(m).read() != images[sid].tobytes():
                fail(f"tar member {m.name} differs")
    print("ok: every image once per epoch across 2 ranks, right labels, planned order, tar view consistent")


if __name__ == "__main__":
    main()
