#!/usr/bin/python3
"""Validation accuracy against the randomization level (DeepIO Fig. 7 and 8),
measured: a small CNN trained on Fashion-MNIST on the CPU, reading its
training images through DLFS epoch views.

Configurations (each its own dlfsd on its own mount, same seeds, same model
initialisation, same epochs):
  R=1         the whole dataset in memory: a full shuffle every epoch
  R=0.5       two rounds per epoch (entropy-aware opportunistic ordering)
  R=0.25      four rounds per epoch
  constant    the same order every epoch (epoch 0's view, read again): RL 0

The RL printed for R < 1 is what dlfsd computes (DeepIO eq. 1-5), read from
the view's index header. Validation uses the t10k split, read directly.
Not a CI test: it takes minutes. Needs root (FUSE mounts).

usage: shuffle_accuracy.py [--epochs 5] [--configs 1,0.5,0.25,constant]
                           [--round-chunk 64KiB] [--json out.json] [--dlfsd PATH]
                           [--plots DIR]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "tools"))
sys.path.insert(0, os.path.join(SRC, "tools/bench"))
warnings.filterwarnings("ignore", message="This DataLoader will create")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import plots  # noqa: E402
from fashion_mnist import EpochBinView, load_images, load_labels, prepare  # noqa: E402


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))

    def forward(self, x):
        return self.head(self.features(x))


def start_dlfsd(dlfsd, backend, mnt, sock, extra, log_path):
    os.makedirs(mnt, exist_ok=True)
    log = open(log_path, "w")
    p = subprocess.Popen([dlfsd, "--mountpoint", mnt, "--backend", backend, "--name", "fmnist", "--format", "fixed",
                          "--record-size", "784", "--header-bytes", "16", "--seed", "2024",
                          "--control-socket", sock, *extra], stdout=log, stderr=subprocess.STDOUT)
    for _ in range(300):
        if p.poll() is not None:
            sys.exit(f"dlfsd exited with {p.returncode}:\n" + open(log_path).read())
        if os.path.exists(os.path.join(mnt, ".dlfs/stats")):
            return p
        time.sleep(0.1)
    p.kill()
    sys.exit("dlfsd did not mount within 30 s:\n" + open(log_path).read())


def stop_dlfsd(p, mnt):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
    with open("/proc/mounts") as f:
        if f" {mnt} " in f.read():
            subprocess.run(["fusermount3", "-u", "-z", mnt], check=False)


def evaluate(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), 1000):
            correct += (model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item()
    model.train()
    return correct / len(x)


def train(mnt, constant, epochs, labels, val_x, val_y, batch, lr):
    torch.manual_seed(0)  # the same initial weights for every configuration
    model = SmallCNN()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    accs, rl = [], None
    for epoch in range(epochs):
        view = os.path.join(mnt, "fmnist/epochs", str(0 if constant else epoch), "1", "0")
        ds = EpochBinView(view, labels)
        rl = 0.0 if constant else float(ds.meta["rl"])
        loader = torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=2, shuffle=False)
        for img, lab, _ in loader:
            opt.zero_grad()
            loss_fn(model(img), lab.long()).backward()
            opt.step()
        accs.append(evaluate(model, val_x, val_y))
        print(f"    epoch {epoch}: validation accuracy {accs[-1] * 100:.2f}%", flush=True)
    return rl, accs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--configs", default="1,0.5,0.25,constant")
    ap.add_argument("--round-chunk", default="64KiB", help="dlfsd --round-chunk for R < 1")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--dlfsd", default=os.path.join(SRC, "build/fs/dlfsd"))
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--plots", help="directory for accuracy_vs_rl.png (default: --json's directory, else the work dir)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("shuffle_accuracy.py: needs root (FUSE mounts)")
    torch.set_num_threads(2)
    work = tempfile.mkdtemp(prefix="dlfs-rl-")
    backend = prepare(work, "train")
    labels = load_labels("train")
    val_x = torch.from_numpy(np.frombuffer(load_images("t10k"), np.uint8).reshape(-1, 1, 28, 28).astype(np.float32) / 255)
    val_y = torch.from_numpy(np.frombuffer(load_labels("t10k"), np.uint8).astype(np.int64))
    results = []
    for cfg in a.configs.split(","):
        constant = cfg == "constant"
        ratio = 1.0 if constant else float(cfg)
        extra = [] if ratio >= 1 else ["--shuffle-ratio", str(ratio), "--round-chunk", a.round_chunk]
        mnt = os.path.join(work, f"mnt-{cfg}")
        p = start_dlfsd(a.dlfsd, backend, mnt, os.path.join(work, f"{cfg}.sock"), extra,
                        os.path.join(work, f"dlfsd-{cfg}.log"))
        print(f"{cfg}:", flush=True)
        t0 = time.perf_counter()
        try:
            rl, accs = train(mnt, constant, a.epochs, labels, val_x, val_y, a.batch, a.lr)
        finally:
            stop_dlfsd(p, mnt)
        results.append({"config": cfg, "shuffle_ratio": ratio, "rl": rl, "accuracy": accs,
                        "seconds": time.perf_counter() - t0})
    print()
    print(f"{'config':<10} {'RL':>8}  {'accuracy per epoch (%)':<40} {'final':>7} {'time s':>7}")
    for r in results:
        per = " ".join(f"{x * 100:.2f}" for x in r["accuracy"])
        print(f"{r['config']:<10} {r['rl'] * 100:>7.2f}%  {per:<40} {r['accuracy'][-1] * 100:>6.2f}% "
              f"{r['seconds']:>7.0f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    plots.save("accuracy_vs_rl", results, a.plots or plots.default_dir(a.json, work),
               f"{len(labels):,} training images, round chunk {a.round_chunk}, {plots.machine()}")


if __name__ == "__main__":
    main()
