#!/usr/bin/env bash
# deploy/dlfs-slurm-launch.sh, unmodified, under a real Slurm: Debian's
# slurm-wlm (22.05) and munge on this host (slurm_lib.sh), jobs sent with sbatch.
#  A. sbatch -n2: the launcher mounts, each srun task (SLURM_PROCID of
#     SLURM_NTASKS) reads its rank's epoch tar and finds the backend's bytes,
#     the ranks together cover the dataset, the daemon got the job's
#     environment; then nothing is mounted, no dlfsd is left, the default
#     token is removed and the default log is in the submit directory.
#  B. sbatch --export=NONE, a command that exits 3: the job fails with 3,
#     and the launcher still unmounted and stopped the daemon.
#  C. scancel while the command holds a file of the mount open: dlfs-ctl
#     reaches the daemon through `srun --jobid --overlap` first; after the
#     cancel nothing is mounted and no dlfsd is left.
# Skips (77) only where the Slurm daemons cannot start, with their logs.
DLFS_SCENARIO_TIMEOUT=${DLFS_SCENARIO_TIMEOUT:-840}  # apt-get may be slow; meson allows 900 s
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/slurm_lib.sh"
require_fuse
HERE=$(cd "$(dirname "$0")" && pwd)
LAUNCH=$(cd "$HERE/../.." && pwd)/deploy/dlfs-slurm-launch.sh
slurm_install
slurm_up
cd "$WORK"  # the jobs' submit directory: the launcher's default log goes here

N=301
"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count $N --size 6K --size-jitter 0.7 --dirs 5 --seed 8 >/dev/null
MNT=$WORK/mnt
MOUNTS+=("$MNT")
cat >"$WORK/job.toml" <<EOF
[cache]
memory_budget = "256MiB"
[[dataset]]
name = "d"
backend = "$WORK/data"
format = "files"
seed = 11
EOF

# no_daemon_left WHAT: after a job, nothing is mounted at MNT and no dlfsd serves it.
no_daemon_left() {
  if grep -q " $MNT fuse" /proc/mounts; then fail "$1: $MNT still mounted after the job"; fi
  if pgrep -f -- "--mountpoint $MNT" >/dev/null; then fail "$1: a dlfsd is left after the job: $(pgrep -a -f -- "--mountpoint $MNT")"; fi
}
# job_failed WHAT OUTPUT: the failure, with the job's output and the Slurm logs.
job_failed() { cat "$2" >&2; slurm_tails; fail "$1"; }

# A: the common case, the job's environment exported (sbatch's default).
mkdir -p "$WORK/out" "$WORK/home"
MARK="slurm-it-$RANDOM"
cat >"$WORK/job_a.sh" <<EOF
#!/bin/bash
exec "$LAUNCH" --config "$WORK/job.toml" --mountpoint "$MNT" \\
  -- "$PYTHON" "$HERE/check_slurm_rank.py" "$MNT" d "$WORK/data" "$WORK/out" --daemon-env "DLFS_IT_MARK=$MARK"
EOF
# HOME: where the launcher puts its default token ($HOME/.dlfs/JOB.token).
DLFS_IT_MARK=$MARK HOME=$WORK/home slurm_submit --ntasks=2 --mem=512M --job-name=dlfs-a -o "$WORK/a.out" "$WORK/job_a.sh"
A=$SLURM_JOB
slurm_wait_job "$A"
if [ "$JOB_STATE" != COMPLETED ] || [ "$(job_field "$A" ExitCode)" != 0:0 ]; then
  job_failed "job A ended $JOB_STATE, exit code $(job_field "$A" ExitCode)" "$WORK/a.out"
fi
for r in 0 1; do
  grep -q "^rank $r of 2: $(((N + 1) / 2)) members equal the backend" "$WORK/a.out" || job_failed "job A: rank $r did not check its view" "$WORK/a.out"
done
(cd "$WORK/data" && find . -type f | sed 's|^\./||' | LC_ALL=C sort) >"$WORK/all.names"
LC_ALL=C sort -u "$WORK/out/rank0.names" "$WORK/out/rank1.names" | cmp -s - "$WORK/all.names" ||
  fail "job A: the two ranks' views together are not the dataset's $N samples"
grep -q "^0: .* mounted at $MNT " "$WORK/dlfsd-$A.log" || job_failed "job A: no daemon log in the submit directory" "$WORK/a.out"
[ -z "$(ls -A "$WORK/home/.dlfs")" ] || fail "job A: the default token is left: $(ls "$WORK/home/.dlfs")"
no_daemon_left "job A"
log "A: job $A mounted, 2 tasks read their views, unmounted"

# B: sbatch --export=NONE (the job starts with a login environment, and srun
# with none), a command that reads the mount and exits 3.
cat >"$WORK/job_b.sh" <<EOF
#!/bin/bash
export DLFSD="$DLFSD" DLFS_CTL="$DLFS_CTL"
exec "$LAUNCH" --config "$WORK/job.toml" --mountpoint "$MNT" --token-file "$WORK/b.token" --log "$WORK/b-dlfsd.log" \\
  -- /bin/sh -c "exec 3<'$MNT/d/epochs/0/1/0.index' && exit 3"
EOF
slurm_submit --export=NONE --ntasks=1 --mem=256M --job-name=dlfs-b -o "$WORK/b.out" "$WORK/job_b.sh"
B=$SLURM_JOB
slurm_wait_job "$B"
if [ "$JOB_STATE" != FAILED ] || [ "$(job_field "$B" ExitCode)" != 3:0 ]; then
  job_failed "job B ended $JOB_STATE, exit code $(job_field "$B" ExitCode) (want FAILED, 3:0)" "$WORK/b.out"
fi
grep -q "command exited with status 3" "$WORK/b.out" || job_failed "job B: the launcher did not report status 3" "$WORK/b.out"
grep -q "SLURM_EXPORT_ENV=NONE" "$WORK/b.out" || job_failed "job B: no word about --export=NONE" "$WORK/b.out"
no_daemon_left "job B"
log "B: job $B under --export=NONE: status 3 passed on, unmounted"

# C: scancel while the command holds the mount busy.
cat >"$WORK/job_c.sh" <<EOF
#!/bin/bash
exec "$LAUNCH" --config "$WORK/job.toml" --mountpoint "$MNT" --token-file "$WORK/c.token" --log "$WORK/c-dlfsd.log" \\
  -- bash -c 'exec 3<"\$0/d/epochs/0/1/0.tar" && touch "\$1" && for _ in \$(seq 1 600); do sleep 0.2; done' "$MNT" "$WORK/c.started"
EOF
slurm_submit --ntasks=1 --mem=256M --job-name=dlfs-c -o "$WORK/c.out" "$WORK/job_c.sh"
C=$SLURM_JOB
for _ in $(seq 1 600); do
  [ -e "$WORK/c.started" ] && break
  case $(job_field "$C" JobState) in PENDING|CONFIGURING|RUNNING) sleep 0.1 ;; *) job_failed "job C ended before its command started" "$WORK/c.out" ;; esac
done
[ -e "$WORK/c.started" ] || job_failed "job C: the command did not start within 60 s" "$WORK/c.out"
# As docs/deploy.md says: reach a job's daemon from outside with an overlapping step.
status=$(srun --jobid="$C" --overlap --nodes=1 --ntasks=1 -w "$(hostname -s)" \
  "$DLFS_CTL" --socket "/tmp/dlfs-$(id -u)/job$C.sock" status 2>&1) || fail "dlfs-ctl status through srun --overlap: $status"
echo "$status" | grep -q "at $MNT, up" || fail "dlfs-ctl status names no mount at $MNT: $status"
scancel "$C"
slurm_wait_job "$C" 60
[ "$JOB_STATE" = CANCELLED ] || job_failed "job C ended $JOB_STATE after scancel" "$WORK/c.out"
no_daemon_left "job C (scancel)"
grep -q "^0: .* unmounting $MNT" "$WORK/c-dlfsd.log" || { cat "$WORK/c-dlfsd.log" >&2; fail "job C: the daemon did not unmount on the cancel"; }
log "C: job $C cancelled with the mount busy: unmounted, no daemon left"
log "ok"
