# Shared helpers for the integration scenarios (sourced, not run).
#
# Every scenario gets its own work directory, mountpoint and control socket,
# and a trap that stops its daemons and unmounts whatever it mounted, so a
# failing test never leaves a daemon or a mount behind.
# Environment (set by meson): DLFSD, DLFS_CTL, GEN_DATASET, PYTHON.
set -euo pipefail

: "${DLFSD:?DLFSD must point at the dlfsd binary}"
: "${DLFS_CTL:?DLFS_CTL must point at the dlfs-ctl binary}"
: "${GEN_DATASET:?GEN_DATASET must point at tools/gen_dataset.py}"
PYTHON=${PYTHON:-/usr/bin/python3}
TEST_NAME=$(basename "$0" .sh)

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
log() { echo "[$TEST_NAME] $*"; }

require_fuse() {
  [ -e /dev/fuse ] || skip "no /dev/fuse on this machine"
  [ "$(id -u)" -eq 0 ] || skip "integration mounts need root"
  command -v fusermount3 >/dev/null || skip "fusermount3 not installed"
}

WORK=$(mktemp -d "/tmp/dlfs-it-${TEST_NAME}-XXXXXX")
echo $$ >"$WORK/.scenario-pid"  # clear_stale_runs.sh: whether this run is alive
DAEMON_PIDS=()
MOUNTS=()

cleanup() {
  local rc=$?
  pkill -P "$WATCHDOG_PID" 2>/dev/null || true  # its sleep holds meson's output pipe open
  kill "$WATCHDOG_PID" 2>/dev/null || true
  for pid in "${DAEMON_PIDS[@]:-}"; do
    [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${DAEMON_PIDS[@]:-}"; do
    [ -n "$pid" ] || continue
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  for m in "${MOUNTS[@]:-}"; do
    [ -n "$m" ] || continue
    if grep -q " $m fuse" /proc/mounts; then fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; fi
  done
  for hook in "${CLEANUP_HOOKS[@]:-}"; do [ -n "$hook" ] && eval "$hook" || true; done
  if [ -n "${DLFS_KEEP_WORK:-}" ]; then touch "$WORK/.kept"; echo "[$TEST_NAME] kept $WORK (DLFS_KEEP_WORK)"; else rm -rf "$WORK"; fi
  exit $rc
}
CLEANUP_HOOKS=()  # commands run by cleanup after the daemons stopped (e.g. deleting namespaces)
trap cleanup EXIT

# A scenario stops itself before meson's timeout (600 s) would SIGKILL it:
# a killed script cannot unmount, and its mount would outlive it. The
# watchdog signals this shell, then ends the command it is waiting on (bash
# runs a trap only once its foreground command returns).
SCENARIO_TIMEOUT=${DLFS_SCENARIO_TIMEOUT:-540}
trap 'echo "FAIL: $TEST_NAME still running after $SCENARIO_TIMEOUT s: stopped" >&2; exit 1' USR1
(
  sleep "$SCENARIO_TIMEOUT"
  kill -USR1 $$
  for child in $(pgrep -P $$); do [ "$child" = "$BASHPID" ] || kill -TERM "$child"; done
) >/dev/null 2>&1 &
WATCHDOG_PID=$!

# start_daemon MNT LOG [dlfsd args...]: starts dlfsd in the background with its
# own control socket, waits until MNT/.dlfs/stats exists and (unless
# START_WAIT_READY=0) until no dataset is still scanning or joining: dlfsd
# mounts before it scans, and tests read the stats' per-dataset figures at
# once. Reads inside a dataset would simply wait. Sets DAEMON_PID.
# DAEMON_WRAP (an array, e.g. nsenter into a network namespace) prefixes the
# command; it must exec dlfsd so that DAEMON_PID is the daemon's.
DAEMON_WRAP=()
start_daemon() {
  local mnt=$1 logf=$2; shift 2
  mkdir -p "$mnt"
  MOUNTS+=("$mnt")
  "${DAEMON_WRAP[@]}" "$DLFSD" --mountpoint "$mnt" --control-socket "$WORK/ctl-$(basename "$mnt").sock" "$@" >"$logf" 2>&1 &
  DAEMON_PID=$!
  DAEMON_PIDS+=("$DAEMON_PID")
  for _ in $(seq 1 300); do
    # And MNT lists: a dead mount left there answers ENOTCONN, though its
    # cached entries still show .dlfs/stats.
    if [ -e "$mnt/.dlfs/stats" ] && ls "$mnt" >/dev/null 2>&1; then
      [ "${START_WAIT_READY:-1}" = 0 ] && return 0
      grep -qE '"state": "(scanning|joining)"' "$mnt/.dlfs/stats" 2>/dev/null || return 0
    fi
    kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$logf" >&2; fail "dlfsd exited before mounting"; }
    sleep 0.1
  done
  cat "$logf" >&2
  fail "dlfsd did not mount $mnt within 30 s"
}

ctl_socket() { echo "$WORK/ctl-$(basename "$1").sock"; }

# wait_loaded MNT: until every dataset's load state is done (60 s at most).
wait_loaded() {
  local mnt=$1
  for _ in $(seq 1 600); do
    if "$PYTHON" - "$mnt/.dlfs/stats" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
sys.exit(0 if all(d["load"]["state"] == "done" for d in s["datasets"]) else 1)
PY
    then return 0; fi
    sleep 0.1
  done
  fail "load did not finish within 60 s"
}

# wait_exit PID [SECONDS]: waits for a child, leaving its exit code in
# WAIT_RC; a child still running after SECONDS (default 30) is killed (137).
# (Not usable in $(...): only this shell can wait for its children.)
wait_exit() {
  local pid=$1 secs=${2:-30} i state
  for ((i = 0; i < secs * 10; i++)); do
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo gone)
    [ "$state" = Z ] || [ "$state" = gone ] && break
    sleep 0.1
  done
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo gone)
  if [ "$state" != Z ] && [ "$state" != gone ]; then
    echo "process $pid still running after ${secs}s: killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  WAIT_RC=0
  wait "$pid" || WAIT_RC=$?
}

# stop_daemon PID MNT: SIGTERM, then the process must exit 0 (within 30 s)
# and the mount go.
stop_daemon() {
  local pid=$1 mnt=$2
  kill -TERM "$pid"
  wait_exit "$pid"
  [ "$WAIT_RC" -eq 0 ] || fail "dlfsd exited with $WAIT_RC after SIGTERM"
  if grep -q " $mnt fuse" /proc/mounts; then fail "$mnt still mounted after dlfsd exited"; fi
  # Nor anything dlfsd mounted inside it (the overlays over raw/, fs/kernel/raw_overlay.h).
  if grep -q " $mnt/" /proc/mounts; then fail "dlfsd left mounts under $mnt: $(grep " $mnt/" /proc/mounts)"; fi
}

# free_port_base N: a port P such that no TCP socket (any state) uses P to
# P+N-1, below the kernel's ephemeral range: a port inside it can be taken by
# any outgoing connection between this check and a daemon's bind (that made
# slurmd fail to bind once).
free_port_base() {
  local n=${1:-1} p lo hi i busy
  read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
  [ "${lo:-0}" -gt $((12000 + n)) ] || lo=32768  # a range starting low: the classic bound
  for _ in $(seq 1 50); do
    p=$((10000 + RANDOM % (lo - 10000 - n)))
    busy=
    for ((i = 0; i < n; i++)); do
      [ -n "$(ss -Htan "sport = :$((p + i))" 2>/dev/null)" ] && { busy=1; break; }
    done
    [ -z "$busy" ] && { echo "$p"; return 0; }
  done
  fail "no $n free TCP ports in a row found below $lo"
}

# stat_field MNT PYTHON-EXPR: evaluates an expression over the stats JSON `s`.
stat_field() {
  "$PYTHON" -c 'import json,sys; s=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1/.dlfs/stats" "$2"
}

# make_token FILE: a fresh job token (32 random bytes, hex) only its owner can read.
make_token() {
  (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$1")
}

# same_tree A B: every regular file of A has identical bytes in B (SHA-256),
# and B has no file A does not have.
same_tree() {
  local a=$1 b=$2
  (cd "$a" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum) >"$WORK/sums-a"
  (cd "$b" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum) >"$WORK/sums-b"
  if ! cmp -s "$WORK/sums-a" "$WORK/sums-b"; then
    # diff exits 1 on a difference and head may close early: neither must stop set -e
    # before fail names the trees.
    { diff "$WORK/sums-a" "$WORK/sums-b" || true; } | head -20 >&2 || true
    fail "trees differ: $a vs $b"
  fi
}

# require_venv MODULE...: skips (77) unless the project's Python environment ($VENV_PYTHON,
# made by tools/install-deps.sh) imports every MODULE.
require_venv() {
  [ -x "${VENV_PYTHON:-}" ] || skip "no project Python environment (VENV_PYTHON=${VENV_PYTHON:-}): run tools/install-deps.sh"
  local m
  for m in "$@"; do
    "$VENV_PYTHON" -c "import $m" 2>/dev/null || skip "$VENV_PYTHON cannot import $m: run tools/install-deps.sh"
  done
}

# outsider_setup: an unprivileged reader, uid and gid 60001 with no groups and no /etc/passwd
# entry, as trainers read a root daemon's mount. $WORK becomes searchable by all (files the
# test makes there are world-readable under umask 022) and $WORK/home is the reader's home
# (clients write caches there). OUTSIDER is the command prefix that runs as that user.
outsider_setup() {
  command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
  umask 022
  chmod 0755 "$WORK"
  install -d -o 60001 -g 60001 "$WORK/home"
  OUTSIDER=(setpriv --reuid=60001 --regid=60001 --clear-groups env HOME="$WORK/home" PYTHONDONTWRITEBYTECODE=1)
}

# leftovers_in_work: a CLEANUP_HOOKS entry for tests that run tools which mount and start
# processes of their own under $WORK (benchmarks): unmounts what is still mounted there
# (deepest first) and stops every process whose command line names $WORK.
leftovers_in_work() {
  local m pid
  for m in $(awk -v w="$WORK/" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  for pid in $(pgrep -f "$WORK/" || true); do kill -TERM "$pid" 2>/dev/null || true; done
}
