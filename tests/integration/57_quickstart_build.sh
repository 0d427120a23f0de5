#!/usr/bin/env bash
# The quick start's build (tools/quickstart.sh) compiles dlfsd and dlfs-ctl as a
# unity build: each target's sources in groups, one compiler run per group, about
# half the compiler's time. Two files that define the same name at file scope
# (a constant, a helper in an anonymous namespace) then collide, which the normal
# build never sees: this builds the two programs that way from this tree, as the
# quick start does, and runs them.
source "$(dirname "$0")/lib.sh"
src=$(cd "$(dirname "$0")/../.." && pwd)
meson setup "$WORK/build" "$src" --buildtype=release -Dunity=on -Dtests=disabled >"$WORK/setup.log" 2>&1 ||
  { cat "$WORK/setup.log"; fail "meson setup of the quick start's build failed"; }
start=$(date +%s)
meson compile -C "$WORK/build" dlfsd dlfs-ctl >"$WORK/compile.log" 2>&1 || {
  grep -E "error|FAILED" "$WORK/compile.log" | head -20
  fail "the quick start's unity build of dlfsd and dlfs-ctl failed (names defined twice at file scope? see above)"
}
log "unity build of dlfsd and dlfs-ctl: $(( $(date +%s) - start )) s"
grep -q -- "--mountpoint" <<<"$("$WORK/build/fs/dlfsd" --help)" || fail "the unity-built dlfsd --help does not list --mountpoint"
grep -q "status" <<<"$("$WORK/build/tools/ctl/dlfs-ctl" --help)" || fail "the unity-built dlfs-ctl --help does not list status"
log "ok"
