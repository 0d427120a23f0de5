#!/usr/bin/env bash
# An elastic PyTorch job under a real Slurm (slurm_lib.sh), through
# deploy/dlfs-slurm-launch.sh and python/dlfs: a job of 4 ranks reads part
# of epoch 1 with TarViewDataset in 2-worker DataLoaders and stops mid-epoch,
# each rank at its own batch, writing how many samples it consumed (its
# checkpoint); a second job of 3 ranks resumes the epoch from those counts
# with resume_from= (the resume views, docs/views.md). Across both jobs
# every sample of the epoch is trained on exactly once.
# Skips (77) only where Slurm cannot be installed or started, or torch is missing.
DLFS_SCENARIO_TIMEOUT=${DLFS_SCENARIO_TIMEOUT:-840}  # apt-get may be slow; meson allows 900 s
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/slurm_lib.sh"
require_fuse
"$PYTHON" -c "import torch" 2>/dev/null || skip "$PYTHON cannot import torch"
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
LAUNCH=$ROOT/deploy/dlfs-slurm-launch.sh
slurm_install
slurm_up
cd "$WORK"
[ -e /tmp/dlfs-0 ] || CLEANUP_HOOKS+=("rmdir /tmp/dlfs-0 2>/dev/null")

N=301
"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count $N --size 4K --size-jitter 0.7 --dirs 5 --seed 8 >/dev/null
MNT=$WORK/mnt
MOUNTS+=("$MNT")
printf '[cache]\nmemory_budget = "256MiB"\n[[dataset]]\nname = "d"\nbackend = "%s"\nformat = "files"\nseed = 11\n' \
  "$WORK/data" >"$WORK/job.toml"
mkdir -p "$WORK/out"
job_failed() { cat "$2" >&2; slurm_tails; fail "$1"; }
# run_job NAME NTASKS ARGS...: one job of NTASKS ranks (overcommitted: this
# host may have fewer CPUs) running check_elastic_slurm.py ARGS under the launcher.
run_job() {
  local name=$1 n=$2; shift 2
  printf '#!/bin/bash\nexec "%s" --config "%s" --mountpoint "%s" -- "%s" "%s" %s\n' \
    "$LAUNCH" "$WORK/job.toml" "$MNT" "$PYTHON" "$HERE/check_elastic_slurm.py" "$*" >"$WORK/$name.sh"
  PYTHONPATH=$ROOT/python:$HERE slurm_submit --ntasks="$n" --overcommit --mem=1G --job-name="dlfs-$name" \
    -o "$WORK/$name.out" "$WORK/$name.sh"
  slurm_wait_job "$SLURM_JOB" 300
  if [ "$JOB_STATE" != COMPLETED ] || [ "$(job_field "$SLURM_JOB" ExitCode)" != 0:0 ]; then
    job_failed "job $name ended $JOB_STATE, exit code $(job_field "$SLURM_JOB" ExitCode)" "$WORK/$name.out"
  fi
  if grep -q " $MNT fuse" /proc/mounts; then fail "job $name: $MNT still mounted after the job"; fi
}

# 301 samples, pad, W 4: 76 each. Batches of 8; ranks stop after 3, 2, 2, 1
# batches: 64 consumed, 237 left, 79 for each of 3 ranks (no pad).
t0=$SECONDS
run_job first 4 first "$MNT/d" "$WORK/out" --epoch 1 --batch 8 --stop 3,2,2,1
for r in 0 1 2 3; do
  want=$((8 * (r == 0 ? 3 : r == 3 ? 1 : 2)))
  grep -q "^rank $r of 4: stopped after $want samples of epoch 1" "$WORK/first.out" ||
    job_failed "job first: rank $r did not stop after $want samples" "$WORK/first.out"
done
log "first job: 4 ranks stopped mid-epoch after 24, 16, 16, 8 samples ($((SECONDS - t0)) s)"
t0=$SECONDS
run_job resume 3 resume "$MNT/d" "$WORK/out" --epoch 1 --batch 8
for r in 0 1 2; do
  grep -q "^rank $r of 3: resumed epoch 1 after 64 samples of 4 ranks, read 79" "$WORK/resume.out" ||
    job_failed "job resume: rank $r did not read its 79 samples" "$WORK/resume.out"
done
# The keys TarViewDataset yields: member names up to the first dot of the base name.
(cd "$WORK/data" && find . -type f | sed -E 's|^\./||; s|^((.*/)?[^/.]*)\..*$|\1|' | LC_ALL=C sort) >"$WORK/all.names"
[ "$(uniq -d "$WORK/all.names")" = "" ] || fail "the generated dataset has two files with one key"
cat "$WORK"/out/first-rank*.names "$WORK"/out/resume-rank*.names | LC_ALL=C sort >"$WORK/seen.names"
dups=$(uniq -d "$WORK/seen.names" | head -5)
[ -z "$dups" ] || fail "samples trained on twice across the two jobs: $dups"
cmp -s "$WORK/seen.names" "$WORK/all.names" ||
  fail "the two jobs together trained on $(wc -l <"$WORK/seen.names") samples, not the epoch's $N"
log "resume job: 3 ranks read the other 237, every sample of the epoch once across both jobs ($((SECONDS - t0)) s)"
log "ok"
