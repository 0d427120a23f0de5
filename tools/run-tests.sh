#!/usr/bin/env bash
# The whole test suite from a fresh clone: install packages, build, run every
# unit test and integration scenario (real FUSE mounts: needs root and /dev/fuse).
# Usage: tools/run-tests.sh [extra meson test args, e.g. --suite unit]
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=debugoptimized
else
  # tools/quickstart.sh sets build/ up without the tests and as a unity build (faster to
  # build once, slower to rebuild after a change): back to what the tests need.
  opts=$(meson introspect build --buildoptions | /usr/bin/python3 -c 'import json, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
print(o["tests"], o["unity"])')
  [ "$opts" = "auto off" ] || meson configure build -Dtests=auto -Dunity=off
fi
meson compile -C build
# What an interrupted earlier run left (mounts, daemons, work directories) would
# fail 99_no_leaks: clear it first, saying what.
tests/integration/clear_stale_runs.sh
# Integration scenarios mount for real; run them one at a time (is_parallel: false).
# Suite "long" (a 1.28e6-record LMDB replay check, minutes) is left out; run
# it with: meson test -C build --suite long
meson test -C build --print-errorlogs --num-processes 2 --no-suite long "$@"
