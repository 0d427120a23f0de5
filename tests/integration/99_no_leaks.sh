#!/usr/bin/env bash
# Runs last: no scenario left a DLFS mount, a dlfsd or a Prometheus process behind.
source "$(dirname "$0")/lib.sh"
require_fuse
leaked_mounts=$(grep " fuse.dlfs " /proc/mounts | grep "/tmp/dlfs-it-" || true)
[ -z "$leaked_mounts" ] || fail "leaked mounts: $leaked_mounts"
leaked_pids=$(pgrep -f "dlfsd .*/tmp/dlfs-it-" || true)
[ -z "$leaked_pids" ] || fail "leaked daemons: $(ps -o pid,args -p "$leaked_pids")"
# Nor a Prometheus a scenario started (56_prometheus: its config under its work directory).
leaked_prometheus=$(pgrep -f "prometheus --config.file=/tmp/dlfs-it-" || true)
[ -z "$leaked_prometheus" ] || fail "leaked prometheus: $(ps -o pid,args -p "$leaked_prometheus")"
leftover_dirs=$(ls -d /tmp/dlfs-it-* 2>/dev/null | grep -v "$WORK" || true)
[ -z "$leftover_dirs" ] || fail "scenario work directories left behind: $leftover_dirs"
log "ok: no mounts, daemons or work directories left"
