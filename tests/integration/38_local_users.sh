#!/usr/bin/env bash
# Issue 32, "nobody reads through DLFS what they cannot read on the backend":
# a root dlfsd (allow_other and the raw overlay, its defaults) serves datasets
# of every format, some with files other users cannot read on the backend;
# unprivileged users (numeric ids through setpriv, no /etc/passwd entries)
# read through the mount, and what each can do there is compared with what
# the same user can do on the backend (check_local_users.py):
#  - raw/ keeps the backend's owner, group and mode (& 0555: no write, no
#    setuid/setgid/sticky) and gives each user what the backend gives it
#    (bytes, EACCES on open, EACCES on lookup, EACCES on listing);
#  - every epoch view of a dataset (listings, <r>.tar, .index, .bin, .tfrecord,
#    <r>/ and its entries, xattrs, the opportunistic stream) carries one
#    owner, group and mode: by default the backend root's owner and group,
#    and read for a class only if that class reads every file of the dataset
#    on the backend; view_owner, view_group and view_mode set them; whoever
#    the mode leaves out gets EACCES (errno 13) for names, bytes and xattrs,
#    also through ls, cat, stat and getfattr, while root reads everything;
#  - the outsider's .dlfs/stats names neither the closed dataset's backend
#    path nor any of its files (root's does);
#  - dlfs-ctl status --json gives each dataset's "access" (owner, group, mode,
#    readers, why), and the log says per dataset who may read its views.
# Users: outsider 60001:60001 without groups; member 60002:60002 in group 60010.
source "$(dirname "$0")/lib.sh"
require_fuse
command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
"$PYTHON" -c 'import lmdb' 2>/dev/null || skip "python3-lmdb is not installed (tools/install-deps.sh installs it)"
HERE="$(cd "$(dirname "$0")" && pwd)"
CHECK="$HERE/check_local_users.py"
OUTSIDER=(setpriv --reuid=60001 --regid=60001 --clear-groups)
GRP=60010
FAILURES=0
bad() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

umask 022
chmod 0755 "$WORK"  # root's 0700 mktemp directory: the users must reach the mounts and the backends
[ "$(stat -c %a /tmp)" = 1777 ] || fail "/tmp is not 1777: the users could not reach $WORK"

# mkfiles DIR PREFIX N SIZE: DIR/PREFIX-00.bin .. of SIZE random bytes each.
mkfiles() {
  mkdir -p "$1"
  for ((i = 0; i < $3; i++)); do head -c "$4" /dev/urandom >"$1/$(printf '%s-%02d.bin' "$2" "$i")"; done
}
# world_readable DIR: directories 0755, files 0644.
world_readable() {
  find "$1" -type d -exec chmod 0755 {} +
  find "$1" -type f -exec chmod 0644 {} +
}

# 1. open: files, all 0644 in 0755 directories.
"$PYTHON" "$GEN_DATASET" files "$WORK/open" --count 24 --size 3K --dirs 3 --seed 38 >/dev/null
world_readable "$WORK/open"
# 2. closed: public files, a root 0600 file, a 0644 file in a root 0700 directory.
mkfiles "$WORK/closed/closed-public" closed-pub 4 2000
mkfiles "$WORK/closed/closed-public/closed-deeper" closed-deep 2 1500
head -c 2500 /dev/urandom >"$WORK/closed/closed-only-root.bin"
mkfiles "$WORK/closed/closed-hidden-dir" closed-hidden-file 1 1800
mv "$WORK/closed/closed-hidden-dir/closed-hidden-file-00.bin" "$WORK/closed/closed-hidden-dir/closed-hidden-file.bin"
world_readable "$WORK/closed"
chmod 0600 "$WORK/closed/closed-only-root.bin"
chmod 0700 "$WORK/closed/closed-hidden-dir"
# 3. modes: what raw/ shows of owners and modes (a 6755 file, files and a
#    directory of another owner, a sticky 1777 directory); readable by all.
mkfiles "$WORK/modes/m-dir" m 2 1000
printf '#!/bin/sh\necho dlfs\n' >"$WORK/modes/suid-tool"
mkfiles "$WORK/modes/foreign-dir" foreign 2 900
head -c 1200 /dev/urandom >"$WORK/modes/foreign.bin"
mkfiles "$WORK/modes/sticky-dir" sticky 1 700
world_readable "$WORK/modes"
chmod 6755 "$WORK/modes/suid-tool"
chown -R 4242:4343 "$WORK/modes/foreign-dir" "$WORK/modes/foreign.bin"
chmod 0444 "$WORK/modes/foreign-dir"/*.bin
chmod 1777 "$WORK/modes/sticky-dir"
# 4. fixed-length records: one data file 0600 in fixed_closed.
for ds in fixed_open fixed_closed; do
  "$PYTHON" "$GEN_DATASET" fixed "$WORK/$ds" --records 40 --record-size 1024 --files 2 >/dev/null
  world_readable "$WORK/$ds"
done
chmod 0600 "$WORK/fixed_closed/data_batch_2.bin"
# 5. LMDB (one value size: a .bin view too): data.mdb 0600 in lmdb_closed.
for ds in lmdb_open lmdb_closed; do
  "$PYTHON" "$HERE/lmdb_build.py" make "$WORK/$ds" 60 sorted 512 1000
  world_readable "$WORK/$ds"
done
chmod 0600 "$WORK/lmdb_closed/data.mdb"
# 6. TFRecord files and WebDataset shards: one 0600 file in each closed one.
for ds in tf_open tf_closed; do "$PYTHON" "$CHECK" make-tfrecord "$WORK/$ds" 2 40 38; world_readable "$WORK/$ds"; done
chmod 0600 "$WORK/tf_closed/train-00001-of-00002"
for ds in wds_open wds_closed; do "$PYTHON" "$CHECK" make-shards "$WORK/$ds" 3 10 38; world_readable "$WORK/$ds"; done
chmod 0600 "$WORK/wds_closed/shard-0001.tar"
# 7. group: root:60010, files 0640 in 0750 directories.
mkfiles "$WORK/group/grp-a" grp-a 3 1500
mkfiles "$WORK/group/grp-b" grp-b 3 1500
chown -R "root:$GRP" "$WORK/group"
find "$WORK/group" -type d -exec chmod 0750 {} +
find "$WORK/group" -type f -exec chmod 0640 {} +
# 8. explicit (view_group, view_mode) and owned (view_owner, view_mode): 0644 files.
for ds in explicit owned; do mkfiles "$WORK/$ds/$ds-d" "$ds" 4 1300; world_readable "$WORK/$ds"; done
log "backends: $(cd "$WORK" && echo */) built"

# One daemon with every dataset the defaults decide for (in config order).
MAIN=open,closed,modes,fixed_open,fixed_closed,lmdb_open,lmdb_closed,tf_open,tf_closed,wds_open,wds_closed,group
{
  echo '[daemon]'
  echo 'log_level = "info"'
  for ds in ${MAIN//,/ }; do
    printf '[[dataset]]\nname = "%s"\nbackend = "%s"\nseed = 38\n' "$ds" "$WORK/$ds"
    case $ds in
      closed) echo 'order = "opportunistic"' ;;
      fixed_*) echo 'format = "fixed"'; echo 'record_size = 1024' ;;
      lmdb_*) echo 'format = "lmdb"' ;;
      tf_*) echo 'format = "tfrecord"' ;;
      wds_*) echo 'format = "tar"'; echo 'group_by = "first-dot"' ;;
    esac
  done
} >"$WORK/main.toml"

# wait_overlays MNT DATASETS: the raw overlay over every dataset's raw/ (when
# this kernel has overlayfs: the checks then go through it, as users' reads do).
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || true
wait_overlays() {
  local mnt=$1 ds n
  if ! grep -qw overlay /proc/filesystems; then
    log "this kernel has no overlayfs: raw/ is checked without the raw overlay"
    return 0
  fi
  for ds in ${2//,/ }; do
    for _ in $(seq 1 100); do grep -q " $mnt/$ds/raw overlay" /proc/mounts && break; sleep 0.1; done
    grep -q " $mnt/$ds/raw overlay" /proc/mounts || bad "no raw overlay over $ds/raw"
  done
  n=$(grep -c " $mnt/.*/raw overlay" /proc/mounts || true)
  log "raw overlay mounted over $n datasets' raw/"
}

# denied WHAT CMD...: CMD run as the outsider fails, saying "Permission denied".
denied() {
  local what=$1 out rc=0; shift
  out=$("${OUTSIDER[@]}" "$@" 2>&1 >/dev/null) || rc=$?
  if [ "$rc" -ne 0 ] && grep -q "Permission denied" <<<"$out"; then
    log "outsider: $what: Permission denied"
  else
    bad "outsider: $what: exit $rc, want Permission denied; stderr: $(head -c 300 <<<"$out")"
  fi
}

# check_log LOG DATASETS: the daemon log names each dataset's view access.
check_log() {
  local ds line
  for ds in ${2//,/ }; do
    line=$(grep "views readable" "$1" | grep -E "(^|[^A-Za-z0-9_.-])$ds([^A-Za-z0-9_.-]|$)" | head -1 || true)
    if [ -n "$line" ]; then log "log: $line"; else bad "the log does not say who may read the views of $ds"; fi
  done
}

MNT="$WORK/mnt"
start_daemon "$MNT" "$WORK/d.log" --config "$WORK/main.toml"
wait_loaded "$MNT"
wait_overlays "$MNT" "$MAIN"
order=$(stat_field "$MNT" '[d for d in s["datasets"] if d["name"] == "closed"][0]["plan"]["order"]')
[ "$order" = opportunistic ] || bad "closed should be served in opportunistic order (its 0.tar a stream), is $order"
"$PYTHON" "$CHECK" check --mnt "$MNT" --work "$WORK" --datasets "$MAIN" ||
  bad "check_local_users.py check: see its FAIL lines above"

# The same through ls, cat, stat and getfattr.
for who in root outsider; do
  if [ $who = root ]; then out=$(ls -ln "$MNT/modes/raw"); else out=$("${OUTSIDER[@]}" ls -ln "$MNT/modes/raw"); fi
  if grep -Eq '^-r-xr-xr-x +[0-9]+ +0 +0 .* suid-tool$' <<<"$out" &&
    grep -Eq '^-r--r--r-- +[0-9]+ +4242 +4343 .* foreign\.bin$' <<<"$out" &&
    grep -Eq '^dr-xr-xr-x +[0-9]+ +4242 +4343 .* foreign-dir$' <<<"$out" &&
    grep -Eq '^dr-xr-xr-x +[0-9]+ +0 +0 .* sticky-dir$' <<<"$out"; then
    log "ls -ln modes/raw as $who: $(grep suid-tool <<<"$out" | cut -c1-10) suid-tool (backend $(stat -c %A "$WORK/modes/suid-tool")), foreign.bin 4242 4343"
  else
    bad "ls -ln modes/raw as $who shows other owners or modes than the backend's & 0555:"$'\n'"$out"
  fi
done
denied "cat closed/raw/closed-only-root.bin" cat "$MNT/closed/raw/closed-only-root.bin"
denied "stat closed/raw/closed-hidden-dir/closed-hidden-file.bin" stat "$MNT/closed/raw/closed-hidden-dir/closed-hidden-file.bin"
denied "ls closed/raw/closed-hidden-dir" ls "$MNT/closed/raw/closed-hidden-dir"
denied "ls closed/epochs" ls "$MNT/closed/epochs"
denied "stat closed/epochs/0/1/0.tar" stat "$MNT/closed/epochs/0/1/0.tar"
denied "cat closed/epochs/0/1/0.tar (the opportunistic stream)" cat "$MNT/closed/epochs/0/1/0.tar"
denied "cat closed/epochs/0/1/0.index" cat "$MNT/closed/epochs/0/1/0.index"
denied "ls closed/epochs/0/1/0/" ls "$MNT/closed/epochs/0/1/0/"
denied "cat fixed_closed/epochs/0/1/0.bin" cat "$MNT/fixed_closed/epochs/0/1/0.bin"
denied "cat lmdb_closed/epochs/0/1/0.bin" cat "$MNT/lmdb_closed/epochs/0/1/0.bin"
denied "cat tf_closed/epochs/0/1/0.tfrecord" cat "$MNT/tf_closed/epochs/0/1/0.tfrecord"
denied "cat wds_closed/epochs/0/1/0.tar" cat "$MNT/wds_closed/epochs/0/1/0.tar"
denied "cat group/epochs/0/1/0.tar" cat "$MNT/group/epochs/0/1/0.tar"
if command -v getfattr >/dev/null; then
  denied "getfattr -d closed/epochs/0/1/0.tar" getfattr -d "$MNT/closed/epochs/0/1/0.tar"
  denied "getfattr -n user.dlfs.seed closed/epochs/0/1/0.index" getfattr -n user.dlfs.seed "$MNT/closed/epochs/0/1/0.index"
  as_root=$(cd "$MNT" && getfattr -d open/epochs/0/1/0.tar 2>&1)
  as_outsider=$(cd "$MNT" && "${OUTSIDER[@]}" getfattr -d open/epochs/0/1/0.tar 2>&1) || true
  if [ -n "$as_root" ] && [ "$as_root" = "$as_outsider" ]; then
    log "outsider: getfattr -d open/epochs/0/1/0.tar: root's $(grep -c '^user\.' <<<"$as_root") xattrs"
  else
    bad "outsider: getfattr -d open/epochs/0/1/0.tar: '$as_outsider', root: '$as_root'"
  fi
else
  log "getfattr (package attr) is not installed: xattrs are checked by check_local_users.py alone"
fi
if "${OUTSIDER[@]}" cat "$MNT/open/epochs/0/1/0.tar" | cmp -s - "$MNT/open/epochs/0/1/0.tar"; then
  log "outsider: cat open/epochs/0/1/0.tar: root's bytes"
else
  bad "outsider: open/epochs/0/1/0.tar differs from root's"
fi
if setpriv --reuid=60002 --regid=60002 --groups=$GRP cat "$MNT/group/epochs/0/1/0.tar" | cmp -s - "$MNT/group/epochs/0/1/0.tar"; then
  log "member: cat group/epochs/0/1/0.tar: root's bytes"
else
  bad "member: group/epochs/0/1/0.tar differs from root's"
fi

"$DLFS_CTL" --socket "$(ctl_socket "$MNT")" status --json >"$WORK/status.json" || bad "dlfs-ctl status --json failed"
"$PYTHON" "$CHECK" status --datasets "$MAIN" <"$WORK/status.json" || bad "dlfs-ctl status --json: no right access per dataset"
check_log "$WORK/d.log" "$MAIN"
stop_daemon "$DAEMON_PID" "$MNT"

# A second daemon for the explicit keys (a daemon without them refuses the config).
cat >"$WORK/explicit.toml" <<TOML
[[dataset]]
name = "explicit"
backend = "$WORK/explicit"
view_group = "$GRP"
view_mode = "0440"
[[dataset]]
name = "owned"
backend = "$WORK/owned"
view_owner = "60001"
view_mode = "0400"
TOML
[ "$FAILURES" -eq 0 ] || log "$FAILURES checks failed so far; now the explicit view_* keys"
MNT2="$WORK/mnt2"
start_daemon "$MNT2" "$WORK/d2.log" --config "$WORK/explicit.toml"
wait_loaded "$MNT2"
wait_overlays "$MNT2" explicit,owned
"$PYTHON" "$CHECK" check --mnt "$MNT2" --work "$WORK" --datasets explicit,owned ||
  bad "check_local_users.py check (explicit keys): see its FAIL lines above"
"$DLFS_CTL" --socket "$(ctl_socket "$MNT2")" status --json >"$WORK/status2.json" || bad "dlfs-ctl status --json failed"
"$PYTHON" "$CHECK" status --datasets explicit,owned <"$WORK/status2.json" ||
  bad "dlfs-ctl status --json: no right access for the explicit keys"
check_log "$WORK/d2.log" explicit,owned
stop_daemon "$DAEMON_PID" "$MNT2"

# The same rules when requests come over io_uring and raw files are passed
# through to their backend files (while a slowed load runs): the kernel
# checks permissions before either path, and nothing here may differ.
: "${FAULTY_BACKEND:?FAULTY_BACKEND must point at the faulty_backend module}"
PARAM=/sys/module/fuse/parameters/enable_uring
URING=()
if [ -e "$PARAM" ]; then
  old_param=$(cat "$PARAM")
  CLEANUP_HOOKS+=("echo $old_param > $PARAM")
  URING=(--fuse-uring on)
fi
cat >"$WORK/paths.toml" <<TOML
[[dataset]]
name = "closed"
backend = "$WORK/closed"
order = "opportunistic"
[[dataset]]
name = "group"
backend = "$WORK/group"
TOML
MNT3="$WORK/mnt3"
DAEMON_WRAP=(env LD_PRELOAD="$FAULTY_BACKEND" DLFS_FAULT_DELAY="$WORK/*" DLFS_FAULT_DELAY_MS=20)
start_daemon "$MNT3" "$WORK/d3.log" --config "$WORK/paths.toml" "${URING[@]}" --passthrough on --raw-overlay off \
  --extent-size 4KiB --loader-threads 1
DAEMON_WRAP=()
paths=$(stat_field "$MNT3" '"uring %s passthrough %s, closed %s" % (s["fuse"]["uring"]["in_use"], s["fuse"]["passthrough"]["in_use"], [d for d in s["datasets"] if d["name"] == "closed"][0]["load"]["state"])')
log "requests over: $paths"
"$PYTHON" "$CHECK" check --mnt "$MNT3" --work "$WORK" --datasets closed,group ||
  bad "check_local_users.py check (io_uring and passthrough): see its FAIL lines above"
denied "cat closed/raw/closed-only-root.bin (io_uring, passthrough)" cat "$MNT3/closed/raw/closed-only-root.bin"
denied "cat closed/epochs/0/1/0.index (io_uring, passthrough)" cat "$MNT3/closed/epochs/0/1/0.index"
passed=$(stat_field "$MNT3" 's["fuse"]["passthrough"]["backing_files"]')
log "backing files handed to the kernel during the checks: $passed"
stop_daemon "$DAEMON_PID" "$MNT3"

[ "$FAILURES" -eq 0 ] || fail "$FAILURES checks failed (FAIL lines above)"
log "ok"
