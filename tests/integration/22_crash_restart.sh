#!/usr/bin/env bash
# Crash recovery. A dlfsd killed with SIGKILL leaves its mount dead (every
# request: ENOTCONN); started again with the same command line, with no manual
# step, it unmounts that dead mount itself (and logs it), mounts, and serves
# the backend's bytes. What must not be unmounted is refused and left as it
# was: a live daemon's mount, a stopped daemon's mount (it does not answer in
# time, but it is not dead), and a file system that is not DLFS (a tmpfs).
# Then a cluster member on this host is SIGKILLed mid-read over UCX shared
# memory: the survivors' reads stay correct and bounded, and once restarted it
# serves its stripe to them again (docs/deploy.md, "A daemon crashed").
source "$(dirname "$0")/lib.sh"
require_fuse

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 300 --size 40K --size-jitter 0.5 --dirs 4 --seed 22 >/dev/null
MNT=$WORK/mnt
ARGS=(--backend "$WORK/data" --name ds --extent-size 256KiB)

# dlfs_mounts PATH: how many DLFS mounts the mount table lists at PATH.
dlfs_mounts() { awk -v m="$1" '$5 == m && / - fuse\.dlfs dlfs /' /proc/self/mountinfo | wc -l; }
# mount_ids PATH: the ids of every mount at PATH (whatever its type).
mount_ids() { awk -v m="$1" '$5 == m { print $1 }' /proc/self/mountinfo | tr '\n' ' '; }
# listing_errno PATH: "ok", or the errno name a statfs and a listing of PATH
# fail with. statfs always asks the daemon; a listing may come from the
# kernel's cache alone (directories are opened without the daemon, their
# listings cached: docs/internals.md, "No state per open").
listing_errno() {
  "$PYTHON" -c 'import errno, os, sys
try:
    os.statvfs(sys.argv[1]); os.listdir(sys.argv[1]); print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))' "$1"
}
# second_dlfsd PATH: runs another dlfsd on PATH (the first's command line);
# it must exit non-zero within 30 s. Its output is left in SECOND_OUT.
second_dlfsd() {
  local rc=0
  SECOND_OUT=$(timeout 30 "$DLFSD" --mountpoint "$1" --control-socket "$(ctl_socket "$1")" "${ARGS[@]}" 2>&1) || rc=$?
  [ "$rc" -ne 0 ] || fail "a second dlfsd started on $1: $SECOND_OUT"
  [ "$rc" -ne 124 ] || fail "a second dlfsd on $1 hung (30 s)"
}

# ---- SIGKILL, then the same command line again -------------------------------
start_daemon "$MNT" "$WORK/d1.log" "${ARGS[@]}"
same_tree "$WORK/data" "$MNT/ds/raw"
kill -KILL "$DAEMON_PID"
wait_exit "$DAEMON_PID"
for _ in $(seq 1 50); do [ "$(listing_errno "$MNT")" = ENOTCONN ] && break; sleep 0.1; done
[ "$(listing_errno "$MNT")" = ENOTCONN ] ||
  fail "after SIGKILL, statfs or listing of $MNT gave $(listing_errno "$MNT"), not ENOTCONN"
[ "$(dlfs_mounts "$MNT")" = 1 ] || fail "the dead mount is not in the mount table as fuse.dlfs"
log "SIGKILL: $MNT is dead (ENOTCONN), still mounted"

start_daemon "$MNT" "$WORK/d2.log" "${ARGS[@]}"   # the same command line
grep -q "unmounted a DLFS mount whose daemon died" "$WORK/d2.log" ||
  { cat "$WORK/d2.log"; fail "the restart did not log the dead mount it unmounted"; }
[ "$(dlfs_mounts "$MNT")" = 1 ] || fail "$(dlfs_mounts "$MNT") DLFS mounts at $MNT after the restart, not 1"
same_tree "$WORK/data" "$MNT/ds/raw"
log "restarted with the same command line: dead mount cleared, every file equals the backend"

# ---- a live mount is refused ------------------------------------------------
ids=$(mount_ids "$MNT")
second_dlfsd "$MNT"
echo "$SECOND_OUT" | grep -q "is busy: a running dlfsd serves it" || fail "live mount: unexpected refusal: $SECOND_OUT"
[ "$(mount_ids "$MNT")" = "$ids" ] || fail "the live mount changed under a refused second dlfsd"
same_tree "$WORK/data" "$MNT/ds/raw"
log "live mount refused: $(echo "$SECOND_OUT" | tail -1)"

# ---- a stopped daemon's mount does not answer: refused, within a bound ------
kill -STOP "$DAEMON_PID"
t0=$(date +%s%N)
second_dlfsd "$MNT"
took=$((($(date +%s%N) - t0) / 1000000))
kill -CONT "$DAEMON_PID"
echo "$SECOND_OUT" | grep -q "did not answer within" || fail "stopped daemon: unexpected refusal: $SECOND_OUT"
[ "$took" -lt 15000 ] || fail "the refusal of a stopped daemon's mount took $took ms"
[ "$(mount_ids "$MNT")" = "$ids" ] || fail "a stopped daemon's mount was unmounted"
same_tree "$WORK/data" "$MNT/ds/raw"
log "stopped daemon's mount refused in $took ms and kept; serves again after SIGCONT"
stop_daemon "$DAEMON_PID" "$MNT"

# ---- another file system is refused, named and left alone -------------------
FOREIGN=$WORK/foreign
mkdir -p "$FOREIGN"
mount -t tmpfs -o size=1m dlfs-test-tmpfs "$FOREIGN" || skip "cannot mount a tmpfs here"
CLEANUP_HOOKS+=("grep -q ' $FOREIGN ' /proc/mounts && umount -l '$FOREIGN'")
ids=$(mount_ids "$FOREIGN")
second_dlfsd "$FOREIGN"   # empty: the mount is the only reason to refuse
echo "$SECOND_OUT" | grep -q "is busy: a tmpfs file system (source 'dlfs-test-tmpfs')" ||
  fail "tmpfs: unexpected refusal: $SECOND_OUT"
[ "$(mount_ids "$FOREIGN")" = "$ids" ] || fail "the tmpfs was unmounted or covered"
[ "$(listing_errno "$FOREIGN")" = ok ] || fail "the tmpfs does not answer after the refusal"
umount "$FOREIGN"
log "tmpfs refused and left mounted: $(echo "$SECOND_OUT" | tail -1)"

# ---- a cluster member SIGKILLed mid-read, then restarted --------------------
# Three daemons on this host over UCX shared memory, every shared-memory
# transport allowed (posix and sysv queues too: the case docs/deploy.md
# discusses). Node 2 is SIGKILLed while nodes 0 and 1 stream epoch views, a
# third of whose bytes are gets from it. Their reads stay correct and end
# within a bound (a get waits at most get_timeout_ms, then the backend
# serves). Node 2, started again with the same command line, clears its dead
# mount and rejoins as a new session, and both survivors read its stripe from
# its memory again: nothing of theirs was left wedged.
export UCX_TLS=${DLFS_CRASH_UCX_TLS:-posix,cma,sysv,tcp} UCX_WARN_UNUSED_ENV_VARS=n
PORT_BASE=$(free_port_base 3)
PEERS=127.0.0.1:$PORT_BASE,127.0.0.1:$((PORT_BASE + 1)),127.0.0.1:$((PORT_BASE + 2))
make_token "$WORK/token"
# node_args I: node I's dlfsd arguments (the same at the restart), in NODE_ARGS.
node_args() {
  NODE_ARGS=(--backend "$WORK/data" --name ds --seed 5 --extent-size 256KiB --memory-budget 1G
    --peers "$PEERS" --rank "$1" --token-file "$WORK/token")
}
# by_source I KIND: node I's bytes of the dataset from KIND (local, remote, backend).
by_source() { stat_field "$WORK/c$1" "s['datasets'][0]['bytes_by_source']['$2']"; }
# wait_resident I...: until each node says every stripe is resident on its owner (30 s).
wait_resident() {
  local i ok
  for _ in $(seq 1 300); do
    ok=1
    for i in "$@"; do [ "$(stat_field "$WORK/c$i" 's["cluster"]["all_resident"]')" = True ] || ok=0; done
    [ $ok = 1 ] && return 0
    sleep 0.1
  done
  return 1
}
PIDS=()
for i in 0 1 2; do
  node_args "$i"
  start_daemon "$WORK/c$i" "$WORK/c$i.log" "${NODE_ARGS[@]}"
  PIDS[i]=$DAEMON_PID
done
wait_resident 0 1 2 || fail "the 3 nodes never became resident"

remote_before=$(by_source 0 remote)
READERS=()
for i in 0 1; do
  "$PYTHON" "$(dirname "$0")/check_views.py" "$WORK/c$i" ds "$WORK/data" --format files --samples 300 \
    --epochs 1,2 --world-sizes 1 --remainder pad --threads 4 >"$WORK/reader$i.out" 2>&1 &
  READERS[i]=$!
done
for _ in $(seq 1 100); do [ "$(by_source 0 remote)" -gt "$remote_before" ] && break; sleep 0.1; done
kill -0 "${READERS[0]}" 2>/dev/null || fail "node 0's reader ended before node 2 could be killed mid-read"
kill -KILL "${PIDS[2]}"
t0=$(date +%s%N)
for i in 0 1; do
  wait_exit "${READERS[$i]}" 60
  [ "$WAIT_RC" -eq 0 ] ||
    { cat "$WORK/reader$i.out"; fail "node $i's reads failed or hung after node 2 was SIGKILLed"; }
done
took=$((($(date +%s%N) - t0) / 1000000))
[ "$took" -lt 30000 ] || fail "the survivors' reads took $took ms after the kill"
wait_exit "${PIDS[2]}"
# The survivors may finish before the heartbeats call node 2 down
# (down_after_ms, 2 s by default): give the log that long and some.
for _ in $(seq 1 100); do grep -q "rank 2 .* is down" "$WORK/c0.log" && break; sleep 0.1; done
grep -q "rank 2 .* is down" "$WORK/c0.log" || fail "node 0 did not log node 2 down within 10 s of the kill"
log "node 2 SIGKILLed mid-read ($UCX_TLS): nodes 0 and 1 read 2 epochs correctly, done $took ms after the kill"

node_args 2
start_daemon "$WORK/c2" "$WORK/c2-again.log" "${NODE_ARGS[@]}"
grep -q "unmounted a DLFS mount whose daemon died" "$WORK/c2-again.log" || fail "node 2 did not clear its dead mount"
wait_resident 0 1 2 || fail "node 2 did not rejoin with its stripe resident within 30 s"
for i in 0 1; do grep -q "rank 2 .* is back" "$WORK/c$i.log" || fail "node $i did not log node 2 back"; done
sync; echo 3 >/proc/sys/vm/drop_caches
for i in 0 1; do
  backend=$(by_source "$i" backend) remote=$(by_source "$i" remote)
  same_tree "$WORK/data" "$WORK/c$i/ds/raw"
  [ "$(by_source "$i" backend)" = "$backend" ] || fail "node $i read from the backend with every stripe resident again"
  [ "$(by_source "$i" remote)" -gt "$remote" ] || fail "node $i read nothing from its peers' memory"
done
for i in 0 1; do stop_daemon "${PIDS[$i]}" "$WORK/c$i"; done
stop_daemon "$DAEMON_PID" "$WORK/c2"
log "node 2 restarted with the same command line: rejoined, survivors read its stripe from its memory again"
log "ok"
