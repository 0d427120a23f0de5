#!/usr/bin/env python3
"""Fashion-MNIST as WebDataset shards (<key>.png + <key>.cls) through DLFS.

  check_fashion_mnist_wds.py make SHARDS_DIR TOOLS_DIR COUNT
      the first COUNT training images as PNGs (python3-pil) with their labels,
      in 10 shards written by Python's tarfile.
  check_fashion_mnist_wds.py check DS_DIR TOOLS_DIR COUNT
      per epoch (0, 1) and rank (W = 2), a PyTorch DataLoader with 2 workers
      over dlfs.TarViewDataset decodes every PNG: every image exactly once
      per epoch across the ranks, equal to the source image, with its label.
"""
import io
import os
import sys
import tarfile

from checklib import fail

W, SHARDS = 2, 10


def make(out, tools, count):
    sys.path.insert(0, tools)
    from fashion_mnist import load_images, load_labels
    from PIL import Image
    images, labels, count = load_images("train"), load_labels("train"), int(count)
    os.makedirs(out)
    per = (count + SHARDS - 1) // SHARDS
    for s in range(SHARDS):
        with tarfile.open(os.path.join(out, f"fmnist-{s:03d}.tar"), "w") as tar:
            for i in range(s * per, min(count, (s + 1) * per)):
                png = io.BytesIO()
                Image.frombytes("L", (28, 28), images[i * 784:(i + 1) * 784]).save(png, format="PNG")
                for ext, data in (("png", png.getvalue()), ("cls", str(labels[i]).encode())):
                    info = tarfile.TarInfo(f"{i:06d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return 0


def decode(sample):
    """(image index, 28x28 uint8 tensor, label) from (key, {"png", "cls"})."""
    import numpy
    import torch
    from PIL import Image
    key, members = sample
    image = numpy.asarray(Image.open(io.BytesIO(members["png"])), dtype=numpy.uint8)
    return int(key), torch.from_numpy(image.copy()), int(members["cls"])


def check(ds_dir, tools, count):
    import torch
    import dlfs
    sys.path.insert(0, tools)
    from fashion_mnist import load_images, load_labels
    images, labels, count = load_images("train"), load_labels("train"), int(count)
    source = torch.frombuffer(bytearray(images[:count * 784]), dtype=torch.uint8).view(count, 28, 28)
    for epoch in (0, 1):
        seen = torch.zeros(count, dtype=torch.int64)
        for rank in range(W):
            ds = dlfs.TarViewDataset(ds_dir, epoch=epoch, rank=rank, world_size=W, transform=decode)
            for ids, imgs, labs in torch.utils.data.DataLoader(ds, batch_size=256, num_workers=2):
                if not torch.equal(imgs, source[ids]):
                    fail(f"epoch {epoch} rank {rank}: decoded images differ from the source images")
                want = torch.tensor([labels[i] for i in ids.tolist()])
                if not torch.equal(labs, want):
                    fail(f"epoch {epoch} rank {rank}: labels differ from the source labels")
                seen.index_add_(0, ids, torch.ones_like(ids))
        if not bool((seen == 1).all()):
            fail(f"epoch {epoch}: {int((seen == 0).sum())} images never read, {int((seen > 1).sum())} read twice")
    print(f"ok: {count} images once per epoch across {W} ranks, with their labels")
    return 0


if __name__ == "__main__":
    sys.exit({"make": make, "check": check}[sys.argv[1]](*sys.argv[2:]))
