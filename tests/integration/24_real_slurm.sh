#!/usr/bin/env bash
# deploy/dlfs-slurm-launch.sh, unmodified, under a real Slurm: Debian's
# slurm-wlm (22.05) and munge on this host (slurm_lib.sh), jobs sent with sbatch.
#  A. sbatch -n2 (-n1 on one CPU): the launcher mounts, each srun task (SLURM_PROCID of
#     SLURM_NTASKS) reads its rank's epoch tar and finds the backend's bytes,
#     the ranks together cover the dataset, the daemon got the job's
#     environment; then nothing is mounted, no dlfsd is left, the default
#     token is removed and the default log is in the submit directory.
#  B. sbatch --export=NONE, a command that exits 3: the job fails with 3,
#     and the launcher still unmounted and stopped the daemon.
#  C. a job of user nobody (the daemon mounts through fusermount3): its task
#     reads its view, dlfs-ctl reaches the daemon through
#     `srun --jobid --overlap`, then scancel while the command holds a file of
#     the mount open: nothing is mounted and no dlfsd is left.
# Skips (77) only where Slurm cannot be installed or its daemons cannot start,
# saying why (apt-get's or the daemons' log tails).
DLFS_SCENARIO_TIMEOUT=${DLFS_SCENARIO_TIMEOUT:-840}  # apt-get may be slow; meson allows 900 s
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/slurm_lib.sh"
require_fuse
HERE=$(cd "$(dirname "$0")" && pwd)
LAUNCH=$(cd "$HERE/../.." && pwd)/deploy/dlfs-slurm-launch.sh
slurm_install
slurm_up
cd "$WORK"  # the jobs' submit directory: the launcher's default log goes here
# The daemons' socket directories, /tmp/dlfs-UID: removed at the end if this
# scenario made them (rmdir: only when empty, never another job's sockets).
for uid in 0 "$(id -u nobody 2>/dev/null || echo 65534)"; do
  [ -e "/tmp/dlfs-$uid" ] || CLEANUP_HOOKS+=("rmdir /tmp/dlfs-$uid 2>/dev/null")
done

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

# no_daemon_left DIR WHAT: after a job, nothing is mounted at DIR and no dlfsd serves it.
no_daemon_left() {
  if grep -q " $1 fuse" /proc/mounts; then fail "$2: $1 still mounted after the job"; fi
  if pgrep -f -- "--mountpoint $1" >/dev/null; then fail "$2: a dlfsd is left after the job: $(pgrep -a -f -- "--mountpoint $1")"; fi
}
# job_failed WHAT OUTPUT: the failure, with the job's output and the Slurm logs.
job_failed() { cat "$2" >&2; slurm_tails; fail "$1"; }

# A: the common case, the job's environment exported (sbatch's default).
mkdir -p "$WORK/out" "$WORK/home"
# Two tasks (ranks), or one on a one-CPU machine: each task needs a CPU.
W=$(( $(sinfo -h -N -o %c | head -n 1) >= 2 ? 2 : 1 ))
MARK="slurm-it-$RANDOM"
cat >"$WORK/job_a.sh" <<EOF
#!/bin/bash
exec "$LAUNCH" --config "$WORK/job.toml" --mountpoint "$MNT" \\
  -- "$PYTHON" "$HERE/check_slurm_rank.py" "$MNT" d "$WORK/data" "$WORK/out" --daemon-env "DLFS_IT_MARK=$MARK"
EOF
t0=$SECONDS
# HOME: where the launcher puts its default token ($HOME/.dlfs/JOB.token).
DLFS_IT_MARK=$MARK HOME=$WORK/home slurm_submit --ntasks=$W --mem=512M --job-name=dlfs-a -o "$WORK/a.out" "$WORK/job_a.sh"
A=$SLURM_JOB
slurm_wait_job "$A"
if [ "$JOB_STATE" != COMPLETED ] || [ "$(job_field "$A" ExitCode)" != 0:0 ]; then
  job_failed "job A ended $JOB_STATE, exit code $(job_field "$A" ExitCode)" "$WORK/a.out"
fi
for r in $(seq 0 $((W - 1))); do
  grep -q "^rank $r of $W: $(((N + W - 1) / W)) members equal the backend" "$WORK/a.out" || job_failed "job A: rank $r did not check its view" "$WORK/a.out"
done
(cd "$WORK/data" && find . -type f | sed 's|^\./||' | LC_ALL=C sort) >"$WORK/all.names"
LC_ALL=C sort -u "$WORK"/out/rank*.names | cmp -s - "$WORK/all.names" ||
  fail "job A: the $W ranks' views together are not the dataset's $N samples"
grep -q "^0: .* mounted at $MNT " "$WORK/dlfsd-$A.log" || job_failed "job A: no daemon log in the submit directory" "$WORK/a.out"
[ -z "$(ls -A "$WORK/home/.dlfs")" ] || fail "job A: the default token is left: $(ls "$WORK/home/.dlfs")"
no_daemon_left "$MNT" "job A"
log "A: job $A mounted, $W tasks read their views, unmounted ($((SECONDS - t0)) s)"

# B: sbatch --export=NONE (the job starts with a login environment, and srun
# with none), a command that reads the mount and exits 3.
cat >"$WORK/job_b.sh" <<EOF
#!/bin/bash
export DLFSD="$DLFSD" DLFS_CTL="$DLFS_CTL"
exec "$LAUNCH" --config "$WORK/job.toml" --mountpoint "$MNT" --token-file "$WORK/b.token" --log "$WORK/b-dlfsd.log" \\
  -- /bin/sh -c "exec 3<'$MNT/d/epochs/0/1/0.index' && exit 3"
EOF
t0=$SECONDS
slurm_submit --export=NONE --ntasks=1 --mem=256M --job-name=dlfs-b -o "$WORK/b.out" "$WORK/job_b.sh"
B=$SLURM_JOB
slurm_wait_job "$B"
if [ "$JOB_STATE" != FAILED ] || [ "$(job_field "$B" ExitCode)" != 3:0 ]; then
  job_failed "job B ended $JOB_STATE, exit code $(job_field "$B" ExitCode) (want FAILED, 3:0)" "$WORK/b.out"
fi
grep -q "command exited with status 3" "$WORK/b.out" || job_failed "job B: the launcher did not report status 3" "$WORK/b.out"
grep -q "SLURM_EXPORT_ENV=NONE" "$WORK/b.out" || job_failed "job B: no word about --export=NONE" "$WORK/b.out"
no_daemon_left "$MNT" "job B"
log "B: job $B under --export=NONE: status 3 passed on, unmounted ($((SECONDS - t0)) s)"

# C: an unprivileged user's job, as on a real cluster (the daemon mounts with
# fusermount3): its task checks its view, then holds the mount busy until
# scancel.
id nobody >/dev/null 2>&1 || fail "no user 'nobody' to run job C as"
CDIR=$WORK/c
CMNT=$CDIR/mnt
MOUNTS+=("$CMNT")
mkdir -p "$CDIR"
chown nobody:nogroup "$CDIR"
chmod -R a+rX "$WORK/data" "$WORK/job.toml"  # whatever the umask
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
# The programs, where nobody can run them: in place, or (a checkout under a
# private home) byte-identical copies.
C_LAUNCH=$LAUNCH C_CHECK=$HERE/check_slurm_rank.py C_DLFSD=$DLFSD C_CTL=$DLFS_CTL
# shellcheck disable=SC2016  # expanded by the inner sh
if ! as_nobody sh -c 'test -r "$1" && test -r "$2" && test -x "$3" && test -x "$4"' _ "$C_LAUNCH" "$C_CHECK" "$C_DLFSD" "$C_CTL"; then
  mkdir -m 755 "$WORK/bin"
  cp "$LAUNCH" "$HERE/check_slurm_rank.py" "$HERE/checklib.py" "$DLFSD" "$DLFS_CTL" "$WORK/bin/"
  chmod a+rX "$WORK/bin"/*
  C_LAUNCH=$WORK/bin/$(basename "$LAUNCH") C_CHECK=$WORK/bin/check_slurm_rank.py
  C_DLFSD=$WORK/bin/$(basename "$DLFSD") C_CTL=$WORK/bin/$(basename "$DLFS_CTL")
  log "C: user nobody cannot reach the checkout: it runs copies in $WORK/bin"
fi
cat >"$WORK/job_c.sh" <<EOF
#!/bin/bash
exec "$C_LAUNCH" --config "$WORK/job.toml" --mountpoint "$CMNT" --token-file "$CDIR/token" --log "$CDIR/dlfsd.log" \\
  -- bash -c '"\$1" "\$2" "\$0" d "\$3" "\$4" && exec 3<"\$0/d/epochs/0/1/0.tar" && cd "\$0/d" && touch "\$4/started" &&
              for _ in \$(seq 1 600); do sleep 0.2; done' "$CMNT" "$PYTHON" "$C_CHECK" "$WORK/data" "$CDIR"
EOF
t0=$SECONDS
DLFSD=$C_DLFSD DLFS_CTL=$C_CTL slurm_submit --uid=nobody --gid=nogroup --ntasks=1 --mem=256M --job-name=dlfs-c -o "$CDIR/out" "$WORK/job_c.sh"
C=$SLURM_JOB
for _ in $(seq 1 600); do
  [ -e "$CDIR/started" ] && break
  case $(job_field "$C" JobState) in PENDING|CONFIGURING|RUNNING) sleep 0.1 ;; *) job_failed "job C ended before its command started" "$CDIR/out" ;; esac
done
[ -e "$CDIR/started" ] || job_failed "job C: the command did not start within 60 s" "$CDIR/out"
grep -q "^rank 0 of 1: $N members equal the backend" "$CDIR/out" || job_failed "job C: the view check did not pass" "$CDIR/out"
# As docs/deploy.md says: the job's user reaches its daemon from outside the
# job with an overlapping step (root may not start steps in another's job).
status=$(as_nobody srun --jobid="$C" --overlap --nodes=1 --ntasks=1 \
  -w "$(hostname -s)" "$C_CTL" --socket "/tmp/dlfs-$(id -u nobody)/job$C.sock" status 2>&1) ||
  fail "dlfs-ctl status through srun --overlap: $status"
grep -q "at $CMNT, up" <<<"$status" || fail "dlfs-ctl status names no mount at $CMNT: $status"
scancel "$C"
slurm_wait_job "$C" 60
[ "$JOB_STATE" = CANCELLED ] || job_failed "job C ended $JOB_STATE after scancel" "$CDIR/out"
no_daemon_left "$CMNT" "job C (scancel)"
grep -q "^0: .* unmounting $CMNT" "$CDIR/dlfsd.log" || { cat "$CDIR/dlfsd.log" >&2; fail "job C: the daemon did not unmount on the cancel"; }
log "C: job $C of user nobody cancelled with the mount busy: unmounted, no daemon left ($((SECONDS - t0)) s)"
log "ok"
