# shellcheck shell=bash
# A one-host Slurm for a scenario (sourced after lib.sh, not run): Debian's
# slurm-wlm 22.05 and munge, started by hand, configured in $WORK only.
#
# Nothing global is touched: munged gets its own key, socket, pid and seed
# files; slurm.conf lives in $WORK/slurm (SLURM_CONF points every Slurm
# command at it) with a random, unused port pair, so a Slurm or munge already
# on the machine is neither used nor disturbed. The daemons run in the
# foreground (-D, -F) as this shell's children: no systemd needed, and the
# scenario's cleanup stops them by their PIDs.

SLURM_PACKAGES=(slurmctld slurmd slurm-client munge)
SLURM_DIR=$WORK/slurm
SLURM_PIDS=()
SLURM_JOBS=()

# slurm_install: the packages, from Debian's archive, only if missing (CI's
# tools/install-deps.sh normally installed them already).
slurm_install() {
  local missing=() p
  for p in "${SLURM_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$WORK/apt.log" 2>&1 ||
    { tail -5 "$WORK/apt.log" >&2; skip "could not install ${missing[*]} (apt-get failed, above)"; }
}

# slurm_tails: the end of each daemon's log, for a skip or a failure.
slurm_tails() {
  local f
  for f in "$SLURM_DIR"/log/*.log; do
    [ -e "$f" ] && { echo "--- $(basename "$f"):"; grep -v 'pmix' "$f" | tail -n 8; }
  done >&2
}

# slurm_write_conf NODE PORT: slurm.conf for one node (this host, as NODE) and
# one partition. linuxproc and task/none: no cgroups needed (containers);
# CR_Core_Memory: CPUs and memory are both allocated, as on most sites.
slurm_write_conf() {
  local node=$1 port=$2 hw
  # The node's real CPUs and memory, as slurmd sees them (a larger figure in
  # slurm.conf would drain the node).
  hw=$(slurmd -C | head -n 1 | sed 's/^NodeName=[^ ]* //')
  cat >"$SLURM_CONF" <<EOF
ClusterName=dlfsit
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SLURM_DIR/msock/munge.sock
CredType=cred/munge
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.pid
SlurmctldLogFile=$SLURM_DIR/log/slurmctld.log
SlurmdLogFile=$SLURM_DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MailProg=/bin/true
ReturnToService=2
# A random first job id: the launcher's socket, /tmp/dlfs-0/job<ID>.sock, is
# global; SIGTERM-to-SIGKILL in 5 s, not 30, keeps the scancel check short.
FirstJobId=$((1000 + RANDOM * 10))
KillWait=5
NodeName=$node NodeAddr=127.0.0.1 $hw State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
}

# slurm_up: munged, slurmctld and slurmd, then waits (bounded) until the node
# is idle. Skips (77), with the daemons' log tails, where they cannot start.
slurm_up() {
  local node key port
  node=$(hostname -s)
  # munged wants every directory above its socket searchable by all, and its
  # key readable by its owner only.
  chmod 711 "$WORK"
  mkdir -p "$SLURM_DIR"/{munge,msock,state,spool,log}
  chmod 711 "$SLURM_DIR" "$SLURM_DIR/msock"
  chmod 700 "$SLURM_DIR/munge"
  key=$SLURM_DIR/munge/munge.key
  (umask 077 && head -c 1024 /dev/urandom >"$key")
  export SLURM_CONF=$SLURM_DIR/slurm.conf
  port=$(free_port_base 2)  # slurmctld, slurmd
  slurm_write_conf "$node" "$port"
  CLEANUP_HOOKS+=("slurm_down")

  munged -F --key-file="$key" --socket="$SLURM_DIR/msock/munge.sock" --log-file="$SLURM_DIR/log/munged.log" \
    --pid-file="$SLURM_DIR/munge/munged.pid" --seed-file="$SLURM_DIR/munge/seed" >/dev/null 2>&1 &
  SLURM_PIDS+=($!)
  slurm_wait_for "munged" test -S "$SLURM_DIR/msock/munge.sock"
  slurmctld -D -f "$SLURM_CONF" >/dev/null 2>&1 &
  SLURM_PIDS+=($!)
  slurm_wait_for "slurmctld" scontrol ping
  slurmd -D -N "$node" -f "$SLURM_CONF" >/dev/null 2>&1 &
  SLURM_PIDS+=($!)
  slurm_wait_for "slurmd (node $node idle)" node_idle "$node"
  log "one-host Slurm $(sinfo -V | awk '{print $2}') up: node $node, $(sinfo -h -N -o '%c CPUs, %m MB')"
}

node_idle() { [ "$(sinfo -h -N -n "$1" -o %T 2>/dev/null)" = idle ]; }

# slurm_wait_for WHAT CMD...: until CMD succeeds (30 s at most); skips if a
# Slurm daemon exits meanwhile or time runs out.
slurm_wait_for() {
  local what=$1 pid; shift
  for _ in $(seq 1 300); do
    "$@" >/dev/null 2>&1 && return 0
    for pid in "${SLURM_PIDS[@]}"; do
      kill -0 "$pid" 2>/dev/null || { slurm_tails; skip "$what could not start here (daemon logs above)"; }
    done
    sleep 0.1
  done
  slurm_tails
  skip "$what did not come up within 30 s (daemon logs above)"
}

# slurm_submit SBATCH_ARGS...: submits, records the job id in SLURM_JOB.
slurm_submit() {
  SLURM_JOB=$(sbatch --parsable "$@") || fail "sbatch $* failed"
  SLURM_JOB=${SLURM_JOB%%;*}
  SLURM_JOBS+=("$SLURM_JOB")
}

# job_field JOB NAME: one field of `scontrol show job` (e.g. JobState, ExitCode).
job_field() { scontrol -o show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# slurm_wait_job JOB [SECONDS]: until the job has ended (default 120 s); sets JOB_STATE.
slurm_wait_job() {
  local job=$1 secs=${2:-120}
  for _ in $(seq 1 $((secs * 5))); do
    JOB_STATE=$(job_field "$job" JobState)
    case $JOB_STATE in PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|'') ;; *) return 0 ;; esac
    sleep 0.2
  done
  slurm_tails
  fail "job $job still $JOB_STATE after ${secs}s"
}

# slurm_down (cleanup hook): cancels this scenario's jobs, waits (bounded) for
# their steps to end (slurmstepd outlives slurmd), then stops the daemons.
slurm_down() {
  local pid
  if [ ${#SLURM_JOBS[@]} -gt 0 ]; then
    scancel "${SLURM_JOBS[@]}" 2>/dev/null || true
    for _ in $(seq 1 150); do
      [ -z "$(squeue -h -j "$(IFS=,; echo "${SLURM_JOBS[*]}")" 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  for pid in "${SLURM_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${SLURM_PIDS[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
}
