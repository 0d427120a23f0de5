#!/usr/bin/env bash
# dlfs-slurm-launch.sh: run a command under Slurm with one dlfsd per node of the
# allocation (docs/deploy.md). Run it inside sbatch/salloc; see --help.
# Installed as dlfs-slurm-launch (deploy/meson.build); its man page is made
# from --help (help2man, docs/man/meson.build).
#
# No `set -e`: whatever fails, the EXIT trap must still unmount every node and
# stop the daemons, and the script must exit with the user command's status.
set -uo pipefail

PROG=dlfs-slurm-launch
log() { echo "$PROG: $*" >&2; }
die() { log "$*"; exit 2; }

usage() {
  cat <<'EOF'
Usage: dlfs-slurm-launch --config JOB.toml --mountpoint DIR [options] -- COMMAND [ARGS...]

Run inside a Slurm allocation (sbatch or salloc). Starts one dlfsd per node of
the job, all serving the datasets of JOB.toml at DIR, waits until every node has
mounted, runs `srun COMMAND ARGS...`, then unmounts every node and stops the
daemons, also when the command fails or the job is signalled. Exits with the
command's status (2 for this script's own errors, 128+N after signal N).

The daemons find each other from Slurm (SLURM_JOB_NODELIST, SLURM_NODEID): leave
[cluster] peers empty in JOB.toml. Node i holds stripe i of every dataset.

Options:
  --config FILE        dlfsd config (same path on every node: a shared filesystem)
  --mountpoint DIR     where every node mounts (node-local path; created if missing)
  --token-file FILE    the job's shared secret; created (32 random bytes, hex, mode
                       0600) if absent. Default: $HOME/.dlfs/$SLURM_JOB_ID.token,
                       which is removed at the end if this script created it.
                       It must be on a filesystem every node sees.
  --port N             UCX listener port (default: the config's, else 7710); set
                       it when two jobs may share a node
  --timeout SECONDS    how long to wait for every node to mount (default 600)
  --daemon-cpus N      CPUs of each node's daemon step (default: every CPU the job
                       has on its smallest node; the step overlaps the others)
  --dlfsd-arg ARG      one more dlfsd argument (repeat), e.g. --dlfsd-arg=--log-level=debug
  --srun-arg ARG       one more srun option for COMMAND (repeat), e.g. --srun-arg=--ntasks-per-node=4
  --log FILE           the daemons' output, each line prefixed by its node's rank
                       (default: $SLURM_SUBMIT_DIR/dlfsd-$SLURM_JOB_ID.log)
  -h, --help           this text

Environment:
DLFSD and DLFS_CTL name the binaries (default: dlfsd and dlfs-ctl from PATH,
else from /usr/local/sbin or /usr/sbin, where dlfsd is installed; resolved
here: the same path must work on every node). UCX_TLS, UCX_NET_DEVICES and
other UCX_* variables reach the daemons: their steps get this script's
environment (--export=ALL, also under sbatch --export=NONE). COMMAND's step
follows the job's own --export setting.

Examples:
An sbatch script with #SBATCH --nodes=4 --ntasks-per-node=8 --mem=0 that runs
train.sh on every task, reading the mount at $M (UCX_TLS: rc,tcp on InfiniBand,
keeping tcp for the join; tcp on Ethernet)
  $ export UCX_TLS=rc,tcp
  $ C=$HOME/jobs/imagenet.toml M=/tmp/dlfs-$USER
  $ dlfs-slurm-launch --config $C --mountpoint $M -- train.sh

Each daemon's control socket is /tmp/dlfs-$UID/job$SLURM_JOB_ID.sock on its
node. From another shell, as the job's user (root may not start steps in
others' jobs), with J the job, N the node and S that path
  $ srun --jobid J --overlap -w N -n1 dlfs-ctl --socket S status
EOF
}

# ---- arguments -------------------------------------------------------------

CONFIG="" MNT="" TOKEN="" PORT="" TIMEOUT=600 CPUS="" LOG=""
DLFSD_ARGS=() SRUN_ARGS=()
# Options take their value as the next word or after '='.
while [ $# -gt 0 ]; do
  opt=$1 val="" has_val=0
  case $opt in
    --*=*) val=${opt#*=}; opt=${opt%%=*}; has_val=1 ;;
  esac
  case $opt in
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    --config|--mountpoint|--token-file|--port|--timeout|--daemon-cpus|--dlfsd-arg|--srun-arg|--log)
      if [ $has_val -eq 0 ]; then
        [ $# -ge 2 ] || die "$opt needs a value (see --help)"
        val=$2; shift
      fi ;;
    *) die "unknown option '$1' (see --help; the command goes after --)" ;;
  esac
  case $opt in
    --config) CONFIG=$val ;;
    --mountpoint) MNT=$val ;;
    --token-file) TOKEN=$val ;;
    --port) PORT=$val ;;
    --timeout) TIMEOUT=$val ;;
    --daemon-cpus) CPUS=$val ;;
    --dlfsd-arg) DLFSD_ARGS+=("$val") ;;
    --srun-arg) SRUN_ARGS+=("$val") ;;
    --log) LOG=$val ;;
  esac
  shift
done
[ $# -gt 0 ] || die "no command: put it after -- (see --help)"
[ -n "$CONFIG" ] || die "--config is required"
[ -n "$MNT" ] || die "--mountpoint is required"
if [ -z "${SLURM_JOB_ID:-}" ] || [ -z "${SLURM_JOB_NUM_NODES:-}" ]; then
  die "not inside a Slurm allocation (SLURM_JOB_ID, SLURM_JOB_NUM_NODES unset): run it from sbatch or salloc"
fi
for n in "$TIMEOUT" ${PORT:+"$PORT"} ${CPUS:+"$CPUS"}; do
  case $n in ''|*[!0-9]*) die "'$n' is not a number (--port, --timeout, --daemon-cpus)" ;; esac
done

# Paths are read on other nodes, whose working directory may differ: make them absolute.
abs() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s/%s\n' "$PWD" "$1" ;; esac; }
CONFIG=$(abs "$CONFIG")
MNT=$(abs "$MNT")
[ -r "$CONFIG" ] || die "config '$CONFIG' is not readable"
# dlfsd is installed in sbin (a daemon), which is not on users' PATH on every system.
DLFSD=$(PATH=$PATH:/usr/local/sbin:/usr/sbin; command -v "${DLFSD:-dlfsd}") ||
  die "dlfsd not found (put it on PATH or set DLFSD)"
DLFS_CTL=$(command -v "${DLFS_CTL:-dlfs-ctl}") || die "dlfs-ctl not found (put it on PATH or set DLFS_CTL)"
DLFSD=$(abs "$DLFSD")
DLFS_CTL=$(abs "$DLFS_CTL")
NODES=$SLURM_JOB_NUM_NODES
# `sbatch --export=NONE` leaves SLURM_EXPORT_ENV=NONE here, and srun then starts
# COMMAND with no environment (no PATH: "execve(): python: No such file or
# directory"). This script's own steps pass --export=ALL; COMMAND's step keeps
# the user's choice, but say once why it may fail.
case ${SLURM_EXPORT_ENV:-} in
  NONE*|NIL*)
    case " ${SRUN_ARGS[*]-} " in
      *" --export"*) ;;
      *) log "SLURM_EXPORT_ENV=$SLURM_EXPORT_ENV (sbatch --export=NONE): the command's step gets no environment;" \
           "give it an absolute path, or pass --srun-arg=--export=ALL" ;;
    esac ;;
esac
LOG=$(abs "${LOG:-${SLURM_SUBMIT_DIR:-$PWD}/dlfsd-$SLURM_JOB_ID.log}")
# Node-local and short (a Unix socket path has ~107 bytes); /tmp, because
# XDG_RUNTIME_DIR, copied from the login node, may not exist on compute nodes.
SOCK=/tmp/dlfs-$(id -u)/job$SLURM_JOB_ID.sock

# Every CPU the job has on its smallest node ("72(x2),36" -> 36): the daemon
# serves every reader of its node, and its step may not take more than a node has.
if [ -z "$CPUS" ] && [ -n "${SLURM_JOB_CPUS_PER_NODE:-}" ]; then
  CPUS=$(printf '%s\n' "$SLURM_JOB_CPUS_PER_NODE" | tr ',' '\n' | sed 's/(.*//' | sort -n | head -n 1)
fi

# One task on every node of the job. --ntasks is explicit because sbatch's
# SLURM_NTASKS would otherwise override --ntasks-per-node; --overlap lets these
# steps share the nodes with the user's step instead of blocking it;
# --export=ALL because `sbatch --export=NONE` (a common site default) leaves
# SLURM_EXPORT_ENV=NONE, and steps would then start with no PATH and no UCX_*.
PER_NODE=(--nodes="$NODES" --ntasks="$NODES" --ntasks-per-node=1 --overlap --kill-on-bad-exit=0 --export=ALL)

# ---- the token -------------------------------------------------------------

TOKEN_CREATED=0
if [ -z "$TOKEN" ]; then
  TOKEN=$HOME/.dlfs/$SLURM_JOB_ID.token
  DEFAULT_TOKEN=1
else
  TOKEN=$(abs "$TOKEN")
  DEFAULT_TOKEN=0
fi
if [ ! -e "$TOKEN" ]; then
  dir=$(dirname "$TOKEN")
  if [ ! -d "$dir" ]; then { mkdir -p "$dir" && chmod 700 "$dir"; } || die "cannot create '$dir' for the job token"; fi
  # Written aside and renamed: a daemon never reads half a token; umask: never readable by others.
  tmp=$( (umask 077 && mktemp "$TOKEN.XXXXXX") ) || die "cannot write the job token in '$dir'"
  if ! od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$tmp" || ! chmod 600 "$tmp" || ! mv -f "$tmp" "$TOKEN"; then
    rm -f "$tmp"
    die "cannot write the job token '$TOKEN'"
  fi
  TOKEN_CREATED=$DEFAULT_TOKEN
  log "job token: created $TOKEN"
fi
# dlfsd refuses a token others can read; say so here, once, instead of once per node.
mode=$(stat -c %a "$TOKEN" 2>/dev/null) || die "job token '$TOKEN' is not readable"
case $mode in *[1-7]?|*[1-7]) die "job token '$TOKEN' has mode $mode: chmod 600 it" ;; esac

# ---- cleanup: on every exit ------------------------------------------------

DAEMON_PID="" USER_PID=""
# shellcheck disable=SC2317  # reached through the EXIT trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  if [ -n "$USER_PID" ] && kill -0 "$USER_PID" 2>/dev/null; then
    log "stopping the command"
    kill -TERM "$USER_PID" 2>/dev/null
    wait "$USER_PID" 2>/dev/null
  fi
  if [ -n "$DAEMON_PID" ]; then
    log "unmounting $MNT on $NODES nodes"
    # dlfs-ctl unmount waits until the daemon is gone; fusermount3 covers a
    # daemon that no longer answers (its mount is then dead or busy).
    # shellcheck disable=SC2016  # expanded by the remote bash
    timeout 90 srun "${PER_NODE[@]}" --job-name=dlfs-unmount bash -c '
      "$1" --socket "$2" --timeout 30 unmount >/dev/null 2>&1 ||
        { grep -qs " $3 fuse" /proc/self/mounts && { fusermount3 -u "$3" 2>/dev/null || fusermount3 -u -z "$3"; }; }
      true' _ "$DLFS_CTL" "$SOCK" "$MNT" </dev/null >>"$LOG" 2>&1
    # The daemons exit after unmounting; srun forwards SIGTERM to any that did not.
    local _
    # (Polled every 0.2 s: on a successful run this wait is the job's last second.)
    for _ in $(seq 1 150); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$DAEMON_PID" 2>/dev/null; then
      log "daemons still running after unmount: sending SIGTERM"
      kill -TERM "$DAEMON_PID" 2>/dev/null
      for _ in $(seq 1 100); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.2; done
      kill -KILL "$DAEMON_PID" 2>/dev/null
    fi
    wait "$DAEMON_PID" 2>/dev/null
  fi
  [ "$TOKEN_CREATED" -eq 1 ] && rm -f "$TOKEN"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- the daemons -----------------------------------------------------------

# Mountpoints: created on every node. A dead mount left there by a crashed
# daemon ("Transport endpoint is not connected", which can fail the mkdir) is
# dlfsd's to clear: it unmounts a dead DLFS mount before mounting and refuses
# a live one or another file system, so an existing FUSE mount is left to it.
# shellcheck disable=SC2016  # expanded by the remote bash
timeout 120 srun "${PER_NODE[@]}" --job-name=dlfs-prepare bash -c '
  err=$(mkdir -p "$1" 2>&1) || grep -qs " $1 fuse" /proc/self/mounts ||
    { echo "$(uname -n): cannot create mountpoint $1: $err" >&2; exit 1; }' _ "$MNT" </dev/null ||
  die "could not prepare mountpoint $MNT on every node"

DAEMON_CMD=("$DLFSD" --config "$CONFIG" --mountpoint "$MNT" --token-file "$TOKEN" --control-socket "$SOCK")
[ -n "$PORT" ] && DAEMON_CMD+=(--port "$PORT")
# ${a[@]+...}: an empty array is "unbound" under set -u in bash < 4.4 (RHEL 7).
DAEMON_CMD+=(${DLFSD_ARGS[@]+"${DLFSD_ARGS[@]}"})
log "starting dlfsd on $NODES nodes (${SLURM_JOB_NODELIST:-?}); output in $LOG"
# dlfsd stays in the foreground and unmounts on SIGTERM: the step lives as long as the daemons.
# Appending (after emptying the file once): the unmount step's output is
# appended too, and a writer at its own offset would overwrite it.
: >"$LOG" || die "cannot write the daemons' log '$LOG' (--log)"
srun "${PER_NODE[@]}" ${CPUS:+--cpus-per-task="$CPUS"} --job-name=dlfsd --label \
  "${DAEMON_CMD[@]}" </dev/null >>"$LOG" 2>&1 &
DAEMON_PID=$!

# Ready when every node's mount answers and serves every dataset: dlfsd mounts
# before it scans, and stats say "scanning" or "joining" until a dataset is
# served (docs/stats.md); the datasets keep loading in the background and are
# served meanwhile.
start=$SECONDS
while :; do
  if ! kill -0 "$DAEMON_PID" 2>/dev/null || grep -q 'srun: error: .*[Ee]xit' "$LOG" 2>/dev/null; then
    log "a daemon exited before every node mounted; the daemons' output ($LOG) ends with:"
    tail -n 20 "$LOG" >&2
    exit 2
  fi
  # shellcheck disable=SC2016  # expanded by the remote bash
  answers=$(timeout 60 srun "${PER_NODE[@]}" --job-name=dlfs-check bash -c '
    if head -c 1 "$1/.dlfs/stats" >/dev/null 2>&1 && ! grep -qE "\"state\": \"(scanning|joining)\"" "$1/.dlfs/stats"
    then echo "ok $(uname -n)"; else echo "waiting $(uname -n)"; fi' \
    _ "$MNT" </dev/null 2>/dev/null)
  ready=$(printf '%s\n' "$answers" | grep -c '^ok ')
  [ "$ready" -ge "$NODES" ] && break
  waited=$((SECONDS - start))
  if [ "$waited" -ge "$TIMEOUT" ]; then
    log "after ${waited}s only $ready of $NODES nodes have mounted; waiting:" \
      "$(printf '%s\n' "$answers" | sed -n 's/^waiting //p' | tr '\n' ' ')"
    log "the daemons' output ($LOG) ends with:"
    tail -n 20 "$LOG" >&2
    exit 2
  fi
  log "waiting for the mounts: $ready of $NODES nodes ready (${waited}s of ${TIMEOUT}s)"
  sleep $((waited < 10 ? 1 : 5))  # each check is a step launch: poll gently once past the start
done
log "mounted on all $NODES nodes in $((SECONDS - start))s; running: $*"

# ---- the command -----------------------------------------------------------

# In the background, so that a signal runs its trap at once instead of after the command.
srun ${SRUN_ARGS[@]+"${SRUN_ARGS[@]}"} "$@" &
USER_PID=$!
wait "$USER_PID"
rc=$?
USER_PID=""
log "command exited with status $rc"
exit "$rc"
