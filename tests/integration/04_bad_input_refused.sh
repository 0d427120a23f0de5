#!/usr/bin/env bash
# Bad mountpoints, backends and configs: one clear error line, a non-zero exit,
# and nothing mounted, nothing left running.
source "$(dirname "$0")/lib.sh"
require_fuse

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 10 --size 4K --seed 4 >/dev/null
mkdir -p "$WORK/mnt" "$WORK/full"; : >"$WORK/full/something"; : >"$WORK/a_file"

# expect_refused "what" "text expected in stderr" dlfsd-args...
expect_refused() {
  local what=$1 expected=$2; shift 2
  local rc=0 out mounts_before
  mounts_before=$(grep -c "$WORK" /proc/mounts || true)
  out=$(timeout 30 "$DLFSD" --control-socket "$WORK/ctl.sock" "$@" 2>&1) || rc=$?
  [ "$rc" -ne 0 ] || fail "$what: dlfsd exited 0"
  [ "$rc" -ne 124 ] || fail "$what: dlfsd hung"
  grep -qF -- "$expected" <<<"$out" || fail "$what: expected '$expected' in: $out"
  [ "$(grep -c "$WORK" /proc/mounts || true)" = "$mounts_before" ] || fail "$what: left a mount"
  log "refused as expected ($what): $(echo "$out" | tail -1)"
}

expect_refused "missing mountpoint" "mountpoint '$WORK/nope': No such file or directory" \
  --mountpoint "$WORK/nope" --backend "$WORK/data"
expect_refused "mountpoint is a file" "is not a directory" --mountpoint "$WORK/a_file" --backend "$WORK/data"
expect_refused "mountpoint not empty" "is not empty" --mountpoint "$WORK/full" --backend "$WORK/data"
expect_refused "missing backend" "$WORK/missing" --mountpoint "$WORK/mnt" --backend "$WORK/missing"
expect_refused "backend is a file" "not a directory" --mountpoint "$WORK/mnt" --backend "$WORK/a_file"
expect_refused "no mountpoint" "no mountpoint" --backend "$WORK/data"
expect_refused "bad size" "memory budget: size '12parsecs'" --mountpoint "$WORK/mnt" --backend "$WORK/data" --memory-budget 12parsecs
expect_refused "fixed without record size" "record_size" --mountpoint "$WORK/mnt" --backend "$WORK/data" --format fixed
expect_refused "records do not divide" "not" --mountpoint "$WORK/mnt" --backend "$WORK/data" --format fixed --record-size 3000

cat >"$WORK/typo.toml" <<TOML
[daemon]
mountpoint = "$WORK/mnt"
[cache]
memroy_budget = "1GiB"
[[dataset]]
name = "ds"
backend = "$WORK/data"
TOML
expect_refused "unknown config key" "unknown key 'cache.memroy_budget'" --config "$WORK/typo.toml"
printf '[daemon\nmountpoint = 1\n' >"$WORK/syntax.toml"
expect_refused "config syntax" "line 1" --config "$WORK/syntax.toml"
cat >"$WORK/type.toml" <<TOML
[daemon]
mountpoint = "$WORK/mnt"
fuse_threads = "lots"
[[dataset]]
name = "ds"
backend = "$WORK/data"
TOML
expect_refused "config type" "daemon.fuse_threads" --config "$WORK/type.toml"

# A busy mountpoint: a live DLFS mount there already.
start_daemon "$WORK/mnt" "$WORK/first.log" --backend "$WORK/data" --name ds
expect_refused "busy mountpoint" "is busy" --mountpoint "$WORK/mnt" --backend "$WORK/data"
# The control socket of a live daemon is not stolen.
mkdir -p "$WORK/mnt2"
out=$(timeout 30 "$DLFSD" --mountpoint "$WORK/mnt2" --backend "$WORK/data" --control-socket "$(ctl_socket "$WORK/mnt")" 2>&1) && fail "second daemon on a live socket started"
grep -q "in use" <<<"$out" || fail "expected 'in use' for a live control socket, got: $out"
grep -q " $WORK/mnt2 fuse" /proc/mounts && fail "second daemon left a mount"
stop_daemon "$DAEMON_PID" "$WORK/mnt"
log "ok"
