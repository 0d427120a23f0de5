#!/usr/bin/env bash
# Clears what an earlier, interrupted run of the scenarios left on this machine:
# a scenario that was killed (a machine or session stopped mid-run) cannot run its
# trap, and its mounts, daemons and /tmp/dlfs-it-* directory would make this run's
# 99_no_leaks fail although this run leaked nothing. A directory is stale when the
# scenario shell that made it (its .scenario-pid, written by lib.sh) is gone; one
# without that file when it is older than the longest scenario timeout (15 min).
# Directories kept on purpose (DLFS_KEEP_WORK: .kept) are left alone.
# Run by tools/run-tests.sh before meson test; prints what it cleared.
set -uo pipefail
now=$(date +%s)
for dir in /tmp/dlfs-it-*; do
  [ -d "$dir" ] || continue
  [ -e "$dir/.kept" ] && continue
  if [ -f "$dir/.scenario-pid" ]; then
    pid=$(cat "$dir/.scenario-pid" 2>/dev/null)
    # The pid alive and still a shell running a scenario: a run in progress.
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && grep -q "tests/integration/" "/proc/$pid/cmdline" 2>/dev/null; then
      continue
    fi
  else
    age=$(( now - $(stat -c %Y "$dir") ))
    [ "$age" -gt 900 ] || continue
  fi
  echo "clear_stale_runs: $dir is left from an interrupted run: clearing its processes, mounts and files"
  for p in $(pgrep -f "$dir/" || true); do kill -KILL "$p" 2>/dev/null || true; done
  for m in $(awk -v w="$dir/" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || echo "clear_stale_runs: could not unmount $m" >&2
  done
  rm -rf "$dir" 2>/dev/null || echo "clear_stale_runs: could not delete $dir" >&2
done
exit 0
