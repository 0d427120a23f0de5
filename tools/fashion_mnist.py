#!/usr/bin/python3
"""Fashion-MNIST through DLFS epoch views, for PyTorch.

Debian's dataset-fashion-mnist ships IDX files (gzip) under
/usr/share/datasets/fashion-mnist. `prepare` unpacks one split's images into
a directory holding only that file, which dlfsd serves as a fixed-record
dataset (record 784 bytes, header 16 bytes):

  fashion_mnist.py prepare OUTDIR [--split train|t10k]
  dlfsd -m MNT -b OUTDIR/train -n fmnist --format fixed --record-size 784 --header-bytes 16

Sample id k is image k of the split, so its label is labels[k]. In Python:

  from fashion_mnist import EpochBinView, load_labels
  ds = EpochBinView("MNT/fmnist/epochs/0/2/1", load_labels("train"))
  loader = torch.utils.data.DataLoader(ds, batch_size=256, num_workers=3)

EpochBinView reads `<view>.bin` at k x 784 (pread, one descriptor per worker
process) and takes the sample id of position k from `<view>.index`.
"""
import argparse
import gzip
import os
import sys

DATA_DIR = "/usr/share/datasets/fashion-mnist"
RECORD, IMAGES_HEADER, LABELS_HEADER = 784, 16, 8


def idx_path(split, kind):
    path = os.path.join(DATA_DIR, f"{split}-{kind}-ubyte.gz")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found: install Debian's dataset-fashion-mnist package")
    return path


def load_labels(split="train"):
    with gzip.open(idx_path(split, "labels-idx1")) as f:
        return f.read()[LABELS_HEADER:]


def load_images(split="train"):
    """All images of a split as bytes (784 per image, no header)."""
    with gzip.open(idx_path(split, "images-idx3")) as f:
        return f.read()[IMAGES_HEADER:]


def prepare(outdir, split="train"):
    """OUTDIR/<split>/images-idx3-ubyte, the only file there; idempotent."""
    d = os.path.join(outdir, split)
    target = os.path.join(d, "images-idx3-ubyte")
    if os.path.exists(target):
        return d
    os.makedirs(d, exist_ok=True)
    with gzip.open(idx_path(split, "images-idx3")) as src, open(target + ".tmp", "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    os.rename(target + ".tmp", target)
    return d


def read_index(view):
    """(header dict, [(position, sample id, tar offset, length, name)]) of <view>.index."""
    with open(view + ".index") as f:
        head = f.readline()
        if not head.startswith("# dlfs view "):
            raise ValueError(f"{view}.index: not a DLFS view index")
        meta = dict(kv.split("=", 1) for kv in head[len("# dlfs view "):].split())
        rows = []
        for line in f:
            k, sid, off, length, name = line.rstrip("\n").split("\t")
            rows.append((int(k), int(sid), int(off), int(length), name))
    return meta, rows


try:
    import torch

    class EpochBinView(torch.utils.data.Dataset):
        """Map-style dataset over one rank's .bin view: item k is the k-th
        image of the epoch (float 1x28x28 in [0, 1]), its label, its sample id."""

        def __init__(self, view, labels):
            self.path = view + ".bin"
            self.meta, rows = read_index(view)
            self.ids = [r[1] for r in rows]
            self.labels = labels
            self.fd = None
            self.pid = None

        def __len__(self):
            return len(self.ids)

        def __getitem__(self, k):
            if self.fd is None or self.pid != os.getpid():  # DataLoader workers fork: one fd each
                self.fd, self.pid = os.open(self.path, os.O_RDONLY), os.getpid()
            raw = os.pread(self.fd, RECORD, k * RECORD)
            if len(raw) != RECORD:
                raise IOError(f"{self.path}: short read at image {k}")
            img = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(1, 28, 28).float() / 255.0
            sid = self.ids[k]
            return img, self.labels[sid], sid
except ImportError:  # prepare works without torch
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="unpack a split's images for dlfsd")
    p.add_argument("outdir")
    p.add_argument("--split", choices=["train", "t10k"], default="train")
    a = ap.parse_args()
    try:
        print(prepare(a.outdir, a.split))
    except FileNotFoundError as e:
        sys.exit(f"fashion_mnist.py: {e}")


if __name__ == "__main__":
    main()
