#!/usr/bin/env bash
# Cluster scale, small (issue 35): tools/bench/scale_bench.py with 8 daemons in
# 8 network namespaces (UCX over tcp), one dataset striped over them. The
# checker asserts what the benchmark measured: the cluster formed (every peer
# up, every stripe resident) within a bound; all nodes together read the
# dataset about once from the backend; every node's epoch view and sampled
# raw files are the backend's bytes, and the views read nothing from the
# backend; a SIGKILLed node is seen down by every other node, the reader
# streaming through it finishes with the right bytes, and the node restarted
# rejoins everywhere; a SIGSTOPped node is seen down by all within the
# heartbeat timeout and back after SIGCONT; idle membership traffic per peer
# stays under a bound. The benchmark tears its namespaces and daemons down
# itself; the hooks below are the net for a run killed half-way.
DLFS_SCENARIO_TIMEOUT=${DLFS_SCENARIO_TIMEOUT:-300}
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
require_fuse
command -v nsenter >/dev/null || skip "nsenter (util-linux) not installed"
require_netns ucx
N=${DLFS_SCALE_NODES:-8}
TAG="s$$"
BENCH="$(dirname "$0")/../../tools/bench/scale_bench.py"
CLEANUP_HOOKS+=("leftovers_in_work" "netns_down $TAG-$N")

# 1024 files of ~8 KiB (8 MiB): each node loads 1 MiB. --idle 5: the traffic
# bound needs a few heartbeats, not the benchmark's 20 s.
"$PYTHON" "$BENCH" --build "$(dirname "$(dirname "$DLFSD")")" --workdir "$WORK/bench" --tag "$TAG" \
  --nodes "$N" --files 1024 --file-size 8K --idle 5 --settle 1 --form-timeout 60 --rejoin-timeout 60 \
  --json "$WORK/scale.json" || fail "scale_bench.py failed"
"$PYTHON" "$(dirname "$0")/check_cluster_scale.py" "$WORK/scale.json" "$N" || fail "scale checks"
log "ok"
