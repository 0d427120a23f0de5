#!/usr/bin/env bash
# Every write-like operation fails with EROFS and changes nothing.
source "$(dirname "$0")/lib.sh"
require_fuse

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 20 --size 4K --dirs 2 --seed 3 >/dev/null
start_daemon "$WORK/mnt" "$WORK/dlfsd.log" --backend "$WORK/data" --name ds
raw="$WORK/mnt/ds/raw"
f=$(cd "$raw" && find . -type f | LC_ALL=C sort | sed -n 1p)
d=$(cd "$raw" && find . -mindepth 1 -type d | LC_ALL=C sort | sed -n 1p)
sum_before=$(sha256sum "$WORK/data/$f" | cut -d' ' -f1)

expect_erofs() {
  local what=$1; shift
  local out
  if out=$("$@" 2>&1); then fail "$what succeeded on a read-only mount"; fi
  grep -q "Read-only file system" <<<"$out" || fail "$what: expected 'Read-only file system', got: $out"
}
expect_erofs "write"    sh -c "echo x >> '$raw/$f'"
expect_erofs "truncate" truncate -s 0 "$raw/$f"
expect_erofs "create"   touch "$raw/new_file"
expect_erofs "mkdir"    mkdir "$raw/new_dir"
expect_erofs "rm"       rm -f "$raw/$f"
expect_erofs "rmdir"    rmdir "$raw/$d"
expect_erofs "rename"   mv "$raw/$f" "$raw/renamed"
expect_erofs "chmod"    chmod 777 "$raw/$f"
expect_erofs "chown"    chown nobody "$raw/$f"
expect_erofs "symlink"  ln -s x "$raw/link"
expect_erofs "link"     ln "$raw/$f" "$raw/hardlink"
expect_erofs "setfattr" "$PYTHON" -c "import os; os.setxattr('$raw/$f', 'user.x', b'1')"
expect_erofs "utime"    touch -m "$raw/$f"
expect_erofs "stats"    sh -c "echo x > '$WORK/mnt/.dlfs/stats'"
[ "$(sha256sum "$WORK/data/$f" | cut -d' ' -f1)" = "$sum_before" ] || fail "backend file changed"
[ ! -e "$WORK/data/new_file" ] || fail "a file appeared in the backend"
stop_daemon "$DAEMON_PID" "$WORK/mnt"
log "ok"
