#!/usr/bin/env python3
"""torchvision's ImageFolder (0.14), unchanged, reads a DLFS raw/ tree (issue 33).

  check_client_torchvision.py make DIR
      an ImageFolder tree: 4 class directories of 30 real images each, JPEG
      and PNG (RGB, RGBA, L, P) of sizes from 12 to 96 pixels made with PIL,
      and a few files that are not images (ImageFolder skips them).
  check_client_torchvision.py check --backend DIR --root MNT/NAME/raw [--root ...]
      Runs as the unprivileged user. For each mounted root, against
      ImageFolder over the backend directory: the same classes, class_to_idx
      and sample list (paths relative to the root, targets); every file's
      bytes; every image decoded (PIL, RGB) to the same pixels; through
      DataLoaders with 2 workers, ToTensor alone (one sample a batch) gives
      the backend's tensors, and recipe_imagefolder (Resize + ToTensor,
      batches of 16, shuffle with a seeded generator) the backend's batches
      in the backend's order.
"""
import argparse
import os
import sys

from checklib import fail

CLASSES = ["airplane", "bird", "cat", "frog"]
PER_CLASS = 30
WORKERS = 2


# --- The recipe (docs/clients.md quotes it) ---------------------------------------------------

def recipe_imagefolder(root, seed=0):
    """An ImageFolder tree read through DLFS's raw/ exactly as from a local directory:
    resized tensors, shuffled batches, 2 DataLoader workers."""
    import torch
    from torchvision import datasets, transforms
    tf = transforms.Compose([transforms.Resize((32, 32)), transforms.ToTensor()])
    ds = datasets.ImageFolder(root, transform=tf)
    loader = torch.utils.data.DataLoader(ds, batch_size=16, shuffle=True, num_workers=2,
                                         generator=torch.Generator().manual_seed(seed))
    return ds, loader


# --- Making the backend -----------------------------------------------------------------------

def one_image(rs, k):
    """A real image: a gradient with noise of a random size and mode, as JPEG or PNG."""
    import numpy as np
    from PIL import Image
    w, h = int(rs.randint(12, 97)), int(rs.randint(12, 97))
    yy, xx = np.mgrid[0:h, 0:w]
    base = (xx * 255 // w + yy * 128 // h)[..., None] + np.arange(4) * 60 + rs.randint(0, 50, (h, w, 4))
    rgba = (base % 256).astype(np.uint8)
    if k % 3 == 0:
        return Image.fromarray(rgba[..., :3], "RGB"), "jpg", {"quality": int(rs.randint(50, 96))}
    mode = ["RGB", "RGBA", "L", "P"][k % 4]
    img = Image.fromarray(rgba, "RGBA")
    img = img.convert("RGB").quantize(64) if mode == "P" else img.convert(mode)
    return img, "png", {}


def make(out):
    import numpy as np
    rs = np.random.RandomState(42)
    for c, name in enumerate(CLASSES):
        d = os.path.join(out, name)
        os.makedirs(d)
        for k in range(PER_CLASS):
            img, ext, opts = one_image(rs, k + c)
            img.save(os.path.join(d, f"{name}_{k:03d}.{ext.upper() if k % 7 == 0 else ext}"), **opts)
        with open(os.path.join(d, "notes.txt"), "w") as f:
            f.write(f"{name}: not an image\n")
    with open(os.path.join(out, "README"), "w") as f:
        f.write("an ImageFolder tree\n")
    return 0


# --- Checks -----------------------------------------------------------------------------------

def rel_samples(ds):
    return [(os.path.relpath(path, ds.root), target) for path, target in ds.samples]


def read_bytes(path):
    with open(path, "rb", buffering=0) as f:
        return f.read()


def check_listing(where, ds, ref):
    """The same classes, mapping and samples as ImageFolder over the backend."""
    if ds.classes != ref.classes or ds.class_to_idx != ref.class_to_idx:
        fail(f"{where}: classes {ds.classes} / {ds.class_to_idx}, the backend's {ref.classes} / {ref.class_to_idx}")
    if rel_samples(ds) != rel_samples(ref):
        fail(f"{where}: {len(ds.samples)} samples, the backend's {len(ref.samples)}: lists differ")
    if len(ds) != len(CLASSES) * PER_CLASS:
        fail(f"{where}: {len(ds)} samples, want {len(CLASSES) * PER_CLASS} (non-images must be skipped)")


def check_images(where, ds, ref):
    """Every file's bytes, and every image decoded to the backend image's pixels."""
    import numpy as np
    for i, ((path, target), (ref_path, _)) in enumerate(zip(ds.samples, ref.samples)):
        if read_bytes(path) != read_bytes(ref_path):
            fail(f"{where}: {path}: bytes differ from the backend's")
        img, t = ds[i]
        ref_img, _ = ref[i]
        if t != target or img.mode != "RGB" or img.size != ref_img.size:
            fail(f"{where}: {path}: target {t} mode {img.mode} size {img.size}, want {target} RGB {ref_img.size}")
        if not np.array_equal(np.asarray(img), np.asarray(ref_img)):
            fail(f"{where}: {path}: decoded pixels differ from the backend image's")


def one_each(batch):
    return batch


def check_to_tensor(where, root, ref):
    """ToTensor alone, 2 workers, one sample a batch: the backend's tensors in sample order."""
    import torch
    from torchvision import datasets, transforms
    ds = datasets.ImageFolder(root, transform=transforms.ToTensor())
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=WORKERS)
    n = 0
    for i, (x, target) in enumerate(loader):
        want = transforms.functional.to_tensor(ref[i][0])
        if target != ref.targets[i] or x.shape != want.shape or not torch.equal(x, want):
            fail(f"{where}: ToTensor sample {i} ({ref.samples[i][0]}): tensor {tuple(x.shape)} target {target}, "
                 f"the backend's {tuple(want.shape)} {ref.targets[i]}, or other values")
        n += 1
    if n != len(ref):
        fail(f"{where}: ToTensor DataLoader yielded {n} samples, want {len(ref)}")


def check_recipe(where, root, backend):
    """recipe_imagefolder over the mount gives the batches it gives over the backend."""
    import torch
    _, loader = recipe_imagefolder(root, seed=7)
    _, ref_loader = recipe_imagefolder(backend, seed=7)
    got, ref = list(loader), list(ref_loader)
    if len(got) != len(ref):
        fail(f"{where}: recipe_imagefolder: {len(got)} batches, the backend's {len(ref)}")
    for b, ((x, y), (rx, ry)) in enumerate(zip(got, ref)):
        if not torch.equal(y, ry) or not torch.equal(x, rx):
            fail(f"{where}: recipe_imagefolder: batch {b} differs from the backend's (targets or pixels)")
    if torch.equal(torch.cat([y for _, y in got]), torch.tensor(sorted(torch.cat([y for _, y in got]).tolist()))):
        fail(f"{where}: recipe_imagefolder: targets in sorted order: not shuffled")
    return sum(len(y) for _, y in got)


def check(a):
    import torchvision
    from torchvision import datasets
    ref = datasets.ImageFolder(a.backend)
    print(f"backend: {len(ref)} images in {len(ref.classes)} classes; read as uid {os.getuid()} "
          f"with torchvision {torchvision.__version__}")
    for root in a.root:
        ds = datasets.ImageFolder(root)
        check_listing(root, ds, ref)
        check_images(root, ds, ref)
        check_to_tensor(root, root, ref)
        n = check_recipe(root, root, a.backend)
        print(f"  {root}: classes, class_to_idx, {len(ds)} samples, bytes and pixels as the backend's; "
              f"ToTensor and recipe_imagefolder ({n} samples in shuffled batches) with {WORKERS} workers too")
    return 0


def main():
    if sys.argv[1] == "make":
        return make(sys.argv[2])
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["check"])
    ap.add_argument("--backend", required=True)
    ap.add_argument("--root", action="append", required=True, help="an ImageFolder root in a mount")
    return check(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
