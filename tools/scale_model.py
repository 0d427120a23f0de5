#!/usr/bin/env python3
"""A model of DLFS's cluster costs as functions of N, fitted to scale_bench.py's
measurements and checked against them (issue 35, part 2; docs/scale.md).

  scale_model.py RESULTS.json [MORE.json ...] [--nodes 256,1024] [--link-gbps 100]
                 [--latency-us 2] [--dataset 1T] [--sample 110K] [--backend-gbps 10]
                 [--k 3] [--json out.json]

RESULTS.json are tools/bench/scale_bench.py --json outputs (several: runs with
other heartbeat_ms let the fit tell a message's CPU from a peer's). It prints:
the fitted constants; measured against modelled for every measured N with the
relative error; and the prediction for --nodes on separate machines (one
daemon a node, --link-gbps links of --latency-us one way), for the two
liveness protocols side by side, against the goals at 1,024 nodes:

  (a) all-to-all: every node pings every peer every heartbeat h; the pong
      carries residency and byte counters; a peer silent for down_after d is down
  (b) overlay: each node pings only its K ring successors (r+1..r+K mod N) every
      h; a monitor that finds one silent for d sends one "down" notice to every
      peer (N-1 messages, once per failure); residency of the other peers comes
      with the join's welcome (and by pings only while that peer loads)
  Joins are all-to-all in both (hello, challenge, proof, welcome).

What is modelled (per node; h, d from the runs' dlfsd settings):
  idle messages /s   handled (sent + received): a) 4(N-1)/h   b) 4K/h
  idle bytes /s      sent: msgs_sent/s x B_msg (wire bytes a message, TCP/IP and
                     its ACK's share included), received the same
  idle CPU           c_floor + c_msg x messages/s (+ c_peer x (N-1) when runs with
                     another h separate it); c_floor is what a daemon spends with
                     no message at all (today: its UCX progress thread's polling)
  joins              per node W(N) = c_start + c_join x (N-1) CPU seconds to form
                     (c_join: one peer joined both ways), b_join wire bytes a peer
  forming, one host  T = t_fix + N W(N) / (cores - N u(N)), u = idle CPU share:
                     every daemon's work on the host's cores, less what their idle
                     polling keeps busy; >= cores: never forms
  forming, N hosts   T = t_fix + W(N) + 4 RTT + (N-1) b_join / link  (all up),
                     + the stripe's load D/N / backend rate  (all resident)
  killed node        its connections break: seen at the next heartbeat tick,
                     h + e_kill (e_kill fitted), both protocols
  silent node        a) the last of the N-1 monitors: d - h + 2h (N-1)/N + e_stop
                     b) the first of K: d - h + 2h/(K+1) (worst d + h), + e_stop,
                        + its notices: (N-1) c_msg + one latency
  rejoin, N hosts    t_fix_rejoin + W(N) + D/N / backend rate
  backend bytes      the measured ratio x D (each node loads its stripe once)
Only the standard library.
"""
import argparse
import json
import statistics
import sys

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
GOALS = {"up_s": 10.0, "idle_bytes_s": 1e6, "idle_cpu_pct": 1.0, "detect_s": 3.0}


def size_arg(text):
    t = text.upper().removesuffix("IB").removesuffix("B")
    return int(float(t[:-1]) * UNITS[t[-1]]) if t[-1] in UNITS else int(t)


def lstsq(rows, ys):
    """Least squares coefficients of ys ~ rows (each row: the regressors), by the
    normal equations (few regressors, well-scaled enough here)."""
    k = len(rows[0])
    a = [[sum(r[i] * r[j] for r in rows) for j in range(k)] for i in range(k)]
    b = [sum(r[i] * y for r, y in zip(rows, ys)) for i in range(k)]
    for c in range(k):  # Gauss-Jordan with partial pivoting
        p = max(range(c, k), key=lambda i: abs(a[i][c]))
        a[c], a[p], b[c], b[p] = a[p], a[c], b[p], b[c]
        if abs(a[c][c]) < 1e-300:
            raise ValueError("regressors are collinear: more distinct runs needed")
        for i in range(k):
            if i != c:
                f = a[i][c] / a[c][c]
                a[i] = [x - f * y for x, y in zip(a[i], a[c])]
                b[i] -= f * b[c]
    return [b[i] / a[i][i] for i in range(k)]


def rel(model, measured):
    return None if not measured else (model - measured) / measured


# ---- the measurements ----------------------------------------------------------

def load_points(paths):
    """One dict a measured N (formed or not), from every results file."""
    pts = []
    for p in paths:
        with open(p) as f:
            r = json.load(f)
        prm = r["params"]
        for n, run in r["runs"].items():
            pts.append({"n": int(n), "h": prm["heartbeat_ms"] / 1000, "d": prm["down_after_ms"] / 1000,
                        "cores": prm["cores"], "run": run, "file": p,
                        # per run since --files-per-node; before, one for the file
                        "dataset": run["dataset"]["bytes"] if "dataset" in run else prm["dataset_bytes"]})
    return sorted(pts, key=lambda q: (q["h"], q["n"]))


def formed(pts):
    return [p for p in pts if p["run"]["form"]["formed"]]


# ---- the fit -------------------------------------------------------------------

RECONNECT_S = 1.0  # ClusterOptions::reconnect (transport/cluster.h): a failed join is retried after this


def idle(p):
    return p["run"]["idle"]


class Model:
    def __init__(self, pts):
        self.pts = pts
        ok = formed(pts)
        if len(ok) < 2:
            sys.exit("scale_model.py: fewer than two formed runs to fit")
        self.cores = ok[0]["cores"]
        # Wire bytes a message, by heartbeat: each node sends a ping and a pong per
        # peer per heartbeat (more messages a second share TCP ACKs: fewer bytes each).
        self.b_msg = {}
        for h in sorted({p["h"] for p in ok}):
            same = [p for p in ok if p["h"] == h]
            self.b_msg[h] = (statistics.median(idle(p)["tx_bytes_s_per_peer"] * h / 2 for p in same),
                             statistics.median(idle(p)["rx_bytes_s"] / (p["n"] - 1) * h / 2 for p in same),
                             statistics.median(idle(p)["tx_packets_s_per_peer"] * h / 2 for p in same))
        # Payload bytes a message, when dlfsd counts them (status' membership object).
        self.payload = None
        mc = [idle(p).get("membership_per_s") for p in ok]
        if all(mc):
            msgs = sum(m.get("sent.messages", 0) for m in mc)
            self.payload = sum(m.get("sent.bytes", 0) for m in mc) / msgs if msgs else None
        # Idle CPU. Its floor (the UCX progress thread polling in 200 us sleeps) is
        # not a per-node constant on one host: the more daemons crowd its cores,
        # the later each wakes and the less each polls. A message's cost is what
        # CPU grows by with the message rate at one N (runs with other
        # heartbeat_ms), so each N gets its own intercept. A daemon with a core to
        # itself: the runs with the fewest daemons (the median of their intercepts;
        # crowding only lowers what a polling thread gets).
        ns = sorted({p["n"] for p in ok})
        y = [idle(p)["cpu_pct_median"] / 100 for p in ok]
        msgs = [self.handled(p) for p in ok]
        self.cpu_fit = "per-N intercepts, message rate varied by heartbeat_ms"
        if any(len({p["h"] for p in ok if p["n"] == n}) > 1 for n in ns):
            c = lstsq([[1.0 if p["n"] == n else 0.0 for n in ns] + [x] for p, x in zip(ok, msgs)], y)
            self.intercepts, self.c_msg = dict(zip(ns, c[:-1])), c[-1]
        else:  # one heartbeat only: everything that grows with N counts as messages
            self.cpu_fit = "one heartbeat_ms: floor + messages across N (crowding not separated)"
            a0, self.c_msg = lstsq([[1, x] for x in msgs], y)
            self.intercepts = {n: a0 for n in ns}
        fewest = [p for p in ok if p["n"] == ns[0]]
        self.floor_run = {"n": ns[0], "runs": len(fewest), "cpu_pct": [idle(p)["cpu_pct_median"] for p in fewest],
                          "runnable": [idle(p).get("runnable_median") for p in fewest]}
        self.c_floor = statistics.median(idle(p)["cpu_pct_median"] / 100 - self.c_msg * self.handled(p) for p in fewest)
        # A daemon's CPU until formed, less its idle share over that time: its start,
        # its stripe's load (bytes), its joins (a peer each, both ways).
        y = [statistics.median(p["run"]["form"]["daemon_cpu_s_to_form"]) - self.u(p["n"], p["h"]) * p["run"]["form"]["form_s"]
             for p in ok]
        stripes = [p["dataset"] / p["n"] for p in ok]
        if len({round(x) for x in stripes}) > 2:
            self.c_start, self.c_byte, self.c_join = lstsq([[1, x / 2**20, p["n"] - 1] for p, x in zip(ok, stripes)], y)
            self.c_byte /= 2**20
        else:
            (self.c_start, self.c_join), self.c_byte = lstsq([[1, p["n"] - 1] for p in ok], y), 0.0
        # A join's CPU is small beside the rest of a start: when the fit cannot
        # resolve it (not above 0), the model takes its bound instead: all of a
        # daemon's CPU to form at the largest N, over its peers.
        big = max(ok, key=lambda p: p["n"])
        self.c_join_bound = min(statistics.median(p["run"]["form"]["daemon_cpu_s_to_form"]) / (p["n"] - 1)
                                for p in ok if p["n"] == big["n"])
        self.c_join_resolved = self.c_join > 0
        if not self.c_join_resolved:
            self.c_join = self.c_join_bound
        # Join bytes a peer: what a node sent until formed, less the heartbeats meanwhile.
        self.b_join = statistics.median(
            (statistics.median(p["run"]["form"]["tx_bytes_to_form"])
             - self.bytes_msg(p["h"])[0] * 2 * (p["n"] - 1) / p["h"] * p["run"]["form"]["form_s"]) / (p["n"] - 1)
            for p in ok)
        # The joins' cost in time on this host (their CPU and their waits for a core),
        # from how forming grows beyond the ticks: T - ticks = t0 + c N (N-1) / free
        # cores. The crowding term below uses it; separate hosts use the CPU cost.
        self.c_join_cpu = self.c_join
        self.c_join_time = None
        # Until a daemon listens no join to it succeeds (its mount and scan first).
        listen = [x for p in ok for x in p["run"]["form"].get("listening_s") or [] if x is not None]
        self.t_listen = statistics.median(listen) if listen else None
        fit = [p for p in ok if p["run"]["form"].get("listening_s")]
        if len({p["n"] for p in fit}) > 2:
            rows, ys = [], []
            for p in fit:
                free = self.cores - p["n"] * self.u(p["n"], p["h"])
                if free > 0:
                    rows.append([1.0, p["n"] * (p["n"] - 1) / free])
                    ys.append(p["run"]["form"]["all_up_from_last_start_s"] - self.ticks(p["h"], p["d"], p))
            t0, c = lstsq(rows, ys)
            if c > 0:
                self.c_join_time = c
        # Unresolved (as in the runs so far: forming is the ticks' time up to N = 48),
        # the crowding term is left out on this host rather than fed a bound.
        self.c_join = self.c_join_time or 0.0
        # What forming takes beyond the heartbeat ticks and the crowding term.
        self.t0 = statistics.median(p["run"]["form"]["all_up_from_last_start_s"] - self.ticks(p["h"], p["d"], p)
                                    - self.crowd(p["n"], p["h"]) for p in ok)
        self.t0_resident = statistics.median(p["run"]["form"]["form_from_last_start_s"] - self.ticks(p["h"], p["d"], p)
                                             - self.crowd(p["n"], p["h"]) for p in ok)
        # A silent peer: its monitor's tick finds it silent for more than d between
        # d - h and d + h after it stopped (when within the tick its last pong came);
        # e_stop: how far the measured medians lie from d.
        stops = [p for p in ok if p["run"].get("stop", {}).get("detect_s_median") is not None]
        self.e_stop = {h: statistics.median(p["run"]["stop"]["detect_s_median"] - p["d"] for p in stops if p["h"] == h)
                       for h in {p["h"] for p in stops}}
        rejoins = [p for p in ok if p["run"].get("kill", {}).get("rejoin", {}).get("ok")]
        self.r0 = statistics.median(p["run"]["kill"]["rejoin"]["resident_s"] - self.ticks(p["h"])
                                    - self.crowd_one(p["n"], p["h"]) for p in rejoins) if rejoins else None
        self.backend_ratio = statistics.median(p["run"]["form"]["backend_bytes"] / p["dataset"] for p in ok)

    def bytes_msg(self, h):
        """(sent, received, packets sent) a message at heartbeat h: that heartbeat's
        runs, else the nearest measured."""
        return self.b_msg[min(self.b_msg, key=lambda x: abs(x - h))]

    def handled(self, p):
        """Membership messages a daemon sent and received a second while idle: dlfsd's
        own counters when it has them; else the nominal 4 (N-1)/h, scaled by the bytes
        it really sent against its heartbeat's median (a crowded host delays heartbeats)."""
        m = idle(p).get("membership_per_s")
        if m and "sent.messages" in m:
            return m["sent.messages"] + m.get("received.messages", 0)
        same = [q for q in self.pts if q["h"] == p["h"] and q["run"]["form"]["formed"]]
        ref = statistics.median(idle(q)["tx_bytes_s_per_peer"] for q in same)
        return 4 * (p["n"] - 1) / p["h"] * min(1.0, idle(p)["tx_bytes_s_per_peer"] / ref)

    def u(self, n, h, k=None, alone=False):
        """Idle CPU share of a core of one daemon: on this host at N (its fitted
        intercept; N not measured: the nearest measured N's), or alone on its host."""
        msgs = 4 * ((n - 1) if k is None else min(k, n - 1)) / h
        if alone:
            return self.c_floor + self.c_msg * msgs
        near = min(self.intercepts, key=lambda m: (abs(m - n), -m))
        return self.intercepts[near] + self.c_msg * msgs

    def work(self, n, stripe=0.0):
        return self.c_start + self.c_byte * stripe + self.c_join * (n - 1)

    def ticks(self, h, d=None, p=None):
        """From a start to every peer up: the daemon listens (t_listen), its first
        heartbeat tick sends the hellos, the next one finishes the joins
        (cluster_peer.cc). A hello to a peer not listening yet is refused and
        retried after RECONNECT_S; one to a peer that listens but does not answer
        yet (a crowded host: measured at N = 32, 64) is given up after d (the
        join's timeout is down_after) and retried. With a run `p`: its measured
        listening times say which (a daemon's first tick is h after it listens)."""
        listen = self.t_listen or 0.0
        if p is None:
            return listen + (2 * h if h >= listen else RECONNECT_S + 2 * h)
        f = p["run"]["form"]
        ls = [x for x in f.get("listening_s") or [] if x is not None]
        if not ls:  # a run from before the bench recorded them
            return self.ticks(h)
        n = len(ls)
        # a daemon's listening moment since the first start (the starts were spread over started_s)
        at = [x + i * f["started_s"] / max(1, n - 1) for i, x in enumerate(ls)]
        first_tick = min(at) + h
        if first_tick >= max(at):
            return statistics.median(ls) + 2 * h
        late = max(at) - min(at)
        # refused until it listens (retried after RECONNECT_S), then dropped for a while:
        # the longer way bounds it
        return statistics.median(ls) + h + max(late, d if d is not None else p["d"]) + h

    def crowd(self, n, h):
        """Seconds every daemon's joins take on this host's cores, less what their
        idle CPU keeps busy (inf: it never forms)."""
        free = self.cores - n * self.u(n, h)
        return float("inf") if free <= 0 else n * self.c_join * (n - 1) / free

    def crowd_one(self, n, h):
        """The same for one daemon's joins while the others idle (a rejoin)."""
        free = self.cores - (n - 1) * self.u(n, h)
        return float("inf") if free <= 0 else self.c_join * (n - 1) / min(1.0, free)

    def constants(self):
        return {"bytes_msg_by_heartbeat_s": {str(h): {"sent": v[0], "received": v[1], "packets_sent": v[2]}
                                             for h, v in self.b_msg.items()},
                "payload_bytes_msg": self.payload, "c_msg_s": self.c_msg, "cpu_fit": self.cpu_fit,
                "cpu_intercepts_by_n": self.intercepts, "c_floor": self.c_floor, "floor_run": self.floor_run,
                "c_start_s": self.c_start, "c_byte_s": self.c_byte, "c_join_s": self.c_join_cpu,
                "c_join_time_s": self.c_join_time,
                "c_join_resolved": self.c_join_resolved, "c_join_bound_s": self.c_join_bound, "b_join": self.b_join,
                "t_listen_s": self.t_listen, "reconnect_s": RECONNECT_S, "t0_s": self.t0,
                "t0_resident_s": self.t0_resident, "e_stop_s_by_heartbeat": {str(h): v for h, v in self.e_stop.items()},
                "r0_s": self.r0, "backend_ratio": self.backend_ratio, "cores": self.cores}

    # ---- predictions on separate hosts ----------------------------------------

    def predict(self, n, h, d, k, link_bps, lat_s, dataset, backend_bps):
        """Both protocols at N nodes, one daemon a host (no crowding: the floor of a
        daemon alone, its joins on its own cores)."""
        # a node's joins on its own core: their CPU (the fit, or its bound), or their
        # time on this host when that is larger (it includes waits)
        joins = max(self.c_join_cpu, self.c_join_time or 0.0) * (n - 1)
        net = 4 * 2 * lat_s + (n - 1) * self.b_join * 8 / link_bps
        listen = self.t_listen or 0.0
        up = listen + 2 * h + self.t0 + joins + net
        # The last daemon to start: the others' hellos to it were refused (retried
        # after RECONNECT_S) or, while it listened but did not answer yet, given up
        # after d and retried; then finished at their next tick.
        up_last = listen + 2 * h + max(RECONNECT_S, d) + self.t0 + joins + net
        load = dataset / n * 8 / backend_bps
        sent_b, recv_b, _ = self.bytes_msg(h)
        e_stop = self.e_stop.get(h, statistics.median(self.e_stop.values()) if self.e_stop else 0.0)
        out = {}
        for proto, peers in (("all_to_all", n - 1), ("overlay", min(k, n - 1))):
            sent = 2 * peers / h
            cpu_msgs = 100 * self.c_msg * 4 * peers / h
            if proto == "all_to_all":  # the last of the N-1 monitors to notice
                silent = d - h + 2 * h * (n - 1) / n + e_stop
                silent_worst = d + h
            else:  # the first of the K monitors, then its N-1 notices, sent one after another
                notice = (n - 1) * self.c_msg + lat_s
                silent = d - h + 2 * h / (k + 1) + e_stop + notice
                silent_worst = d + h + notice
            out[proto] = {"up_s": up, "up_after_last_start_s": up_last, "resident_s": up + max(0.0, load - up) + h,
                          "idle_tx_bytes_s": sent * sent_b, "idle_rx_bytes_s": sent * recv_b,
                          "idle_link_share": sent * (sent_b + recv_b) * 8 / link_bps,
                          "idle_cpu_pct": 100 * self.c_floor + cpu_msgs, "idle_cpu_pct_messages": cpu_msgs,
                          # its connections break: every peer's next tick (phases independent: the last ~h)
                          "killed_seen_s": h * (n - 1) / n,
                          "silent_seen_s": silent, "silent_seen_worst_s": silent_worst,
                          "rejoin_s": (self.r0 or 0.0) + self.ticks(h) + joins + load,
                          "backend_bytes": self.backend_ratio * dataset,
                          "join_bytes_per_node": (n - 1) * self.b_join}
        return out


# ---- printing ------------------------------------------------------------------

def f(x, spec=".2f"):
    if x is None:
        return "-"
    if x == float("inf"):
        return "never"
    return format(x, spec)


def within(measured, bound, slack=0.1):
    """Whether a measured time keeps to the model's bound (with slack for polling)."""
    return "-" if measured is None else ("ok" if measured <= bound + slack else "OVER")


def pct(x):
    return "-" if x is None else f"{100 * x:+.0f}%"


def check(m, pts):
    print("\nMeasured against modelled, on this host (every daemon on its "
          f"{m.cores} cores; err = (model - measured) / measured):")
    print("   N    h |  up after last start s |   idle tx B/s a node  | idle CPU % (median) | killed seen, max s"
          " | stopped seen, med s | stopped seen, max s | rejoin s")
    print("          |   meas  model   err   |    meas   model  err  |  meas model   err   |  meas bound  "
          "     |  meas model   err   |  meas bound         | meas model  err")
    rows = []
    for p in pts:
        n, h, d, r = p["n"], p["h"], p["d"], p["run"]
        fm = r["form"]
        up_model = m.t0 + m.ticks(h, d, p) + m.crowd(n, h)
        cpu_model = 100 * (m.intercepts.get(n, m.u(n, h) - m.c_msg * 4 * (n - 1) / h) + m.c_msg * m.handled(p)) \
            if fm["formed"] else 100 * m.u(n, h)
        if not fm["formed"]:
            i = r.get("idle", {})
            print(f"{n:4d} {h:4.2f} | not formed within {fm['bound_s']:.0f} s: {fm.get('summary', '')}"[:200])
            print(f"          | model: up after {f(up_model, '.1f')} s; idle CPU {cpu_model:.1f}% x {n} daemons = "
                  f"{n * cpu_model / 100:.2f} of {m.cores} cores (measured meanwhile {f(i.get('cpu_pct_median'))}% "
                  f"median, {f(i.get('runnable_median'), '.0f')} tasks runnable); {n * (n - 1):,} ARP entries "
                  f"{'fit' if n * (n - 1) <= ARP_GC_THRESH3 else 'overflow'} the host's {ARP_GC_THRESH3:,}")
            rows.append({"n": n, "h": h, "formed": False, "up_model_s": up_model})
            continue
        i, k, st = r["idle"], r.get("kill", {}), r.get("stop", {})
        rj = k.get("rejoin", {})
        tx_model = 2 * (n - 1) / h * m.bytes_msg(h)[0]
        # On one host the daemons started together: their ticks are in phase, so
        # all see a death at about the same tick. The model's bounds: a killed node
        # by the next tick (h), a silent one between d - h and d + h.
        kill_model = h
        stop_med = d + m.e_stop.get(h, 0.0)
        stop_max = d + h
        rejoin_model = (m.r0 or 0) + m.ticks(h) + m.crowd_one(n, h)
        up = fm["all_up_from_last_start_s"]
        row = {"n": n, "h": h, "formed": True, "up_after_last_start_s": [up, up_model],
               "idle_tx_bytes_s": [i["tx_bytes_s"], tx_model], "idle_cpu_pct": [i["cpu_pct_median"], cpu_model],
               "killed_seen_max_s": [k.get("detect_s_max"), kill_model],
               "stopped_seen_median_s": [st.get("detect_s_median"), stop_med],
               "stopped_seen_max_s": [st.get("detect_s_max"), stop_max],
               "rejoin_s": [rj.get("resident_s"), rejoin_model]}
        rows.append(row)
        print(f"{n:4d} {h:4.2f} | {up:6.2f} {f(up_model):>6} {pct(rel(up_model, up)):>5}   "
              f"| {i['tx_bytes_s']:8,.0f} {tx_model:8,.0f} {pct(rel(tx_model, i['tx_bytes_s'])):>4} "
              f"| {i['cpu_pct_median']:5.2f} {cpu_model:5.2f} {pct(rel(cpu_model, i['cpu_pct_median'])):>5} "
              f"| {f(k.get('detect_s_max')):>5} {kill_model:5.2f} {within(k.get('detect_s_max'), kill_model):5} "
              f"| {f(st.get('detect_s_median')):>5} {stop_med:5.2f} {pct(rel(stop_med, st.get('detect_s_median'))):>5} "
              f"| {f(st.get('detect_s_max')):>5} {stop_max:5.2f} {within(st.get('detect_s_max'), stop_max):5}       "
              f"| {f(rj.get('resident_s')):>4} {f(rejoin_model):>5} {pct(rel(rejoin_model, rj.get('resident_s'))):>5}")
    return rows


ARP_GC_THRESH3 = 1024  # net.ipv4.neigh.default.gc_thresh3: learned ARP entries, one table for all namespaces


def one_host(m, sizes, h):
    """What bounds N on this host: the daemons' idle CPU against its cores, and the
    one ARP table all namespaces share (N (N-1) learned entries; the bench adds
    permanent ones, which that bound exempts; without them 64 nodes got exactly
    1,024 of their 4,032 links up)."""
    print(f"\nThis host ({m.cores} cores), heartbeat {h * 1000:.0f} ms:")
    out = {}
    for n in sizes:
        busy = n * m.u(n, h)
        arp = n * (n - 1)
        out[str(n)] = {"idle_cores": busy, "arp_entries": arp, "arp_fits": arp <= ARP_GC_THRESH3}
        print(f"  N = {n:3d}: idle daemons take {busy:4.2f} of {m.cores} cores; {arp:5,} ARP entries "
              + ("fit the table's 1,024" if arp <= ARP_GC_THRESH3 else "overflow the table's 1,024: ARP fails without "
                 "permanent entries (scale_bench.py adds them)"))
    return out


def predictions(m, a, h, d):
    out = {}
    print(f"\nPrediction on separate hosts: {a.link_gbps:g} Gb/s links, {a.latency_us:g} us one way, "
          f"dataset {a.dataset / (1 << 30):,.0f} GiB of {a.sample / 1024:,.0f} KiB samples, backend "
          f"{a.backend_gbps:g} Gb/s per node, heartbeat {h * 1000:.0f} ms, down after {d * 1000:.0f} ms, K = {a.k}")
    print("(a) = all-to-all heartbeats (today), (b) = ring overlay of K successors + down notices")
    lines = [("every peer up, all started at once (s)", "up_s", ".2f", None, None),
             ("every peer up after the last start, worst (s)", "up_after_last_start_s", ".2f", "up_s", "<="),
             ("every stripe resident (s)", "resident_s", ".2f", None, None),
             ("idle membership bytes/s sent per node", "idle_tx_bytes_s", ",.0f", None, None),
             ("idle membership bytes/s sent + received", "idle_tot", ",.0f", "idle_bytes_s", "<"),
             ("idle share of the link", "idle_link_share", ".2e", None, None),
             ("idle CPU % of a core: messages", "idle_cpu_pct_messages", ".3f", None, None),
             ("idle CPU % of a core: with today's floor", "idle_cpu_pct", ".2f", "idle_cpu_pct", "<"),
             ("killed node seen down by all (s)", "killed_seen_s", ".2f", "detect_s", "<="),
             ("silent node seen down by all, typical (s)", "silent_seen_s", ".2f", "detect_s", "<="),
             ("silent node seen down by all, worst (s)", "silent_seen_worst_s", ".2f", "detect_s", "<="),
             ("restarted node back, resident (s)", "rejoin_s", ".2f", None, None),
             ("join bytes sent per node (all peers)", "join_bytes_per_node", ",.0f", None, None),
             ("backend bytes / dataset", "backend_x", ".3f", None, None)]
    for n in a.nodes:
        p = m.predict(n, h, d, a.k, a.link_gbps * 1e9, a.latency_us * 1e-6, a.dataset, a.backend_gbps * 1e9)
        for proto in p.values():
            proto["idle_tot"] = proto["idle_tx_bytes_s"] + proto["idle_rx_bytes_s"]
            proto["backend_x"] = proto["backend_bytes"] / a.dataset
        out[str(n)] = p
        print(f"\n  N = {n:,}{'':34} {'(a) all-to-all':>16} {'(b) overlay':>16}   goal")
        for label, key, spec, goal, op in lines:
            va, vb = p["all_to_all"][key], p["overlay"][key]
            g = ""
            if goal:
                lim = GOALS[goal]
                ok = (lambda v: v <= lim) if op == "<=" else (lambda v: v < lim)
                g = f"{op} {lim:g}: (a) {'yes' if ok(va) else 'NO'}, (b) {'yes' if ok(vb) else 'NO'}"
            print(f"  {label:42} {format(va, spec):>16} {format(vb, spec):>16}   {g}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="scale_bench.py --json outputs")
    ap.add_argument("--nodes", default="256,1024")
    ap.add_argument("--link-gbps", type=float, default=100.0)
    ap.add_argument("--latency-us", type=float, default=2.0)
    ap.add_argument("--dataset", type=size_arg, default=1 << 40, help="dataset size (default 1T)")
    ap.add_argument("--sample", type=size_arg, default=110 << 10, help="sample size (reported; the read path is not modelled)")
    ap.add_argument("--backend-gbps", type=float, default=10.0, help="backend read rate of one node while loading")
    ap.add_argument("--k", type=int, default=3, help="overlay degree: ring successors each node pings")
    ap.add_argument("--heartbeat-ms", type=int, default=500, help="h of the prediction (dlfsd's default 500)")
    ap.add_argument("--down-after-ms", type=int, default=3000, help="d of the prediction (dlfsd's default 3000)")
    ap.add_argument("--json", help="write the constants, the check and the predictions here")
    a = ap.parse_args()
    a.nodes = [int(x) for x in a.nodes.split(",")]
    pts = load_points(a.results)
    m = Model(pts)
    c = m.constants()
    print("Fitted constants (per node; from " + ", ".join(a.results) + "):")
    for h, v in sorted(m.b_msg.items()):
        print(f"  heartbeat {h * 1000:.0f} ms: {v[0]:.0f} wire bytes sent a membership message, {v[1]:.0f} received, "
              f"{v[2]:.2f} packets sent (TCP/IP headers and ACKs included)")
    if c["payload_bytes_msg"]:
        print(f"  payload {c['payload_bytes_msg']:.0f} bytes a message (dlfsd's counters)")
    fr = c["floor_run"]
    print(f"  idle CPU: {1e6 * c['c_msg_s']:.1f} us a message handled ({c['cpu_fit']}); a daemon with a core to "
          f"itself, no message: {100 * c['c_floor']:.2f}% of a core (median of the {fr['runs']} runs of N = {fr['n']}: "
          + ", ".join(f"{x:.2f}%" for x in fr["cpu_pct"]) + " measured, "
          + ", ".join(f(x, ".0f") for x in fr["runnable"]) + " tasks runnable)")
    print("  idle CPU less messages at N on this host (crowding): "
          + ", ".join(f"{n}: {100 * v:.2f}%" for n, v in sorted(c["cpu_intercepts_by_n"].items())))
    join = (f"joins {1e3 * c['c_join_s']:.2f} ms a peer (both ways)" if c["c_join_resolved"] else
            f"joins not resolved by the fit: taken at their bound, {1e3 * c['c_join_s']:.2f} ms a peer (all of a "
            "daemon's CPU to form at the largest N, over its peers)")
    print(f"  forming, a daemon's CPU: start {c['c_start_s']:.3f} s, load {1e3 * c['c_byte_s'] * 2**20:.1f} ms a MiB "
          f"of stripe, {join}; {c['b_join']:,.0f} bytes sent a peer joined")
    print("  a join's time on this host (CPU and waits for a core, from how forming grows with N(N-1)/free cores): "
          + (f"{1e3 * c['c_join_time_s']:.2f} ms" if c["c_join_time_s"] else "not resolved"))
    print(f"  listening {f(c['t_listen_s'], '.3f')} s after start, then up after 2 ticks (+ {c['reconnect_s']:.0f} s "
          f"when the first tick came before the peers listened), + {c['t0_s']:.2f} s; a silent node seen "
          + ", ".join(f"{float(h) * 1000:.0f} ms: d {v:+.2f} s" for h, v in c["e_stop_s_by_heartbeat"].items())
          + f" (median); rejoin: the ticks + {f(c['r0_s'])} s + joins; backend {c['backend_ratio']:.3f}x the dataset")
    rows = check(m, pts)
    h, d = a.heartbeat_ms / 1000, a.down_after_ms / 1000
    host = one_host(m, sorted({p["n"] for p in pts} | {48, 64}), h)
    pred = predictions(m, a, h, d)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"constants": c, "check": rows, "this_host": host, "predictions": pred, "args": {k: v for k, v in vars(a).items()}},
                      fh, indent=1)


if __name__ == "__main__":
    main()
