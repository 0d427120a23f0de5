#!/usr/bin/env python3
"""A model of DLFS's cluster costs as functions of N, fitted to scale_bench.py's
measurements and checked against them (docs/scale.md).

  scale_model.py RESULTS.json [MORE.json ...] [--nodes 256,1024] [--link-gbps 100]
                 [--latency-us 2] [--dataset 1T] [--sample 110K] [--backend-gbps 10]
                 [--k 3] [--heartbeat-ms 500] [--down-after-ms 2000]
                 [--polling FILE ...] [--c-msg-from auto|event|polling] [--json out.json]

RESULTS.json are tools/bench/scale_bench.py --json outputs. Every measured run is
modelled with its own settings: heartbeat h, down_after d and watch_peers K from
its file's params (files from before watch_peers: K = 0, every peer). A node
pings K_eff peers: N-1 when K is 0 or K >= N-1, else K. The script prints the
fitted constants; measured against modelled for every run with the relative
error; and the prediction for --nodes on separate machines (one daemon a node,
--link-gbps links of --latency-us one way) for two protocols side by side,
against the goals at 1,024 nodes. Both are today's dlfsd, with its down notices:

  (a) all-to-all (watch_peers = 0): every node pings every peer every h
  (b) overlay (watch_peers = K): each node pings its K ring successors
      (r+1..r+K mod N) every h (and any peer still loading)
  In both the pong carries residency and byte counters; a watcher that finds a
  peer silent for d marks it down and sends a sealed "down" notice to every
  other member that is up (N-2 messages, once per failure); joins are
  all-to-all (hello, challenge, proof, welcome).

Two dlfsd binaries are told apart, since their idle CPU differs:
  event    the UCX progress thread sleeps on UCX's event fd (commit 403ece1 on):
           these runs give the floor c_floor and, when present, every constant
  polling  before: the progress thread polled (a floor of 2-8% of a core); such
           runs enter only the c_msg fit (when the event runs do not resolve it,
           or --c-msg-from polling), and are checked with their own per-N floors
A file's kind: its params' git commit (the checkout scale_bench.py ran from)
descends from 403ece1 or not, when this repository knows that commit; else
`event` when its params have watch_peers and its idle runs dlfsd's membership
counters, `polling` otherwise. --polling FILE forces `polling` (a run of an old
build directory from a newer checkout).

What is modelled (per node; h, d, K_eff from the run, or the prediction's):
  idle messages /s   handled (sent + received) 4 K_eff / h; measured: dlfsd's
                     membership counters when the run has them (exact), else
                     the nominal rate scaled by the eth0 bytes sent
  idle bytes /s      sent: 2 K_eff / h x B_msg (wire bytes a message, TCP/IP
                     and its ACK's share, fitted per h from eth0 bytes against
                     the counted messages) + b_peer x (N-1) (what a connected
                     peer costs with no message, when overlay and all-to-all
                     runs separate it); received the same
  idle CPU           c_floor + c_msg x messages/s + c_peer x (N-1); c_msg from
                     runs that differ only in message rate at one N (overlay
                     against all-to-all, other heartbeat_ms), c_peer from how
                     the rest grows with N at the heartbeat with the most sizes
                     measured, c_floor: the fewest daemons' runs there less
                     those (event runs only)
  joins              per node W(N) = c_start + c_join x (N-1) CPU seconds to form
                     (c_join: one peer joined both ways), b_join wire bytes a peer
  forming, one host  T = t_fix + N W(N) / (cores - N u(N)), u = idle CPU share;
                     never when d <= h (dlfsd refuses to start since 31bab8d;
                     before, a join was given up after d ahead of its last step,
                     which runs at the next tick, h later)
  forming, N hosts   T = t_fix + W(N) + 4 RTT + (N-1) b_join / link  (all up),
                     + the stripe's load D/N / backend rate  (all resident)
  killed node        its connections break: seen at every member's next tick,
                     within h
  silent node        a watcher finds it silent between d - h and d + h after it
                     stopped (when within its tick the last pong came; + e_stop,
                     fitted); the first of its K_eff watchers (d - h + 2h/(K_eff+1)
                     on average with independent phases, at worst d + h) sends
                     N-2 notices, (N-1) c_msg + one latency; every member knows
                     then. Runs without notices (older dlfsd): each of the N-1
                     watchers on its own, the last d - h + 2h (N-1)/N
  rejoin, N hosts    t_fix_rejoin + W(N) + D/N / backend rate
  backend bytes      the measured ratio x D (each node loads its stripe once)
Only the standard library.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
GOALS = {"up_s": 10.0, "idle_bytes_s": 1e6, "idle_cpu_pct": 1.0, "detect_s": 3.0}
# transport/fabric_ucx: the progress thread sleeps on UCX's event fd instead of polling
EVENT_COMMIT = "403ece1a54cb3df46302f5664e254984c4e3be5d"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def size_arg(text):
    t = text.upper().removesuffix("IB").removesuffix("B")
    return int(float(t[:-1]) * UNITS[t[-1]]) if t[-1] in UNITS else int(t)


def lstsq(rows, ys, weights=None):
    """Least squares coefficients of ys ~ rows (each row: the regressors), by the
    normal equations (few regressors, well-scaled enough here); weights scale
    each row's residual."""
    if weights:
        rows = [[x * w for x in r] for r, w in zip(rows, weights)]
        ys = [y * w for y, w in zip(ys, weights)]
    k = len(rows[0])
    a = [[sum(r[i] * r[j] for r in rows) for j in range(k)] for i in range(k)]
    b = [sum(r[i] * y for r, y in zip(rows, ys)) for i in range(k)]
    scale = max(abs(a[i][i]) for i in range(k)) or 1.0
    for c in range(k):  # Gauss-Jordan with partial pivoting
        p = max(range(c, k), key=lambda i: abs(a[i][c]))
        a[c], a[p], b[c], b[p] = a[p], a[c], b[p], b[c]
        if abs(a[c][c]) < 1e-12 * scale:
            raise ValueError("regressors are collinear: more distinct runs needed")
        for i in range(k):
            if i != c:
                f = a[i][c] / a[c][c]
                a[i] = [x - f * y for x, y in zip(a[i], a[c])]
                b[i] -= f * b[c]
    return [b[i] / a[i][i] for i in range(k)]


def rel(model, measured):
    return None if not measured else (model - measured) / measured


def k_eff(n, k):
    """Peers a node pings when idle: every one for watch_peers 0 or >= N-1."""
    return n - 1 if k == 0 or k >= n - 1 else k


# ---- the measurements ----------------------------------------------------------

def progress_kind(params, counters, forced=None):
    """'event' (the progress thread sleeps on UCX's event fd) or 'polling': by the
    git commit scale_bench.py ran from when this repository knows it, else by what
    only the newer bench and dlfsd record (watch_peers, membership counters)."""
    if forced:
        return forced
    g = params.get("git")
    if g:
        try:
            known = subprocess.run(["git", "-C", REPO, "cat-file", "-e", g + "^{commit}"], capture_output=True)
            base = subprocess.run(["git", "-C", REPO, "cat-file", "-e", EVENT_COMMIT + "^{commit}"], capture_output=True)
            if known.returncode == 0 and base.returncode == 0:
                r = subprocess.run(["git", "-C", REPO, "merge-base", "--is-ancestor", EVENT_COMMIT, g], capture_output=True)
                if r.returncode in (0, 1):
                    return "event" if r.returncode == 0 else "polling"
        except OSError:
            pass
    return "event" if "watch_peers" in params and counters else "polling"


def load_points(paths, polling=()):
    """One dict a measured N (formed or not), from every results file."""
    pts = []
    for p in paths:
        with open(p) as f:
            r = json.load(f)
        prm = r["params"]
        k = prm.get("watch_peers") or 0  # absent: a file from before the overlay, every peer
        counters = any((run.get("idle") or {}).get("membership_per_s") for run in r["runs"].values())
        kind = progress_kind(prm, counters, "polling" if p in polling else None)
        for n, run in r["runs"].items():
            n = int(n)
            pts.append({"n": n, "h": prm["heartbeat_ms"] / 1000, "d": prm["down_after_ms"] / 1000,
                        "k": k, "k_eff": k_eff(n, k), "kind": kind,
                        # down notices came with watch_peers and the counters (protocol v4)
                        "notices": "watch_peers" in prm or counters,
                        "cores": prm["cores"], "run": run, "file": p, "git": prm.get("git"),
                        # per run since --files-per-node; before, one for the file
                        "dataset": run["dataset"]["bytes"] if "dataset" in run else prm["dataset_bytes"]})
    return sorted(pts, key=lambda q: (q["kind"] != "event", q["k"] == 0, q["h"], q["n"]))


def formed(pts):
    return [p for p in pts if p["run"]["form"]["formed"]]


def idle(p):
    return p["run"]["idle"]


def counted(p, key):
    """A membership counter's rate a second (median node) when dlfsd reported them."""
    m = idle(p).get("membership_per_s")
    return m.get(key) if m else None


def proto_label(p):
    return f"K={p['k']}" if p["k"] else "all"


# ---- the fit -------------------------------------------------------------------

RECONNECT_S = 1.0  # ClusterOptions::reconnect (transport/cluster.h): a failed join is retried after this


class Model:
    def __init__(self, pts, c_msg_from="auto"):
        self.pts = pts
        ok = formed(pts)
        if len(ok) < 2:
            sys.exit("scale_model.py: fewer than two formed runs to fit")
        event = [p for p in ok if p["kind"] == "event"]
        # Every constant from the event runs when there are any: they are today's dlfsd.
        self.kind = "event" if len(event) >= 2 else "polling"
        fit = event if self.kind == "event" else ok
        self.fit_files = sorted({p["file"] for p in fit})
        self.cores = fit[0]["cores"]
        self.ref_tx = {}
        for p in ok:  # eth0 bytes sent a watched peer, by heartbeat and binary: handled()'s scale
            self.ref_tx.setdefault((p["h"], p["kind"]), []).append(idle(p)["tx_bytes_s"] / p["k_eff"])
        self.ref_tx = {key: statistics.median(v) for key, v in self.ref_tx.items()}
        self.fit_bytes(fit)
        # Payload bytes a message, when dlfsd counts them (status' membership object).
        self.payload = {}
        for kind in ("ping", "pong"):
            xs = [counted(p, f"sent.by_kind.{kind}.bytes") / counted(p, f"sent.by_kind.{kind}.messages")
                  for p in fit if counted(p, f"sent.by_kind.{kind}.messages")]
            if xs:
                self.payload[kind] = statistics.median(xs)
        xs = [counted(p, "sent.bytes") / counted(p, "sent.messages") for p in fit if counted(p, "sent.messages")]
        self.payload["all"] = statistics.median(xs) if xs else None
        self.fit_cpu(ok, c_msg_from)
        # A daemon's CPU until formed, less its idle share over that time: its start,
        # its stripe's load (bytes), its joins (a peer each, both ways).
        y = [statistics.median(p["run"]["form"]["daemon_cpu_s_to_form"]) - self.u_run(p) * p["run"]["form"]["form_s"]
             for p in fit]
        stripes = [p["dataset"] / p["n"] for p in fit]
        self.c_start, self.c_byte, self.c_join = 0.0, 0.0, 0.0
        try:
            if max(stripes) > 1.5 * min(stripes):  # stripes of other sizes (not --files-per-node)
                self.c_start, self.c_byte, self.c_join = lstsq([[1, x / 2**20, p["n"] - 1] for p, x in zip(fit, stripes)], y)
                self.c_byte /= 2**20
            else:
                self.c_start, self.c_join = lstsq([[1, p["n"] - 1] for p in fit], y)
        except ValueError:
            pass
        # A join's CPU is small beside the rest of a start: when the fit cannot
        # resolve it (not above 0), the model takes its bound instead: all of a
        # daemon's CPU to form at the largest N, over its peers.
        big = max(fit, key=lambda p: p["n"])
        self.c_join_bound = min(statistics.median(p["run"]["form"]["daemon_cpu_s_to_form"]) / (p["n"] - 1)
                                for p in fit if p["n"] == big["n"])
        self.c_join_resolved = self.c_join > 0
        if not self.c_join_resolved:
            self.c_join = self.c_join_bound
        # Join bytes a peer: what a node sent until formed, less the heartbeats
        # meanwhile (every peer is pinged while it loads: 2 (N-1)/h messages a second).
        self.b_join = statistics.median(
            (statistics.median(p["run"]["form"]["tx_bytes_to_form"])
             - self.bytes_msg(p["h"])[0] * 2 * (p["n"] - 1) / p["h"] * p["run"]["form"]["form_s"]) / (p["n"] - 1)
            for p in fit)
        # The joins' cost in time on this host (their CPU and their waits for a core),
        # from how forming grows beyond the ticks: T - ticks = t0 + c N (N-1) / free
        # cores. The crowding term below uses it; separate hosts use the CPU cost.
        self.c_join_cpu = self.c_join
        self.c_join_time = None
        # Until a daemon listens no join to it succeeds (its mount and scan first).
        listen = [x for p in fit for x in p["run"]["form"].get("listening_s") or [] if x is not None]
        self.t_listen = statistics.median(listen) if listen else None
        withl = [p for p in fit if p["run"]["form"].get("listening_s")]
        if len({p["n"] for p in withl}) > 2:
            rows, ys = [], []
            for p in withl:
                free = self.cores - p["n"] * self.u_run(p)
                if free > 0:
                    rows.append([1.0, p["n"] * (p["n"] - 1) / free])
                    ys.append(p["run"]["form"]["all_up_from_last_start_s"] - self.ticks(p["h"], p["d"], p))
            try:
                t0, c = lstsq(rows, ys)
                if c > 0:
                    self.c_join_time = c
            except ValueError:
                pass
        # Unresolved, the crowding term is left out on this host rather than fed a bound.
        self.c_join = self.c_join_time or 0.0
        # What forming takes beyond the heartbeat ticks and the crowding term.
        self.t0 = statistics.median(p["run"]["form"]["all_up_from_last_start_s"] - self.ticks(p["h"], p["d"], p)
                                    - self.crowd_run(p) for p in fit)
        self.t0_resident = statistics.median(p["run"]["form"]["form_from_last_start_s"] - self.ticks(p["h"], p["d"], p)
                                             - self.crowd_run(p) for p in fit)
        # A silent peer: e_stop is how far the measured medians lie from the
        # nominal ones (per heartbeat): the tick grid against d, the host's delays.
        stops = [p for p in fit if p["run"].get("stop", {}).get("detect_s_median") is not None]
        self.e_stop = {}
        for h in sorted({p["h"] for p in stops}):
            self.e_stop[h] = statistics.median(p["run"]["stop"]["detect_s_median"] - self.stop_nominal(p)["median"]
                                               for p in stops if p["h"] == h)
        rejoins = [p for p in fit if p["run"].get("kill", {}).get("rejoin", {}).get("ok")]
        self.r0 = statistics.median(p["run"]["kill"]["rejoin"]["resident_s"] - self.ticks(p["h"])
                                    - self.crowd_one_run(p) for p in rejoins) if rejoins else None
        self.backend_ratio = statistics.median(p["run"]["form"]["backend_bytes"] / p["dataset"] for p in fit)

    # ---- idle traffic ---------------------------------------------------------

    def msgs(self, p, way):
        """Membership messages a node sent ("sent") or received a second idle:
        dlfsd's counters when the run has them, else the nominal 2 K_eff / h."""
        c = counted(p, f"{way}.messages")
        return c if c is not None else 2 * p["k_eff"] / p["h"]

    def fit_bytes(self, fit):
        """Wire bytes a message by heartbeat (more messages a second share TCP ACKs:
        fewer bytes each), and what a connected peer costs a second with no message
        (b_peer): both from eth0 against the messages, weighted by relative error.
        b_peer is resolved only where, at one heartbeat, messages are not
        proportional to N-1 (overlay runs beside all-to-all ones)."""
        hs = sorted({p["h"] for p in fit})
        self.b_msg, self.b_peer, self.b_peer_resolved = {}, {"sent": 0.0, "received": 0.0}, False
        sep = any(len({p["k_eff"] / (p["n"] - 1) for p in fit if p["h"] == h}) > 1 for h in hs)
        per = {}
        for way, key in (("sent", "tx_bytes_s"), ("received", "rx_bytes_s")):
            ys = [idle(p)[key] for p in fit]
            coef = None
            if sep:
                try:
                    rows = [[self.msgs(p, way) if p["h"] == h else 0.0 for h in hs] + [p["n"] - 1] for p in fit]
                    coef = lstsq(rows, ys, [1 / y for y in ys])
                except ValueError:
                    coef = None
            if coef and coef[-1] > 0 and all(c > 0 for c in coef[:-1]):
                per[way] = dict(zip(hs, coef[:-1]))
                self.b_peer[way] = coef[-1]
                self.b_peer_resolved = True
            else:
                per[way] = {h: statistics.median(idle(p)[key] / self.msgs(p, way) for p in fit if p["h"] == h)
                            for h in hs}
        if not self.b_peer_resolved:  # one way resolved and not the other: neither
            self.b_peer = {"sent": 0.0, "received": 0.0}
            for way, key in (("sent", "tx_bytes_s"), ("received", "rx_bytes_s")):
                per[way] = {h: statistics.median(idle(p)[key] / self.msgs(p, way) for p in fit if p["h"] == h)
                            for h in hs}
        pk = {h: statistics.median(idle(p)["tx_packets_s"] / self.msgs(p, "sent") for p in fit if p["h"] == h) for h in hs}
        self.b_msg = {h: (per["sent"][h], per["received"][h], pk[h]) for h in hs}

    def bytes_msg(self, h):
        """(sent, received, packets sent) a message at heartbeat h: that heartbeat's
        runs, else the nearest measured."""
        return self.b_msg[min(self.b_msg, key=lambda x: abs(x - h))]

    def tx_model(self, n, h, k):
        return 2 * k_eff(n, k) / h * self.bytes_msg(h)[0] + self.b_peer["sent"] * (n - 1)

    def rx_model(self, n, h, k):
        return 2 * k_eff(n, k) / h * self.bytes_msg(h)[1] + self.b_peer["received"] * (n - 1)

    def handled(self, p):
        """Membership messages a daemon sent and received a second while idle: dlfsd's
        own counters when it has them; else the nominal 4 K_eff/h, scaled by the bytes
        it really sent against its heartbeat's median (a crowded host delays heartbeats)."""
        s, r = counted(p, "sent.messages"), counted(p, "received.messages")
        if s is not None:
            return s + (r or 0)
        ref = self.ref_tx[(p["h"], p["kind"])]
        return 4 * p["k_eff"] / p["h"] * min(1.0, idle(p)["tx_bytes_s"] / p["k_eff"] / ref)

    # ---- idle CPU -------------------------------------------------------------

    def per_n_fit(self, runs):
        """(c_msg, {N: intercept}) from runs where some N has more than one message
        rate (each N its own intercept: what crowding or connections cost there), or
        None."""
        ns = sorted({p["n"] for p in runs})
        if not any(len({round(self.handled(p)) for p in runs if p["n"] == n}) > 1 for n in ns):
            return None
        try:
            c = lstsq([[1.0 if p["n"] == n else 0.0 for n in ns] + [self.handled(p)] for p in runs],
                      [idle(p)["cpu_pct_median"] / 100 for p in runs])
        except ValueError:
            return None
        return c[-1], dict(zip(ns, c[:-1]))

    def fit_cpu(self, ok, c_msg_from):
        """Idle CPU a daemon, per binary. A message's cost is what CPU grows by with
        the message rate at one N (overlay against all-to-all, other heartbeat_ms):
        each N gets its own intercept. For the event binary what is left grows with
        N by c_peer (connections kept, or this host's crowding: an upper bound) from
        c_floor; the polling binary keeps its intercepts (its polling thread got less
        of the cores the more daemons crowded them)."""
        self.cpu_kind, self.floor_h = {}, None
        for kind in ("event", "polling"):
            runs = [p for p in ok if p["kind"] == kind]
            if runs:
                self.cpu_kind[kind] = {"runs": runs, "fit": self.per_n_fit(runs)}
        ev, po = self.cpu_kind.get("event"), self.cpu_kind.get("polling")
        own = self.cpu_kind.get(self.kind)
        # c_msg: the event runs' own when they resolve it (and it is above 0)
        choice = c_msg_from
        if choice == "auto":
            choice = "event" if ev and ev["fit"] and ev["fit"][0] > 0 else "polling" if po and po["fit"] else self.kind
        src = self.cpu_kind.get(choice)
        if src and src["fit"]:
            self.c_msg = src["fit"][0]
            self.cpu_fit = (f"from the {choice} runs (" + ", ".join(sorted({p['file'] for p in src['runs']})) +
                            "): per-N intercepts, message rate varied at one N")
        else:  # nothing varies the rate at one N: everything that grows with N counts as messages
            runs = own["runs"]
            a0, self.c_msg = lstsq([[1, self.handled(p)] for p in runs], [idle(p)["cpu_pct_median"] / 100 for p in runs])
            self.cpu_fit = f"one message rate a N ({self.kind} runs): floor + messages across N (crowding not separated)"
            choice = None
        self.c_msg_from = choice
        # What a daemon spends at N less its messages, with that c_msg. For the event
        # binary from the heartbeat with the most sizes measured (its heartbeat
        # thread's ticks cost too: other heartbeats have other floors), and there
        # from the runs with the fewest messages at that N (the overlay's when there
        # are: the least extrapolated, and the least crowded host); for the polling
        # binary from all (crowding lowered its floor).
        for kind, v in self.cpu_kind.items():
            runs = v["runs"]
            if kind == "event":
                hs = {p["h"] for p in runs}
                self.floor_h = max(sorted(hs), key=lambda h: len({p["n"] for p in runs if p["h"] == h}))
                runs = [p for p in runs if p["h"] == self.floor_h]
            ns = sorted({p["n"] for p in runs})
            v["intercepts"] = {}
            for n in ns:
                at = [p for p in runs if p["n"] == n]
                if kind == "event":
                    least = min(self.handled(p) for p in at)
                    at = [p for p in at if self.handled(p) <= 1.5 * least]
                v["intercepts"][n] = statistics.median(idle(p)["cpu_pct_median"] / 100 - self.c_msg * self.handled(p)
                                                       for p in at)
        ic = own["intercepts"]
        self.c_peer = 0.0
        if self.kind == "event" and len(ic) > 2:
            try:
                _a0, cp = lstsq([[1.0, n - 1] for n in ic], list(ic.values()))
                self.c_peer = max(0.0, cp)
            except ValueError:
                pass
        fewest = min(ic)
        runs = [p for p in own["runs"] if p["n"] == fewest and (self.kind != "event" or p["h"] == self.floor_h)]
        if self.kind != "event":
            self.floor_h = None
        self.floor_run = {"n": fewest, "runs": len(runs), "cpu_pct": [idle(p)["cpu_pct_median"] for p in runs],
                          "runnable": [idle(p).get("runnable_median") for p in runs]}
        self.c_floor = statistics.median(idle(p)["cpu_pct_median"] / 100 - self.c_msg * self.handled(p)
                                         - self.c_peer * (p["n"] - 1) for p in runs)
        self.intercepts = ic

    def u(self, n, h, k, kind=None, alone=False):
        """Idle CPU share of a core of one daemon at N, pinging k_eff(N, k) peers:
        alone on its host (c_floor + c_peer (N-1)), or on this host (the event
        binary: the same; the polling one: the nearest measured N's intercept)."""
        kind = kind or self.kind
        msgs = self.c_msg * 4 * k_eff(n, k) / h
        if alone or kind == "event" or kind not in self.cpu_kind:
            return self.c_floor + self.c_peer * (n - 1) + msgs
        ic = self.cpu_kind[kind]["intercepts"]
        return ic[min(ic, key=lambda m: (abs(m - n), -m))] + msgs

    def u_run(self, p):
        return self.u(p["n"], p["h"], p["k"], p["kind"])

    def cpu_model_run(self, p):
        """A measured run's idle CPU % as modelled: its binary's floor (event) or
        intercept at its N (polling), + c_msg x the messages it handled."""
        if p["kind"] == "event" or p["kind"] not in self.cpu_kind:
            base = self.c_floor + self.c_peer * (p["n"] - 1)
        else:
            ic = self.cpu_kind[p["kind"]]["intercepts"]
            base = ic.get(p["n"], ic[min(ic, key=lambda m: abs(m - p["n"]))])
        msgs = self.handled(p) if p["run"]["form"]["formed"] else 4 * p["k_eff"] / p["h"]
        return 100 * (base + self.c_msg * msgs)

    # ---- forming ---------------------------------------------------------------

    def work(self, n, stripe=0.0):
        return self.c_start + self.c_byte * stripe + self.c_join * (n - 1)

    def ticks(self, h, d=None, p=None):
        """From a start to every peer up: the daemon listens (t_listen), its first
        heartbeat tick sends the hellos, the next one finishes the joins
        (cluster_peer.cc). A hello to a peer not listening yet is refused and
        retried after RECONNECT_S; one to a peer that listens but does not answer
        yet (a crowded host) is given up after d (the join's timeout is
        down_after) and retried. With a run `p`: its measured listening times say
        which (a daemon's first tick is h after it listens)."""
        listen = self.t_listen or 0.0
        dd = d if d is not None else p["d"] if p is not None else None
        if dd is not None and dd <= h:
            # dlfsd refuses it since 31bab8d; before, a join was given up after d
            # ahead of its last step, which runs at the next tick: no peer joined
            return float("inf")
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

    def crowd(self, n, h, k, kind=None):
        """Seconds every daemon's joins take on this host's cores, less what their
        idle CPU keeps busy (inf: it never forms)."""
        free = self.cores - n * self.u(n, h, k, kind)
        return float("inf") if free <= 0 else n * self.c_join * (n - 1) / free

    def crowd_run(self, p):
        return self.crowd(p["n"], p["h"], p["k"], p["kind"])

    def crowd_one(self, n, h, k, kind=None):
        """The same for one daemon's joins while the others idle (a rejoin)."""
        free = self.cores - (n - 1) * self.u(n, h, k, kind)
        return float("inf") if free <= 0 else self.c_join * (n - 1) / min(1.0, free)

    def crowd_one_run(self, p):
        return self.crowd_one(p["n"], p["h"], p["k"], p["kind"])

    # ---- a silent node -----------------------------------------------------------

    def notice_s(self, n, lat_s=0.0):
        """The first watcher's notices, sent one after another, and their way."""
        return (n - 1) * self.c_msg + lat_s

    def stop_nominal(self, p=None, n=None, h=None, d=None, k=None, notices=True, lat_s=0.0):
        """Seconds from a node's stop until the other nodes show it down, less
        e_stop: median and max over them, and the worst case. A watcher's tick
        finds it silent between d - h and d + h after (as its last pong came
        within the tick), evenly with independent phases."""
        if p is not None:
            n, h, d, k, notices = p["n"], p["h"], p["d"], p["k"], p["notices"]
        ke = k_eff(n, k)
        if not notices:  # each watcher on its own (dlfsd before the notices): all N-1
            return {"median": d, "max": d - h + 2 * h * (n - 1) / n, "worst": d + h}
        first = d - h + 2 * h / (ke + 1) + self.notice_s(n, lat_s)
        return {"median": first, "max": first, "worst": d + h + self.notice_s(n, lat_s)}

    def e_stop_at(self, h):
        if not self.e_stop:
            return 0.0
        return self.e_stop[min(self.e_stop, key=lambda x: abs(x - h))]

    def constants(self):
        return {"kind": self.kind, "fit_files": self.fit_files,
                "bytes_msg_by_heartbeat_s": {str(h): {"sent": v[0], "received": v[1], "packets_sent": v[2]}
                                             for h, v in self.b_msg.items()},
                "b_peer_bytes_s": self.b_peer, "b_peer_resolved": self.b_peer_resolved,
                "payload_bytes_msg": self.payload, "c_msg_s": self.c_msg, "c_msg_from": self.c_msg_from,
                "cpu_fit": self.cpu_fit, "c_peer": self.c_peer,
                "cpu_intercepts_by_kind_n": {k: {str(n): x for n, x in v["intercepts"].items()}
                                             for k, v in self.cpu_kind.items()},
                "c_msg_by_kind_s": {k: (v["fit"][0] if v["fit"] else None) for k, v in self.cpu_kind.items()},
                "c_floor": self.c_floor, "floor_run": self.floor_run, "floor_heartbeat_s": self.floor_h,
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
        if d <= h:  # dlfsd refuses such a config (ticks())
            up = up_last = float("inf")
        load = dataset / n * 8 / backend_bps
        e_stop = self.e_stop_at(h)
        out = {}
        for proto, watch in (("all_to_all", 0), ("overlay", k)):
            ke = k_eff(n, watch)
            msgs = 4 * ke / h
            cpu_msgs = 100 * self.c_msg * msgs
            cpu_peers = 100 * self.c_peer * (n - 1)
            stop = self.stop_nominal(n=n, h=h, d=d, k=watch, notices=True, lat_s=lat_s)
            tx, rx = self.tx_model(n, h, watch), self.rx_model(n, h, watch)
            out[proto] = {"watched": ke, "messages_s": msgs, "up_s": up, "up_after_last_start_s": up_last,
                          "resident_s": up + max(0.0, load - up) + h,
                          "idle_tx_bytes_s": tx, "idle_rx_bytes_s": rx,
                          "idle_link_share": (tx + rx) * 8 / link_bps,
                          "idle_cpu_pct": 100 * self.c_floor + cpu_peers + cpu_msgs,
                          "idle_cpu_pct_messages": cpu_msgs, "idle_cpu_pct_peers": cpu_peers,
                          # its connections break: every peer's next tick (phases independent: the last ~h)
                          "killed_seen_s": h * (n - 1) / n,
                          "silent_seen_s": stop["median"] + e_stop, "silent_seen_worst_s": stop["worst"],
                          "rejoin_s": (self.r0 or 0.0) + self.ticks(h, d) + joins + load,
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
          f"{m.cores} cores; err = (model - measured) / measured; K: watch_peers, all = every peer; "
          "bin: ev = event-driven progress, poll = polling):")
    print("   N    h   K   bin |  up after last start  |  idle tx B/s a node   | msgs/s  | idle CPU % (median) |"
          " killed seen, max s | stopped seen, med s | stopped seen, max s | rejoin s")
    print("                    |   meas  model   err   |    meas   model  err  | handled |  meas model   err   |"
          "  meas bound        |  meas model   err   |  meas bound         | meas model  err")
    rows = []
    for p in pts:
        n, h, d, r = p["n"], p["h"], p["d"], p["run"]
        fm = r["form"]
        label = f"{n:4d} {h:4.2f} {proto_label(p):>4} {'ev' if p['kind'] == 'event' else 'poll':>4}"
        up_model = m.t0 + m.ticks(h, d, p) + m.crowd_run(p)
        cpu_model = m.cpu_model_run(p)
        if not fm["formed"]:
            i = r.get("idle", {})
            print(f"{label} | not formed within {fm['bound_s']:.0f} s: {fm.get('summary', '')}"[:220])
            print(f"                    | model: up {'never' if up_model == float('inf') else f'after {up_model:.1f} s'}; idle CPU {cpu_model:.2f}% x {n} daemons = "
                  f"{n * cpu_model / 100:.2f} of {m.cores} cores (measured meanwhile {f(i.get('cpu_pct_median'))}% "
                  f"median, {f(i.get('runnable_median'), '.0f')} tasks runnable); {n * (n - 1):,} ARP entries "
                  f"{'fit' if n * (n - 1) <= ARP_GC_THRESH3 else 'overflow'} the host's {ARP_GC_THRESH3:,}")
            rows.append({"n": n, "h": h, "k": p["k"], "kind": p["kind"], "file": p["file"], "formed": False,
                         "up_model_s": up_model})
            continue
        i, k, st = r["idle"], r.get("kill", {}), r.get("stop", {})
        rj = k.get("rejoin", {})
        tx_model = m.tx_model(n, h, p["k"])
        # On one host the daemons started together: a killed node is seen at every
        # member's next tick (h); a silent one as stop_nominal says (+ e_stop).
        kill_model = h
        sn = m.stop_nominal(p)
        stop_med = sn["median"] + m.e_stop_at(h)
        stop_max = sn["worst"]
        rejoin_model = (m.r0 or 0) + m.ticks(h) + m.crowd_one_run(p)
        up = fm["all_up_from_last_start_s"]
        row = {"n": n, "h": h, "k": p["k"], "kind": p["kind"], "file": p["file"], "formed": True,
               "up_after_last_start_s": [up, up_model],
               "idle_tx_bytes_s": [i["tx_bytes_s"], tx_model], "idle_cpu_pct": [i["cpu_pct_median"], cpu_model],
               "messages_handled_s": m.handled(p),
               "killed_seen_max_s": [k.get("detect_s_max"), kill_model],
               "stopped_seen_median_s": [st.get("detect_s_median"), stop_med],
               "stopped_seen_max_s": [st.get("detect_s_max"), stop_max],
               "rejoin_s": [rj.get("resident_s"), rejoin_model]}
        rows.append(row)
        print(f"{label} | {up:6.2f} {f(up_model):>6} {pct(rel(up_model, up)):>5}   "
              f"| {i['tx_bytes_s']:8,.0f} {tx_model:8,.0f} {pct(rel(tx_model, i['tx_bytes_s'])):>4} "
              f"| {m.handled(p):7,.1f} "
              f"| {i['cpu_pct_median']:5.2f} {cpu_model:5.2f} {pct(rel(cpu_model, i['cpu_pct_median'])):>5} "
              f"| {f(k.get('detect_s_max')):>5} {kill_model:5.2f} {within(k.get('detect_s_max'), kill_model):5} "
              f"| {f(st.get('detect_s_median')):>5} {stop_med:5.2f} {pct(rel(stop_med, st.get('detect_s_median'))):>5} "
              f"| {f(st.get('detect_s_max')):>5} {stop_max:5.2f} {within(st.get('detect_s_max'), stop_max):5}       "
              f"| {f(rj.get('resident_s')):>4} {f(rejoin_model):>5} {pct(rel(rejoin_model, rj.get('resident_s'))):>5}")
    return rows


ARP_GC_THRESH3 = 1024  # net.ipv4.neigh.default.gc_thresh3: learned ARP entries, one table for all namespaces


def one_host(m, sizes, h, k):
    """What bounds N on this host: the daemons' idle CPU against its cores, and the
    one ARP table all namespaces share (N (N-1) learned entries; the bench adds
    permanent ones, which that bound exempts; without them 64 nodes got exactly
    1,024 of their 4,032 links up)."""
    print(f"\nThis host ({m.cores} cores), heartbeat {h * 1000:.0f} ms, {m.kind} binary, watch_peers {k}:")
    out = {}
    for n in sizes:
        busy = n * m.u(n, h, k)
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
          f"{a.backend_gbps:g} Gb/s per node, heartbeat {h * 1000:.0f} ms, down after {d * 1000:.0f} ms, K = {a.k}, "
          f"{m.kind} binary")
    print("(a) = all-to-all heartbeats (watch_peers 0), (b) = ring overlay of K successors (watch_peers K); "
          "both with down notices")
    lines = [("peers each node pings", "watched", ",.0f", None, None),
             ("every peer up, all started at once (s)", "up_s", ".2f", None, None),
             ("every peer up after the last start, worst (s)", "up_after_last_start_s", ".2f", "up_s", "<="),
             ("every stripe resident (s)", "resident_s", ".2f", None, None),
             ("idle membership messages handled /s", "messages_s", ",.0f", None, None),
             ("idle bytes/s sent per node (messages + peers)", "idle_tx_bytes_s", ",.0f", None, None),
             ("idle bytes/s sent + received", "idle_tot", ",.0f", "idle_bytes_s", "<"),
             ("idle share of the link", "idle_link_share", ".2e", None, None),
             ("idle CPU % of a core: messages", "idle_cpu_pct_messages", ".3f", None, None),
             ("idle CPU % of a core: connected peers", "idle_cpu_pct_peers", ".3f", None, None),
             ("idle CPU % of a core: with the floor", "idle_cpu_pct", ".3f", "idle_cpu_pct", "<"),
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
        goals = {}
        print(f"\n  N = {n:,}{'':34} {'(a) all-to-all':>16} {'(b) overlay':>16}   goal")
        for label, key, spec, goal, op in lines:
            va, vb = p["all_to_all"][key], p["overlay"][key]
            g = ""
            if goal:
                lim = GOALS[goal]
                ok = (lambda v: v <= lim) if op == "<=" else (lambda v: v < lim)
                goals[key] = {"limit": lim, "all_to_all": ok(va), "overlay": ok(vb)}
                g = f"{op} {lim:g}: (a) {'yes' if ok(va) else 'NO'}, (b) {'yes' if ok(vb) else 'NO'}"
            print(f"  {label:42} {format(va, spec):>16} {format(vb, spec):>16}   {g}")
        p["goals"] = goals
        out[str(n)] = p
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
    ap.add_argument("--k", type=int, default=3, help="overlay degree: ring successors each node pings (dlfsd's default 3)")
    ap.add_argument("--heartbeat-ms", type=int, default=500, help="h of the prediction (dlfsd's default 500)")
    ap.add_argument("--down-after-ms", type=int, default=2000, help="d of the prediction (dlfsd's default 2000)")
    ap.add_argument("--polling", action="append", default=[], metavar="FILE",
                    help="take this results file as the polling binary's whatever its params say")
    ap.add_argument("--c-msg-from", choices=("auto", "event", "polling"), default="auto",
                    help="runs a message's CPU is fitted to (auto: the event runs when they resolve it)")
    ap.add_argument("--json", help="write the constants, the check and the predictions here")
    a = ap.parse_args()
    a.nodes = [int(x) for x in a.nodes.split(",")]
    pts = load_points(a.results, set(a.polling))
    m = Model(pts, a.c_msg_from)
    c = m.constants()
    kinds = {}
    for p in pts:
        kinds.setdefault(p["file"], (p["kind"], p["k"], p["git"]))
    print("Runs: " + "; ".join(f"{fn} ({kd}, watch_peers {k}, git {g})" for fn, (kd, k, g) in kinds.items()))
    print(f"Fitted constants (per node; the {m.kind} binary's runs: " + ", ".join(m.fit_files) + "):")
    for h, v in sorted(m.b_msg.items()):
        print(f"  heartbeat {h * 1000:.0f} ms: {v[0]:.0f} wire bytes sent a membership message, {v[1]:.0f} received, "
              f"{v[2]:.2f} packets sent (TCP/IP headers and ACKs included)")
    print("  a connected peer with no message: " + (
        f"{c['b_peer_bytes_s']['sent']:.1f} wire bytes/s sent, {c['b_peer_bytes_s']['received']:.1f} received"
        if c["b_peer_resolved"] else "not resolved (no overlay and all-to-all runs at one heartbeat), taken as 0"))
    if c["payload_bytes_msg"].get("all"):
        print("  payload (dlfsd's counters): " + ", ".join(f"{k} {v:.0f} bytes" for k, v in c["payload_bytes_msg"].items()))
    fr = c["floor_run"]
    print(f"  idle CPU: {1e6 * c['c_msg_s']:.1f} us a message handled ({c['cpu_fit']})"
          + "".join(f"; {k} runs alone: {f(1e6 * v if v is not None else None, '.1f')} us" for k, v in c["c_msg_by_kind_s"].items()))
    print(f"  idle CPU a connected peer: {100 * c['c_peer']:.4f}% of a core (slope of the per-N intercepts; "
          "this host's crowding included)" if m.kind == "event" else "  idle CPU a connected peer: not separated (polling)")
    print(f"  a daemon with no message: {100 * c['c_floor']:.3f}% of a core (median of the {fr['runs']} "
          f"{m.kind} runs of N = {fr['n']}" + (f", h = {1000 * m.floor_h:.0f} ms" if m.floor_h else "") + ": " + ", ".join(f"{x:.3f}%" for x in fr["cpu_pct"]) + " measured, "
          + ", ".join(f(x, ".0f") for x in fr["runnable"]) + " tasks runnable, less their messages)")
    for kd, ic in c["cpu_intercepts_by_kind_n"].items():
        print(f"  idle CPU less messages at N, {kd} runs: " + ", ".join(f"{n}: {100 * v:.3f}%" for n, v in ic.items()))
    join = (f"joins {1e3 * c['c_join_s']:.2f} ms a peer (both ways)" if c["c_join_resolved"] else
            f"joins not resolved by the fit: taken at their bound, {1e3 * c['c_join_s']:.2f} ms a peer (all of a "
            "daemon's CPU to form at the largest N, over its peers)")
    print(f"  forming, a daemon's CPU: start {c['c_start_s']:.3f} s, load {1e3 * c['c_byte_s'] * 2**20:.1f} ms a MiB "
          f"of stripe, {join}; {c['b_join']:,.0f} bytes sent a peer joined")
    print("  a join's time on this host (CPU and waits for a core, from how forming grows with N(N-1)/free cores): "
          + (f"{1e3 * c['c_join_time_s']:.2f} ms" if c["c_join_time_s"] else "not resolved"))
    print(f"  listening {f(c['t_listen_s'], '.3f')} s after start, then up after 2 ticks (+ {c['reconnect_s']:.0f} s "
          f"when the first tick came before the peers listened), + {c['t0_s']:.2f} s; a silent node seen, against "
          "the nominal: " + ", ".join(f"{float(h) * 1000:.0f} ms: {v:+.2f} s" for h, v in c["e_stop_s_by_heartbeat"].items())
          + f" (median); rejoin: the ticks + {f(c['r0_s'])} s + joins; backend {c['backend_ratio']:.3f}x the dataset")
    rows = check(m, pts)
    h, d = a.heartbeat_ms / 1000, a.down_after_ms / 1000
    host = one_host(m, sorted({p["n"] for p in pts} | {48, 64}), h, a.k)
    pred = predictions(m, a, h, d)
    if a.json:
        def plain(x):  # strict JSON: a cluster that never forms is null there
            if isinstance(x, float) and x in (float("inf"), float("-inf")):
                return None
            if isinstance(x, dict):
                return {str(k): plain(v) for k, v in x.items()}
            if isinstance(x, (list, tuple)):
                return [plain(v) for v in x]
            return x
        with open(a.json, "w") as fh:
            json.dump(plain({"constants": c, "check": rows, "this_host": host, "predictions": pred,
                             "args": dict(vars(a))}), fh, indent=1, allow_nan=False)


if __name__ == "__main__":
    main()
