#!/usr/bin/env python3
"""Cluster scale (issue 35): N dlfsd in N network namespaces on this machine,
UCX over tcp between them, for N = 2, 4, 8, ... Every figure is measured here.

For each N, one tiny dataset striped over the N nodes (each node loads 1/N):
  form       seconds from the first daemon's start until every node says every
             peer is up and every stripe resident (`all_resident`, polled), and
             until the last peer came up (from each member's `since_s`: exact,
             not bound to the polling period); also from the LAST daemon's start
  backend    bytes read from the backend until then, summed over the nodes
             (load bytes + bytes served from the backend): the dataset once
  idle       after forming, over --idle seconds with nothing read: each node's
             eth0 bytes and packets (its namespace's /proc/net/dev, both ways),
             per node and per peer; the daemons' CPU (utime+stime, % of one
             core); the machine's busy cores; `membership` counters when
             `dlfs-ctl status --json` has them
  views      every node reads its rank's epoch view (epochs/0/N/<rank>.tar) and
             every member must be the backend file of its name; every sample is
             in one rank's view; each node reads --raw-samples raw files
  kill       a reader on node 0 streams epochs/1/1/0.tar (the whole dataset,
             paced over --reader-s) while rank N-1 is SIGKILLed: seconds until
             each other node shows it down (median, max), the reader's longest
             read and its time from the kill to its end, and its bytes checked
  rejoin     rank N-1 restarted: seconds until every node shows it up and its
             stripe resident
  stop       rank N//2 SIGSTOPped (its sockets stay open, as a node that hangs
             or loses power): seconds until each other node shows it down
             (the heartbeat timeout, down_after_ms), then SIGCONT and back
A cluster that does not form within --form-timeout is reported with what its
nodes' status said (peers not up, their last_error), its idle CPU, and the run
goes on with the next N.

The namespaces share the host's one ARP table: every node gets permanent
neighbour entries for its peers (static_neighbours), or from N = 33 on the
table overflows and connections never open. Idle CPU is the threads' exact
runtime (schedstat), next to how many tasks were runnable on the host: on 2
shared cores the daemons' figures depend on what else runs (tools/scale_model.py
separates a message's cost from that crowding with runs of other heartbeat_ms).

Status is read over each daemon's control socket with the request dlfs-ctl
status --json sends ({"cmd": "status"}, common/control_protocol.h): the same
object, without starting a dlfs-ctl process per poll (64 nodes polled ten times
a second would be 640 processes a second on the cores being measured).

usage: scale_bench.py [--nodes 2,4,8,16,32] [--idle 20] [--json out.json]
                      [--files 2048 | --files-per-node 64] [--file-size 16K]
                      [--form-timeout 300] [--heartbeat-ms 500 --down-after-ms 3000]
Needs root (network namespaces, FUSE mounts); the host must have an eth0
(tests/integration/netns_lib.sh, require_netns ucx).
"""
import datetime
import hashlib
import json
import os
import random
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from benchlib import cli
from benchlib.datasets import ensure_dataset
from benchlib.netns import netns
from benchlib.proc import cpu_seconds, thread_cpu_seconds
from benchlib.readers import files_under
from benchlib.report import log, write_json
from benchlib.teardown import exit_on_signals, signals_blocked

PORT = 7710  # every node has a namespace of its own: one port for all
CLK_TCK = os.sysconf("SC_CLK_TCK")

# What keeps 64 daemons on 2 cores: few threads each, no per-CPU FUSE queues,
# no overlay mounts and client sockets nobody uses here.
DAEMON_FLAGS = ["--fuse-threads", "2", "--loader-threads", "1", "--fuse-uring", "off", "--raw-overlay", "off",
                "--client-socket", "off", "--log-level", "info"]


# ---- reading the nodes -------------------------------------------------------

def ctl(sock, cmd="status", timeout=5.0):
    """The daemon's answer to {"cmd": cmd} on its control socket (newline-delimited
    JSON, common/control_protocol.h), as dlfs-ctl --json prints it; None if it
    does not answer."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(sock)
            s.sendall(json.dumps({"cmd": cmd}).encode() + b"\n")
            buf = b""
            while True:
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    msg = json.loads(line)
                    if "progress" in msg:
                        continue
                    return msg.get("result") if msg.get("ok") else None
                chunk = s.recv(1 << 16)
                if not chunk:
                    return None
                buf += chunk
    except (OSError, ValueError):
        return None


def netdev(ns):
    """eth0's {rx_bytes, rx_packets, tx_bytes, tx_packets} in namespace `ns`. From
    its /proc/net/dev (seen through nsenter), not /sys/class/net, which shows the
    host's namespace (netns_lib.sh's header)."""
    out = subprocess.run(["nsenter", f"--net=/var/run/netns/{ns}", "--", "cat", "/proc/net/dev"],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        name, _, rest = line.partition(":")
        if name.strip() == "eth0":
            f = [int(x) for x in rest.split()]
            return {"rx_bytes": f[0], "rx_packets": f[1], "tx_bytes": f[8], "tx_packets": f[9]}
    raise RuntimeError(f"no eth0 in {ns}")


def machine_cpu():
    """(busy, total) jiffies of the whole machine (/proc/stat). Tick-sampled: a
    thread that runs a few microseconds every 200 us (an idle UCX progress thread)
    is seldom running at a tick and mostly counts as idle here, while its own
    utime+stime (scaled to the scheduler's exact runtime) does not miss it. So
    this says how busy other work kept the host, not what the daemons cost."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def runnable():
    """Tasks runnable right now on the host (procs_running): with 2 cores, above 2
    the daemons wait for a core."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("procs_running"):
                return int(line.split()[1])
    return 0


def rss_bytes(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def numeric_leaves(obj, prefix=""):
    """{"sent.messages": 12, ...} of a nested object's numbers."""
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(numeric_leaves(v, f"{prefix}{k}."))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        out[prefix[:-1]] = obj
    return out


def membership_counters(status):
    """The `membership` counters of a status (top level or under `cluster`), flat;
    None while dlfsd does not report them."""
    if not status:
        return None
    m = status.get("membership") or (status.get("cluster") or {}).get("membership")
    return numeric_leaves(m) if isinstance(m, dict) else None


def member(status, rank):
    return status["cluster"]["members"][rank]


def formed(status, n):
    """Every peer up and every stripe resident, as this node sees it."""
    c = (status or {}).get("cluster")
    if not c or c.get("size") != n:
        return False
    return c["all_resident"] and all(m["state"] in ("up", "self") for m in c["members"])


def backend_bytes(status):
    """Bytes this node read from the backend: its load (minus what readers gave
    it, which they read from the backend themselves and count below) and the bytes
    it served from the backend (docs/stats.md)."""
    total = 0
    for d in status.get("datasets", []):
        load = d.get("load", {})
        total += load.get("bytes_loaded", 0) - load.get("bytes_given", 0)
        total += d.get("bytes_by_source", {}).get("backend", 0)
    return total


def med(xs):
    return statistics.median(xs) if xs else None


# ---- the cluster -------------------------------------------------------------

class Dataset:
    """The files a cluster of N serves, generated once under the workdir, and the
    daemons' config file (the heartbeat keys have no flags, and a config file
    does not mix with --backend: the dataset is in it)."""

    def __init__(self, a, n):
        count = a.files_per_node * n if a.files_per_node else a.files
        self.path = os.path.join(a.workdir, f"data-{count}x{a.file_size}")
        ensure_dataset(self.path, count, cli.size_arg(a.file_size), 16, jitter=0.5)
        self.files = files_under(self.path)
        self.bytes = sum(os.path.getsize(os.path.join(self.path, f)) for f in self.files)
        self.config = os.path.join(a.workdir, f"dlfsd-{count}.toml")
        with open(self.config, "w") as f:
            # Only the settings asked for: otherwise dlfsd's own defaults are measured.
            f.write("[cluster]\n")
            for key in ("heartbeat_ms", "down_after_ms", "watch_peers"):
                if getattr(a, key) is not None:
                    f.write(f"{key} = {getattr(a, key)}\n")
            f.write(f"\n[[dataset]]\nname = \"ds\"\nbackend = \"{self.path}\"\nseed = 7\n")


class Node:
    def __init__(self, rank, ns, workdir, n):
        self.rank, self.ns = rank, ns
        self.mnt = os.path.join(workdir, f"mnt-{n}-{rank}")
        self.sock = os.path.join(workdir, f"ctl-{n}-{rank}.sock")
        self.log = os.path.join(workdir, f"dlfsd-{n}-{rank}.log")
        self.proc = None
        self.started = None

    def status(self):
        return ctl(self.sock)


def static_neighbours(names, addrs):
    """Permanent neighbour (ARP) entries in every node for every other node. All
    namespaces share the host's one ARP table, whose gc_thresh3 (1024 by default)
    bounds its learned entries: N nodes learn N (N - 1), so from N = 33 on ARP
    failed ("neighbour: arp_cache: neighbor table overflow!" in dmesg) and TCP
    connections stayed in SYN-SENT. Permanent entries are exempt from that bound.
    A real node holds N - 1 entries in a table of its own."""
    macs = []
    for ns in names:
        out = subprocess.run(["ip", "-n", ns, "-j", "link", "show", "eth0"], capture_output=True, text=True, check=True)
        macs.append(json.loads(out.stdout)[0]["address"])
    for i, ns in enumerate(names):
        batch = "".join(f"neigh replace {addrs[j]} lladdr {macs[j]} dev eth0 nud permanent\n"
                        for j in range(len(names)) if j != i)
        subprocess.run(["ip", "-n", ns, "-batch", "-"], input=batch, text=True, check=True)


class Cluster:
    """n daemons in n namespaces, one dataset striped over them. Always torn down
    (close()): daemons stopped, mounts gone, namespaces deleted."""

    def __init__(self, a, n, ds):
        self.a, self.n, self.ds = a, n, ds
        self.tag = f"{a.tag}-{n}"
        self.names, self.addrs = netns("up", self.tag, n, need_ucx=True)
        try:
            static_neighbours(self.names, self.addrs)
        except (subprocess.CalledProcessError, ValueError, KeyError):
            netns("down", self.tag)
            raise
        self.nodes = [Node(i, self.names[i], a.workdir, n) for i in range(n)]
        self.peers = ",".join(f"{ip}:{PORT}" for ip in self.addrs)
        self.logs = []

    def argv(self, node):
        return ["nsenter", f"--net=/var/run/netns/{node.ns}", "--", self.a.dlfsd, "--config", self.ds.config,
                "--mountpoint", node.mnt, "--control-socket", node.sock, *DAEMON_FLAGS,
                "--memory-budget", self.a.memory_budget, "--extent-size", self.a.extent_size,
                "--token-file", self.a.token, "--peers", self.peers, "--rank", str(node.rank)]

    def start(self, node, suffix=""):
        """Starts node's daemon without waiting (nsenter execs dlfsd: the Popen's
        pid is the daemon's)."""
        os.makedirs(node.mnt, exist_ok=True)
        logf = open(node.log + suffix, "w")
        self.logs.append(logf)
        env = dict(os.environ, UCX_TLS="tcp", UCX_NET_DEVICES="eth0", UCX_WARN_UNUSED_ENV_VARS="n")
        node.started = time.monotonic()
        node.started_wall = time.time()
        node.proc = subprocess.Popen(self.argv(node), stdout=logf, stderr=subprocess.STDOUT, env=env)

    def statuses(self, nodes=None):
        """[(node, status, monotonic time of the answer)] for every node (in parallel:
        a daemon slow to answer does not hold the others' polls back)."""
        nodes = self.nodes if nodes is None else nodes
        with ThreadPoolExecutor(8) as ex:
            return list(ex.map(lambda nd: (nd, nd.status(), time.monotonic()), nodes))

    def close(self):
        with signals_blocked():
            procs = [nd.proc for nd in self.nodes if nd.proc and nd.proc.poll() is None]
            for p in procs:
                try:
                    os.kill(p.pid, signal.SIGCONT)  # a node left stopped would not hear SIGTERM
                    p.terminate()
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 30
            for p in procs:
                try:
                    p.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            with open("/proc/mounts") as f:
                mounted = f.read()
            for nd in self.nodes:
                if f" {nd.mnt} " in mounted:
                    subprocess.run(["fusermount3", "-u", "-z", nd.mnt], check=False)
            for f in self.logs:
                f.close()
            netns("down", self.tag)


# ---- the phases --------------------------------------------------------------

def listening_after(node):
    """Seconds from the daemon's start to its cluster listening (its log line's
    time stamp): before that no join to it can succeed."""
    try:
        with open(node.log) as f:
            for line in f:
                if "cluster: rank" in line and "listening on port" in line:
                    stamp = datetime.datetime.fromisoformat(line.split()[0]).timestamp()
                    return stamp - node.started_wall
    except (OSError, ValueError):
        pass
    return None


def not_up_report(status):
    """What a node that has not formed says: its peers not up, with last_error,
    and whether it believes everything resident."""
    if not status:
        return {"answered": False}
    c = status.get("cluster") or {}
    peers = [{"rank": m["rank"], "state": m["state"], "since_s": round(m.get("since_s", 0), 1),
              "last_error": m.get("last_error", "")}
             for m in c.get("members", []) if m["state"] not in ("up", "self")]
    return {"answered": True, "all_resident": c.get("all_resident"), "not_up": peers,
            "datasets": [d.get("state") for d in status.get("datasets", [])]}


def summarize_not_formed(reports, n):
    """One line: how many member views are in which state, and the commonest errors."""
    states, errors, silent = {}, {}, 0
    for r in reports:
        if not r["answered"]:
            silent += 1
            continue
        for p in r["not_up"]:
            states[p["state"]] = states.get(p["state"], 0) + 1
            e = p["last_error"] or "(none)"
            errors[e] = errors.get(e, 0) + 1
    up = n * (n - 1) - sum(states.values()) - silent * (n - 1)
    top = sorted(errors.items(), key=lambda kv: -kv[1])[:3]
    return (f"{up}/{n * (n - 1)} peer links up; not up: {states}; {silent} nodes did not answer; "
            f"commonest last_error: " + "; ".join(f"{e!r} x{k}" for e, k in top))


def phase_form(c):
    """Starts every daemon at once and polls until all formed or the bound."""
    a, n = c.a, c.n
    busy0 = machine_cpu()
    t0 = time.monotonic()
    for nd in c.nodes:
        c.start(nd)
    t_last = c.nodes[-1].started
    formed_at, last = {}, {}
    deadline = t0 + a.form_timeout
    queue = []
    while len(formed_at) < n and time.monotonic() < deadline:
        queue.append(runnable())
        for nd, st, t in c.statuses([nd for nd in c.nodes if nd.rank not in formed_at]):
            last[nd.rank] = st
            if nd.proc.poll() is not None:
                sys.exit(f"dlfsd rank {nd.rank} of {n} exited with {nd.proc.returncode}; log:\n" + open(nd.log).read()[-3000:])
            if formed(st, n):
                formed_at[nd.rank] = t
        time.sleep(a.poll)
    busy1 = machine_cpu()
    cpu = [cpu_seconds(nd.proc.pid) for nd in c.nodes]
    out = {"started_s": t_last - t0, "machine_busy_cores_forming": (busy1[0] - busy0[0]) / (busy1[1] - busy0[1])
           * os.cpu_count(), "runnable_forming_median": med(queue), "daemon_cpu_s_to_form": cpu}
    if len(formed_at) < n:
        reports = {nd.rank: not_up_report(last.get(nd.rank)) for nd in c.nodes if nd.rank not in formed_at}
        out.update(formed=False, bound_s=a.form_timeout, formed_nodes=len(formed_at),
                   summary=summarize_not_formed(list(reports.values()), n), nodes=reports)
        return out
    t_formed = max(formed_at.values())
    # Exact moments each peer came up, from a snapshot taken now (since_s counts
    # from the member's last change of state, on the daemon's steady clock).
    snap = c.statuses()
    net = [netdev(nd.ns) for nd in c.nodes]  # since the namespace was made: the joins and the heartbeats so far
    ups = [t - m["since_s"] for _nd, st, t in snap for m in st["cluster"]["members"] if m["state"] == "up"]
    out.update(formed=True, form_s=t_formed - t0, form_from_last_start_s=t_formed - t_last,
               all_up_s=max(ups) - t0, all_up_from_last_start_s=max(ups) - t_last,
               first_up_s=min(ups) - t0, poll_s=a.poll,
               backend_bytes=sum(backend_bytes(st) for _nd, st, _t in snap),
               rss_bytes=[rss_bytes(nd.proc.pid) for nd in c.nodes],
               tx_bytes_to_form=[x["tx_bytes"] for x in net], tx_packets_to_form=[x["tx_packets"] for x in net],
               load_s=[st["datasets"][0].get("load", {}).get("elapsed_s") for _nd, st, _t in snap],
               scan_s=[st["datasets"][0].get("scan_s") for _nd, st, _t in snap],
               listening_s=[listening_after(nd) for nd in c.nodes])
    return out


def phase_idle(c, seconds):
    """Network bytes and packets, CPU, membership counters over `seconds` of
    nothing but the cluster's own traffic."""
    def snap():
        s = {}
        for nd in c.nodes:
            # Threads' exact runtime (schedstat, ns): an idle daemon's threads live on.
            s[nd.rank] = {"t": time.monotonic(), "net": netdev(nd.ns), "cpu": thread_cpu_seconds(nd.proc.pid),
                          "membership": membership_counters(nd.status())}
        return s
    m0, b0 = snap(), machine_cpu()
    queue, end = [], time.monotonic() + seconds
    while time.monotonic() < end:  # how crowded the host's cores were meanwhile
        queue.append(runnable())
        time.sleep(min(0.5, max(0.0, end - time.monotonic())))
    m1, b1 = snap(), machine_cpu()
    per = []
    for nd in c.nodes:
        x, y = m0[nd.rank], m1[nd.rank]
        dt = y["t"] - x["t"]
        r = {k: (y["net"][k] - x["net"][k]) / dt for k in x["net"]}
        r["cpu_pct"] = 100 * (y["cpu"] - x["cpu"]) / dt
        if x["membership"] is not None and y["membership"] is not None:
            r["membership_per_s"] = {k: (y["membership"][k] - x["membership"].get(k, 0)) / dt for k in y["membership"]}
        per.append(r)
    peers = max(1, c.n - 1)
    out = {"seconds": seconds, "per_node": per,
           "tx_bytes_s": med([p["tx_bytes"] for p in per]), "rx_bytes_s": med([p["rx_bytes"] for p in per]),
           "tx_packets_s": med([p["tx_packets"] for p in per]), "rx_packets_s": med([p["rx_packets"] for p in per]),
           "cpu_pct_median": med([p["cpu_pct"] for p in per]), "cpu_pct_max": max(p["cpu_pct"] for p in per),
           "daemons_cores": sum(p["cpu_pct"] for p in per) / 100,
           "machine_busy_cores": (b1[0] - b0[0]) / (b1[1] - b0[1]) * os.cpu_count(),
           "runnable_median": med(queue), "runnable_max": max(queue) if queue else None}
    out["tx_bytes_s_per_peer"] = out["tx_bytes_s"] / peers
    out["tx_packets_s_per_peer"] = out["tx_packets_s"] / peers
    if all("membership_per_s" in p for p in per):
        keys = per[0]["membership_per_s"].keys()
        out["membership_per_s"] = {k: med([p["membership_per_s"].get(k, 0) for p in per]) for k in keys}
    return out


def check_tar(path, backend, names_seen):
    """Every member of the tar at `path` is the backend file of its name; adds the
    names to names_seen. Returns (members, bytes) or raises with what differs."""
    members = size = 0
    with tarfile.open(path, mode="r|") as t:  # streamed, as a trainer reads it
        for m in t:
            with open(os.path.join(backend, m.name), "rb") as f:
                want = f.read()
            got = t.extractfile(m).read()
            if got != want:
                raise AssertionError(f"{path}: member {m.name} ({len(got)} bytes) differs from the backend ({len(want)})")
            names_seen.add(m.name)
            members += 1
            size += len(got)
    return members, size


def phase_views(c, raw_samples):
    """Every node's view of its rank and a sample of raw files, against the backend."""
    n, ds, files = c.n, c.ds.path, c.ds.files
    seen, errors = set(), []
    before = sum(backend_bytes(st) for _nd, st, _t in c.statuses())
    lock = threading.Lock()

    def one(nd):
        mine = set()
        try:
            members, _ = check_tar(os.path.join(nd.mnt, "ds", "epochs", "0", str(n), f"{nd.rank}.tar"), ds, mine)
            want = -(-len(files) // n)  # remainder pad: every rank gets ceil(samples / N)
            if members != want:
                raise AssertionError(f"rank {nd.rank}: {members} members in its view, expected {want}")
            for name in random.Random(nd.rank).sample(files, min(raw_samples, len(files))):
                with open(os.path.join(nd.mnt, "ds", "raw", name), "rb") as f, open(os.path.join(ds, name), "rb") as g:
                    if hashlib.sha256(f.read()).digest() != hashlib.sha256(g.read()).digest():
                        raise AssertionError(f"node {nd.rank}: raw/{name} differs from the backend")
        except (OSError, AssertionError, tarfile.TarError) as e:
            with lock:
                errors.append(str(e))
        with lock:
            seen.update(mine)

    t0 = time.monotonic()
    with ThreadPoolExecutor(4) as ex:
        list(ex.map(one, c.nodes))
    missing = len(set(files) - seen)
    if missing and not errors:
        errors.append(f"{missing} samples in no rank's view of epoch 0")
    after = sum(backend_bytes(st) for _nd, st, _t in c.statuses())
    return {"ok": not errors, "errors": errors[:5], "seconds": time.monotonic() - t0,
            "backend_bytes_during": after - before}


class PacedReader(threading.Thread):
    """Streams a view in 256 KiB reads spread over `seconds`, keeping the bytes,
    and the time of each read: the reads a node's death stalls."""

    def __init__(self, path, seconds, size_hint):
        super().__init__(daemon=True)
        self.path, self.seconds, self.size_hint = path, seconds, size_hint
        self.reads, self.data, self.error, self.end = [], bytearray(), None, None

    def run(self):
        chunk = 256 << 10
        pause = self.seconds / max(1, self.size_hint // chunk)
        try:
            with open(self.path, "rb", buffering=0) as f:
                while True:
                    t = time.monotonic()
                    b = f.read(chunk)
                    self.reads.append((t, time.monotonic() - t))
                    if not b:
                        break
                    self.data += b
                    time.sleep(pause)
        except OSError as e:
            self.error = str(e)
        self.end = time.monotonic()


def wait_down(c, victim, t_event, bound):
    """Polls the other nodes until each shows `victim` not up; the moment each
    marked it down, from since_s. Returns (delays after t_event, nodes that never did)."""
    others = [nd for nd in c.nodes if nd.rank != victim.rank]
    down_at = {}
    deadline = time.monotonic() + bound
    while len(down_at) < len(others) and time.monotonic() < deadline:
        for nd, st, t in c.statuses([nd for nd in others if nd.rank not in down_at]):
            if st and member(st, victim.rank)["state"] in ("down", "connecting"):
                down_at[nd.rank] = t - member(st, victim.rank)["since_s"]
        time.sleep(c.a.poll)
    return [d - t_event for d in down_at.values()], [nd.rank for nd in others if nd.rank not in down_at]


def wait_back(c, victim, t_event, bound):
    """Polls until every node (the victim too) has formed again; returns (seconds
    until then, seconds until the last node saw the victim up (since_s)), or None."""
    done = {}
    deadline = time.monotonic() + bound
    while len(done) < c.n and time.monotonic() < deadline:
        for nd, st, t in c.statuses([nd for nd in c.nodes if nd.rank not in done]):
            if formed(st, c.n):
                done[nd.rank] = (t, None if nd is victim else t - member(st, victim.rank)["since_s"])
        time.sleep(c.a.poll)
    if len(done) < c.n:
        return None
    return max(t for t, _ in done.values()) - t_event, max(u for _, u in done.values() if u is not None) - t_event


def phase_kill(c):
    """SIGKILL of rank N-1 while node 0 streams the whole dataset's view; then its restart."""
    a, n, files = c.a, c.n, c.ds.files
    victim, reader_node = c.nodes[-1], c.nodes[0]
    b0 = backend_bytes(reader_node.status())
    reader = PacedReader(os.path.join(reader_node.mnt, "ds", "epochs", "1", "1", "0.tar"), a.reader_s, c.ds.bytes)
    reader.start()
    # Early: the kernel's and dlfsd's read-ahead run ahead of a paced reader, and
    # on a small dataset (N <= 4 here) had the whole view before a kill at 1/4.
    time.sleep(a.reader_s / 8)
    t_kill = time.monotonic()
    victim.proc.kill()
    delays, missed = wait_down(c, victim, t_kill, 60)
    victim.proc.wait()
    reader.join(a.reader_s + 120)
    out = {"victim": victim.rank, "detect_s_median": med(delays), "detect_s_max": max(delays) if delays else None,
           "detect_s": delays, "not_detected_by": missed}
    # The reader: done, with the right bytes, and what the dead node cost it.
    after_kill = [d for t, d in reader.reads if t + d >= t_kill]
    ok, why = reader.error is None and reader.end is not None, reader.error or ""
    if ok:
        try:
            import io
            seen = set()
            with tarfile.open(fileobj=io.BytesIO(bytes(reader.data)), mode="r|") as t:
                for m in t:
                    with open(os.path.join(c.ds.path, m.name), "rb") as f:
                        if t.extractfile(m).read() != f.read():
                            raise AssertionError(f"member {m.name} differs from the backend")
                    seen.add(m.name)
            if seen != set(files):
                raise AssertionError(f"{len(set(files) - seen)} samples missing from epochs/1/1/0.tar")
        except (AssertionError, tarfile.TarError, OSError) as e:
            ok, why = False, str(e)
    out["reader"] = {"ok": ok, "error": why, "bytes": len(reader.data),
                     "done_after_kill_s": reader.end - t_kill if reader.end else None,
                     "longest_read_after_kill_s": max(after_kill) if after_kill else None,
                     "backend_bytes": backend_bytes(reader_node.status()) - b0, "paced_over_s": a.reader_s}
    # Restart: a new process, new memory; it reloads its stripe and rejoins.
    t_restart = time.monotonic()
    c.start(victim, suffix=".restart")
    back = wait_back(c, victim, t_restart, a.rejoin_timeout)
    out["rejoin"] = ({"ok": True, "resident_s": back[0], "up_s": back[1]} if back else
                     {"ok": False, "bound_s": a.rejoin_timeout,
                      "nodes": {nd.rank: not_up_report(st) for nd, st, _t in c.statuses() if not formed(st, n)}})
    return out


def phase_stop(c):
    """SIGSTOP of rank N//2: no connection breaks, so only the heartbeats' silence
    (down_after_ms) can tell; then SIGCONT, and it must come back."""
    victim = c.nodes[c.n // 2]
    t_stop = time.monotonic()
    os.kill(victim.proc.pid, signal.SIGSTOP)
    try:
        delays, missed = wait_down(c, victim, t_stop, 60)
    finally:
        os.kill(victim.proc.pid, signal.SIGCONT)
    t_cont = time.monotonic()
    back = wait_back(c, victim, t_cont, c.a.rejoin_timeout)
    return {"victim": victim.rank, "detect_s_median": med(delays), "detect_s_max": max(delays) if delays else None,
            "detect_s": delays, "not_detected_by": missed, "back_s": back[0] if back else None}


def run_n(a, n):
    ds = Dataset(a, n)
    c = Cluster(a, n, ds)
    try:
        r = {"nodes": n, "dataset": {"files": len(ds.files), "bytes": ds.bytes}}
        r["form"] = phase_form(c)
        f = r["form"]
        if not f["formed"]:
            log(f"{n} nodes: NOT formed within {a.form_timeout:.0f} s: {f['summary']}")
            r["idle"] = phase_idle(c, min(a.idle, 10))  # what the daemons cost meanwhile
            return r
        log(f"{n} nodes: formed in {f['form_s']:.2f} s (last peer up at {f['all_up_s']:.2f} s), "
            f"backend {f['backend_bytes'] / ds.bytes:.3f}x the dataset ({len(ds.files)} files, {ds.bytes / (1 << 20):.1f} MiB)")
        time.sleep(a.settle)
        r["idle"] = phase_idle(c, a.idle)
        i = r["idle"]
        log(f"{n} nodes: idle tx {i['tx_bytes_s']:,.0f} B/s/node ({i['tx_bytes_s_per_peer']:,.0f} per peer), "
            f"{i['tx_packets_s']:,.1f} pkt/s, CPU {i['cpu_pct_median']:.2f}% median, {i['cpu_pct_max']:.2f}% max")
        r["views"] = phase_views(c, a.raw_samples)
        log(f"{n} nodes: views {'byte-exact' if r['views']['ok'] else 'WRONG: ' + '; '.join(r['views']['errors'])}")
        if n >= 2:
            r["kill"] = phase_kill(c)
            k = r["kill"]
            rj = k["rejoin"]
            log(f"{n} nodes: rank {k['victim']} killed: down everywhere after {fmt(k['detect_s_max'])} s (median "
                f"{fmt(k['detect_s_median'])}), reader {'ok' if k['reader']['ok'] else 'FAILED ' + k['reader']['error']}"
                f" (longest read after the kill {fmt(k['reader']['longest_read_after_kill_s'], '.3f')} s); "
                + (f"restarted: every node shows it up after {rj['up_s']:.2f} s, resident {rj['resident_s']:.2f} s"
                   if rj["ok"] else f"restarted: NOT back within {rj['bound_s']:.0f} s"))
            if k["rejoin"]["ok"]:
                r["stop"] = phase_stop(c)
                s = r["stop"]
                log(f"{n} nodes: rank {s['victim']} stopped: down everywhere after {fmt(s['detect_s_max'])} s "
                    f"(median {fmt(s['detect_s_median'])}), back {fmt(s['back_s'])} s after SIGCONT")
        return r
    finally:
        c.close()


# ---- report ------------------------------------------------------------------

def fmt(x, spec=".2f", none="-"):
    return none if x is None else format(x, spec)


def table(results):
    print("\nN = nodes (network namespaces, UCX over tcp, one machine: 2 cores shared by all daemons)")
    head = ("   N  form s  up s  from last  backend/ds  idle tx B/s  per peer  pkt/s/peer  CPU% med  max  daemons' cores  runnable"
            "  kill: down med/max s  reader  rejoin s  stop: down med/max s  views")
    print(head)
    for n, r in sorted(results.items(), key=lambda kv: int(kv[0])):
        f = r["form"]
        if not f["formed"]:
            i = r.get("idle", {})
            print(f"{int(n):4d}  not formed within {f['bound_s']:.0f} s ({f['formed_nodes']}/{n} nodes): {f['summary']}; "
                  f"idle CPU {fmt(i.get('cpu_pct_median'))}% med, daemons {fmt(i.get('daemons_cores'))} cores, "
                  f"{fmt(i.get('runnable_median'), '.0f')} tasks runnable")
            continue
        i, k, s, v = r["idle"], r.get("kill", {}), r.get("stop", {}), r["views"]
        rj = k.get("rejoin", {})
        print(f"{int(n):4d}  {f['form_s']:6.2f}  {f['all_up_s']:4.2f}  {f['form_from_last_start_s']:9.2f}  "
              f"{f['backend_bytes'] / r['dataset']['bytes']:10.3f}  {i['tx_bytes_s']:11,.0f}  {i['tx_bytes_s_per_peer']:8,.0f}  "
              f"{i['tx_packets_s_per_peer']:10.2f}  {i['cpu_pct_median']:8.2f}  {i['cpu_pct_max']:4.1f}  "
              f"{i['daemons_cores']:14.2f}  {fmt(i['runnable_median'], '.0f'):>8}  {fmt(k.get('detect_s_median')):>9}/{fmt(k.get('detect_s_max')):<6}     "
              f"{('ok' if k.get('reader', {}).get('ok') else 'FAIL') if k else '-':>6}  "
              f"{fmt(rj.get('resident_s')) if rj.get('ok', True) else 'FAIL':>8}  "
              f"{fmt(s.get('detect_s_median')):>9}/{fmt(s.get('detect_s_max')):<6}     {'ok' if v['ok'] else 'WRONG'}")
        if i.get("membership_per_s"):
            print(f"        membership counters per node per s (median): {i['membership_per_s']}")


def main():
    ap = cli.parser(__doc__, workdir="/tmp/dlfs-scale-bench", json="write every figure here (per node too)")
    ap.add_argument("--nodes", default="2,4,8,16,32", help="cluster sizes, comma-separated (at most 250)")
    ap.add_argument("--files", type=int, default=2048, help="dataset: this many files")
    ap.add_argument("--files-per-node", type=int, help="dataset: this many files a node (N x this), instead of --files: "
                    "every stripe the same size at every N, so what grows with N is the cluster's own work")
    ap.add_argument("--file-size", default="16K", help="dataset: of this size each (+-50%%)")
    ap.add_argument("--memory-budget", default="64M", help="each daemon's memory_budget")
    ap.add_argument("--extent-size", default="64K", help="extent_size: a stripe is whole extents")
    ap.add_argument("--idle", type=float, default=20.0, help="seconds of the idle measurement")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds after forming before the idle window")
    ap.add_argument("--form-timeout", type=float, default=300.0, help="bound on forming (then reported, not waited for)")
    ap.add_argument("--rejoin-timeout", type=float, default=120.0)
    ap.add_argument("--reader-s", type=float, default=4.0, help="the reader during the kill spreads its reads over this")
    ap.add_argument("--raw-samples", type=int, default=8, help="raw files each node reads and checks")
    ap.add_argument("--heartbeat-ms", type=int, help="[cluster] heartbeat_ms (default: dlfsd's, 500)")
    ap.add_argument("--down-after-ms", type=int, help="[cluster] down_after_ms (default: dlfsd's, 2000)")
    ap.add_argument("--watch-peers", type=int, help="[cluster] watch_peers (default: dlfsd's, 3; 0: every peer)")
    ap.add_argument("--poll", type=float, default=0.1, help="seconds between status polls")
    ap.add_argument("--tag", default=f"sc{os.getpid() % 100000}", help="namespaces are dlfs-TAG-N-n<i>")
    a = ap.parse_args()
    cli.require_root(ap, "network namespaces and FUSE mounts")
    a.dlfsd = cli.built(ap, a.build, "fs/dlfsd")
    sizes = [int(x) for x in a.nodes.split(",")]
    # Each daemon holds a few hundred sockets at 64 peers (two endpoints a peer each way).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 1 << 16)), hard))
    os.makedirs(a.workdir, exist_ok=True)
    a.token = os.path.join(a.workdir, "token")
    with open(os.open(a.token, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(os.urandom(32).hex())
    exit_on_signals()
    log(f"nodes {sizes}; dataset: " + (f"{a.files_per_node} files a node" if a.files_per_node else f"{a.files} files")
        + f" of {a.file_size} (+-50%)")
    results = {}
    params = {k: getattr(a, k) for k in ("files", "files_per_node", "file_size", "memory_budget", "extent_size", "idle", "settle",
                                         "form_timeout", "reader_s", "poll")}
    # dlfsd's defaults (fs/config/config.h) where no flag set them.
    params.update(heartbeat_ms=500 if a.heartbeat_ms is None else a.heartbeat_ms,
                  down_after_ms=2000 if a.down_after_ms is None else a.down_after_ms,
                  watch_peers=3 if a.watch_peers is None else a.watch_peers,
                  cores=os.cpu_count(), git=subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)),
                                                            "rev-parse", "--short", "HEAD"],
                                                           capture_output=True, text=True).stdout.strip())
    try:
        for n in sizes:
            results[str(n)] = run_n(a, n)
            if a.json:  # after every N: a long run interrupted keeps what it measured
                write_json(a.json, {"params": params, "runs": results})
    finally:
        if results:
            table(results)


if __name__ == "__main__":
    main()
