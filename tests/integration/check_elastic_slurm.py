#!/usr/bin/env python3
"""One task of an elastic PyTorch job under Slurm (52_elastic_slurm.sh):

  check_elastic_slurm.py first  DATASET_DIR OUTDIR --epoch E --batch B --stop K0,K1,...
  check_elastic_slurm.py resume DATASET_DIR OUTDIR --epoch E --batch B

The rank and world size come from Slurm (SLURM_PROCID, SLURM_NTASKS).
`first`: reads its rank's view of epoch E with dlfs.TarViewDataset in a
DataLoader (2 workers, batches of B, block_samples=B: the planned order),
stops after K_rank batches as if the job were killed there, and writes its
checkpoint (OUTDIR/ckpt-rank<r>.json: world size, samples consumed) and the
sample names it trained on (OUTDIR/first-rank<r>.names).
`resume`: the job restarted on another world size: every rank reads all the
checkpoints and reads the rest of the epoch with
TarViewDataset(resume_from=(W, consumed)), writing OUTDIR/resume-rank<r>.names.
"""
import argparse
import json
import os

import torch.utils.data

import dlfs
from checklib import fail


def keep(batch):  # samples are (key, {ext: bytes}): the keys are what is checked
    return [key for key, _ in batch]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=("first", "resume"))
    ap.add_argument("dataset_dir")
    ap.add_argument("outdir")
    ap.add_argument("--epoch", type=int, default=0)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--stop", help="batches each rank of the first run reads before it stops")
    a = ap.parse_args()
    try:
        rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
    except (KeyError, ValueError) as e:
        fail(f"not a Slurm task (SLURM_PROCID, SLURM_NTASKS): {e}")
    resume_from = None
    if a.phase == "resume":
        ckpts = [json.load(open(os.path.join(a.outdir, f), encoding="utf-8"))
                 for f in sorted(os.listdir(a.outdir)) if f.startswith("ckpt-rank")]
        ckpts.sort(key=lambda c: c["rank"])
        old_world = ckpts[0]["world_size"] if ckpts else 0
        if [c["rank"] for c in ckpts] != list(range(old_world)):
            fail(f"rank {rank}/{world}: checkpoints of ranks {[c['rank'] for c in ckpts]}, want 0..{old_world - 1}")
        resume_from = (old_world, [c["consumed"] for c in ckpts])
    ds = dlfs.TarViewDataset(a.dataset_dir, epoch=a.epoch, rank=rank, world_size=world, block_samples=a.batch,
                             resume_from=resume_from)
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, num_workers=2, collate_fn=keep)
    stop = int(a.stop.split(",")[rank]) if a.phase == "first" else None
    names = []
    for i, batch in enumerate(loader):
        if stop is not None and i == stop:
            break  # the job is killed here: what was trained on is in the checkpoint
        names += batch
    with open(os.path.join(a.outdir, f"{a.phase}-rank{rank}.names"), "w", encoding="utf-8") as f:
        f.write("".join(n + "\n" for n in names))
    if a.phase == "first":
        with open(os.path.join(a.outdir, f"ckpt-rank{rank}.json"), "w", encoding="utf-8") as f:
            json.dump({"rank": rank, "world_size": world, "consumed": len(names)}, f)
        print(f"rank {rank} of {world}: stopped after {len(names)} samples of epoch {a.epoch}")
    else:
        print(f"rank {rank} of {world}: resumed epoch {a.epoch} after {sum(resume_from[1])} samples of "
              f"{resume_from[0]} ranks, read {len(names)}")


if __name__ == "__main__":
    main()
