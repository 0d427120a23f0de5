#!/usr/bin/env python3
"""One task of a Slurm job step reads its own epoch view, as a trainer would.

Used by 24_real_slurm.sh, as the COMMAND that deploy/dlfs-slurm-launch.sh
runs with srun:

  check_slurm_rank.py MNT DATASET BACKEND OUTDIR [--epoch 0] [--daemon-env NAME=VALUE]

The rank and the world size come from Slurm (SLURM_PROCID, SLURM_NTASKS), so
the check also proves srun gave every task its place. The task reads
MNT/DATASET/epochs/E/W/RANK.tar with tarfile and asserts that its members are
the samples its .index lists, in order, each with the backend file's bytes;
it writes the member names to OUTDIR/rankR.names for the scenario to check
that the ranks together cover the dataset. With --daemon-env, rank 0 also
asserts that the dlfsd serving MNT (found in /proc) has NAME=VALUE in its
environment: the launcher's steps must pass the job's environment on.
"""
import argparse
import os
import tarfile

from checklib import fail


def index_names(path):
    """Sample names of a .index view, in view order (last column, after the header)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if not lines or not lines[0].startswith("# dlfs view"):
        fail(f"{path}: no '# dlfs view' header")
    return [line.split("\t")[-1] for line in lines[1:] if line]


def daemon_environ(mnt):
    """The environment of the dlfsd process whose --mountpoint is MNT."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if not argv[0].endswith(b"dlfsd") or b"--mountpoint" not in argv:
                continue
            if argv[argv.index(b"--mountpoint") + 1] != mnt.encode():
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                return f.read().split(b"\0")
        except (OSError, IndexError):
            continue  # a process that ended meanwhile, or not a dlfsd
    fail(f"no dlfsd with --mountpoint {mnt} on this node")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mnt")
    ap.add_argument("dataset")
    ap.add_argument("backend")
    ap.add_argument("outdir")
    ap.add_argument("--epoch", type=int, default=0)
    ap.add_argument("--daemon-env", help="NAME=VALUE that rank 0 expects in the daemon's environment")
    args = ap.parse_args()
    try:
        rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
    except (KeyError, ValueError) as e:
        fail(f"not a Slurm task (SLURM_PROCID, SLURM_NTASKS): {e}")

    view = os.path.join(args.mnt, args.dataset, "epochs", str(args.epoch), str(world))
    want = index_names(f"{view}/{rank}.index")
    got = []
    with tarfile.open(f"{view}/{rank}.tar", "r:") as tar:
        for member in tar:
            data = tar.extractfile(member).read()
            with open(os.path.join(args.backend, member.name), "rb") as f:
                if data != f.read():
                    fail(f"rank {rank}/{world}: member {member.name} differs from the backend file")
            got.append(member.name)
    if got != want:
        fail(f"rank {rank}/{world}: the tar holds {len(got)} members, the index lists {len(want)} (or another order)")
    with open(os.path.join(args.outdir, f"rank{rank}.names"), "w", encoding="utf-8") as f:
        f.write("\n".join(got) + "\n")

    if args.daemon_env and rank == 0 and args.daemon_env.encode() not in daemon_environ(args.mnt):
        fail(f"the daemon's environment lacks {args.daemon_env}")
    print(f"rank {rank} of {world}: {len(got)} members equal the backend")


if __name__ == "__main__":
    main()
