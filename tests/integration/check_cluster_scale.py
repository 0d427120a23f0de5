#!/usr/bin/env python3
"""Checks what tools/bench/scale_bench.py measured for 54_cluster_scale.sh.

  check_cluster_scale.py RESULTS.json N

Fails (naming the figure) unless, for the N-node cluster: it formed within
FORM_BOUND_S; the nodes together read 0.99-1.1x the dataset from the backend
while loading; every node's view and raw samples were byte-exact and the views
read nothing from the backend; the SIGKILLed node was seen down by every
other node within the heartbeat timeout plus slack, the reader streaming
through the kill finished with the right bytes (the dead node's samples read
from the backend), and the restarted node
rejoined everywhere; the SIGSTOPped node was seen down by all and came back;
idle heartbeat traffic per peer stayed under IDLE_PER_PEER_MAX bytes/s (a
runaway of messages), and each node sent pings only to the peers it watches
(dlfsd's membership counters).
"""
import json
import sys

from checklib import fail

FORM_BOUND_S = 30.0
DOWN_AFTER_S = 2.0  # [cluster] down_after_ms's default
HEARTBEAT_S = 0.5
SLACK_S = 1.5  # polling and a busy 2-core machine
IDLE_PER_PEER_MAX = 20000
WATCH_PEERS = 3  # [cluster] watch_peers's default


def main():
    path, n = sys.argv[1], sys.argv[2]
    with open(path) as f:
        results = json.load(f)
    r = results["runs"].get(n) or fail(f"no run of {n} nodes in {path}")
    ds = r["dataset"]["bytes"]
    f = r["form"]
    if not f["formed"]:
        fail(f"{n} nodes did not form within {f['bound_s']} s: {f['summary']}")
    if f["form_s"] > FORM_BOUND_S:
        fail(f"{n} nodes formed in {f['form_s']:.1f} s, bound {FORM_BOUND_S} s")
    ratio = f["backend_bytes"] / ds
    if not 0.99 <= ratio <= 1.1:
        fail(f"the nodes read {ratio:.3f}x the dataset from the backend while loading (expected once, <= 1.1x)")
    v = r["views"]
    if not v["ok"]:
        fail("views or raw files differ from the backend: " + "; ".join(v["errors"]))
    if v["backend_bytes_during"] != 0:
        fail(f"with every stripe resident, the views read {v['backend_bytes_during']} bytes from the backend")
    k = r["kill"]
    if k["not_detected_by"]:
        fail(f"nodes {k['not_detected_by']} never showed the killed rank {k['victim']} down")
    if k["detect_s_max"] > DOWN_AFTER_S + HEARTBEAT_S + SLACK_S:
        fail(f"the killed node was seen down by all only after {k['detect_s_max']:.2f} s")
    rd = k["reader"]
    if not rd["ok"]:
        fail(f"the reader streaming during the kill failed: {rd['error']}")
    if rd["backend_bytes"] <= 0:
        fail("the reader's node read nothing from the backend after the kill: the dead node's samples came from "
             "elsewhere, or the kill came after the reader had them")
    if not k["rejoin"]["ok"]:
        fail(f"the restarted node did not rejoin within {k['rejoin']['bound_s']} s: {k['rejoin']['nodes']}")
    s = r.get("stop") or fail("no SIGSTOP measurement")
    if s["not_detected_by"]:
        fail(f"nodes {s['not_detected_by']} never showed the stopped rank {s['victim']} down")
    if s["detect_s_max"] > DOWN_AFTER_S + HEARTBEAT_S + SLACK_S:
        fail(f"the stopped node was seen down by all only after {s['detect_s_max']:.2f} s")
    if s["back_s"] is None:
        fail("the stopped node did not come back after SIGCONT")
    i = r["idle"]
    if not 0 < i["tx_bytes_s_per_peer"] <= IDLE_PER_PEER_MAX:
        fail(f"idle traffic {i['tx_bytes_s_per_peer']:.0f} B/s per peer (bound {IDLE_PER_PEER_MAX}; 0: no heartbeats?)")
    # Each node pings only the watch_peers (3) next ranks once loaded: the
    # pings it sends while idle do not grow with N.
    m = i.get("membership_per_s") or fail("no membership counters in dlfsd's status")
    pings = m.get("sent.by_kind.ping.messages", 0)
    watched = min(WATCH_PEERS, int(n) - 1)
    if not 0 < pings <= 1.2 * watched / HEARTBEAT_S:
        fail(f"a node sent {pings:.1f} pings/s while idle: {watched} watched peers every {HEARTBEAT_S} s make "
             f"{watched / HEARTBEAT_S:.0f}")
    print(f"{n} nodes: formed in {f['form_s']:.2f} s, backend {ratio:.3f}x the dataset, views exact; "
          f"kill seen in {k['detect_s_median']:.2f}/{k['detect_s_max']:.2f} s (median/max), reader ok "
          f"(longest read after the kill {rd['longest_read_after_kill_s']:.2f} s), rejoined in "
          f"{k['rejoin']['resident_s']:.2f} s; stop seen in {s['detect_s_median']:.2f}/{s['detect_s_max']:.2f} s; "
          f"idle {i['tx_bytes_s_per_peer']:.0f} B/s per peer, CPU {i['cpu_pct_median']:.2f}% median")


if __name__ == "__main__":
    main()
