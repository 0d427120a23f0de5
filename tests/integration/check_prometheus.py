#!/usr/bin/env python3
"""Checks for 56_prometheus.sh: dlfsd's /metrics, a real Prometheus scraping it,
and the Grafana dashboard in deploy/.

  check_prometheus.py wait-ready PROM_URL
  check_prometheus.py wait-scrape PROM_URL --after UNIX_TIME --targets N
  check_prometheus.py compare PROM_URL --instance HOST:PORT --stats STATS_JSON [--peer-gets]
  check_prometheus.py abuse METRICS_HOST METRICS_PORT --timeout-s S
  check_prometheus.py dashboard PROM_URL --dashboard FILE --metrics EXPOSITION...

Only loopback addresses are ever contacted. Every wait is bounded.
"""
import argparse
import json
import re
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from checklib import fail


def http_get(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


def query(prom, expr, at=None):
    """The result vector of an instant query (a list of {metric, value})."""
    params = {"query": expr}
    if at is not None:
        params["time"] = repr(at)
    url = prom + "/api/v1/query?" + urllib.parse.urlencode(params)
    try:
        _, body = http_get(url)
    except urllib.error.HTTPError as e:
        fail(f"Prometheus refused the query {expr!r}: {e.code} {e.read().decode(errors='replace')}")
    doc = json.loads(body)
    if doc.get("status") != "success":
        fail(f"query {expr!r}: {doc}")
    if doc["data"]["resultType"] != "vector":
        fail(f"query {expr!r}: a {doc['data']['resultType']}, not a vector")
    return doc["data"]["result"]


def cmd_wait_ready(a):
    deadline = time.time() + 60
    last = None
    while time.time() < deadline:
        try:
            status, _ = http_get(a.prom + "/-/ready", timeout=2)
            if status == 200:
                print("prometheus ready")
                return
        except (urllib.error.URLError, ConnectionError, OSError) as e:
            last = e
        time.sleep(0.2)
    fail(f"Prometheus at {a.prom} not ready within 60 s ({last})")


def cmd_wait_scrape(a):
    """Until every dlfs target was scraped (up == 1) after `after`."""
    deadline = time.time() + 60
    result = []
    while time.time() < deadline:
        result = query(a.prom, 'timestamp(up{job="dlfs"} == 1)')
        fresh = [r for r in result if float(r["value"][1]) > a.after]
        if len(fresh) >= a.targets:
            print(f"{len(fresh)} targets scraped after the quiet moment")
            return
        time.sleep(0.25)
    fail(f"fewer than {a.targets} targets up and scraped after {a.after} within 60 s: {result}")


def one_value(prom, expr):
    result = query(prom, expr)
    if len(result) != 1:
        fail(f"{expr}: {len(result)} series, wanted 1: {result}")
    return float(result[0]["value"][1])


def cmd_compare(a):
    """The scraped counters equal the stats taken at the same quiet moment."""
    stats = json.load(open(a.stats))
    inst = a.instance
    up = one_value(a.prom, f'up{{job="dlfs",instance="{inst}"}}')
    if up != 1:
        fail(f"up{{instance={inst}}} is {up}")
    ds = stats["datasets"][0]
    name = ds["name"]
    checks = []
    for source, key in (("memory", "local"), ("peer", "remote"), ("backend", "backend")):
        checks.append((f'dlfs_read_bytes_total{{instance="{inst}",dataset="{name}",source="{source}"}}',
                       ds["bytes_by_source"][key]))
    requests = stats["fuse"]["requests"]
    checks += [
        (f'dlfs_fuse_requests_total{{instance="{inst}",op="read"}}', requests["read"]),
        (f'dlfs_fuse_requests_total{{instance="{inst}",op="lookup"}}', requests["lookup"]),
        # Nothing in flight at a quiet moment: every request counted was timed.
        (f'dlfs_fuse_request_duration_seconds_count{{instance="{inst}",op="read"}}', requests["read"]),
        (f'dlfs_fuse_request_duration_seconds_count{{instance="{inst}",op="read"}}',
         stats["fuse"]["latency"]["read"]["count"]),
        (f'dlfs_view_reads_total{{instance="{inst}",dataset="{name}",view="raw"}}', ds["views"]["raw"]["requests"]),
        (f'dlfs_view_read_bytes_total{{instance="{inst}",dataset="{name}",view="raw"}}', ds["views"]["raw"]["bytes"]),
        (f'dlfs_view_reads_total{{instance="{inst}",dataset="{name}",view="epochs"}}',
         ds["views"]["epochs"]["requests"]),
        (f'dlfs_memory_resident_bytes{{instance="{inst}",dataset="{name}"}}', ds["resident_bytes"]),
        (f'dlfs_dataset_bytes{{instance="{inst}",dataset="{name}"}}', ds["total_bytes"]),
        (f'dlfs_memory_budget_bytes{{instance="{inst}"}}', stats["memory"]["budget_bytes"]),
        (f'dlfs_cluster_size{{instance="{inst}"}}', stats["cluster"]["size"]),
        (f'dlfs_peer_get_duration_seconds_count{{instance="{inst}"}}', stats["cluster"]["gets"]["latency"]["count"]),
    ]
    if stats["fuse"]["requests"]["read"] == 0:
        fail("no FUSE reads counted: the scenario read nothing?")
    if a.peer_gets and stats["cluster"]["gets"]["latency"]["count"] == 0:
        fail("no peer get timed on a node that read the other node's stripe")
    for expr, want in checks:
        got = one_value(a.prom, expr)
        if got != float(want):
            fail(f"{expr} = {got} in Prometheus, {want} in dlfs-ctl stats")
    members_up = one_value(a.prom, f'dlfs_cluster_members{{instance="{inst}",state="up"}}')
    if members_up != stats["cluster"]["peers_up"]:
        fail(f"members up {members_up}, stats peers_up {stats['cluster']['peers_up']}")
    print(f"{inst}: {len(checks) + 2} figures in Prometheus equal dlfs-ctl stats "
          f"(reads {requests['read']}, peer gets {stats['cluster']['gets']['latency']['count']})")


# ---- abuse of the endpoint ----

def raw_request(host, port, data, timeout=10.0):
    """Sends `data`, returns (status or None, headers text, body, error)."""
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError) as e:
            return None, "", b"", e  # refused while still sending: closed on us
        chunks = []
        try:
            while True:
                c = s.recv(65536)
                if not c:
                    break
                chunks.append(c)
        except ConnectionResetError as e:
            if not chunks:
                return None, "", b"", e
        except socket.timeout as e:
            return None, "", b"".join(chunks), e
        raw = b"".join(chunks)
    finally:
        s.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    m = re.match(rb"HTTP/1\.[01] (\d{3})", head)
    return (int(m.group(1)) if m else None), head.decode(errors="replace"), body, None


def get(host, port, path="/metrics", method="GET"):
    return raw_request(host, port, f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())


def cmd_abuse(a):
    h, p = a.host, a.port
    status, head, body, err = get(h, p)
    if status != 200 or b"dlfs_build_info" not in body:
        fail(f"GET /metrics: {status} {err} {head!r}")
    if "text/plain; version=0.0.4" not in head:
        fail(f"GET /metrics: not the exposition's content type: {head!r}")
    status, head, body, err = get(h, p, method="HEAD")
    if status != 200 or body:
        fail(f"HEAD /metrics: {status}, {len(body)} body bytes")
    status, head, body, err = get(h, p, "/")
    if status != 200 or b'href="/metrics"' not in body:
        fail(f"GET /: {status} {body!r}")
    for path in ("/nope", "/metrics/x", "/metricsx", "/../etc/passwd", "/%2e%2e/etc/passwd"):
        status, head, body, err = get(h, p, path)
        if status != 404:
            fail(f"GET {path}: {status}, wanted 404 ({err})")
    for method in ("POST", "PUT", "DELETE"):
        status, head, body, err = get(h, p, method=method)
        if status != 405 or "Allow: GET, HEAD" not in head:
            fail(f"{method} /metrics: {status}, wanted 405 with Allow ({head!r})")
    print("404 for other paths, 405 for other methods, / links to /metrics")

    # A 1 MiB header: an HTTP error, or the connection closed on it; never the metrics.
    big = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    t0 = time.time()
    status, head, body, err = raw_request(h, p, big)
    if status is not None and not 400 <= status < 500:
        fail(f"a 1 MiB header got {status}")
    if status is None and err is None and body:
        fail(f"a 1 MiB header got an answer that is not HTTP: {body[:100]!r}")
    if isinstance(err, socket.timeout):
        fail("a 1 MiB header: the server neither answered nor closed within 10 s")
    outcome = str(status) if status else (f"connection closed ({type(err).__name__})" if err else "closed")
    print(f"a 1 MiB header: {outcome} in {time.time() - t0:.2f} s")

    # Half a request, then silence: dropped after the request timeout, while
    # another client gets its answer at once.
    slow = socket.create_connection((h, p), timeout=30)
    slow.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # no blank line: the header never ends
    t_slow = time.time()
    time.sleep(0.3)  # the slow one holds a worker now
    results = {}

    def good():
        t = time.time()
        results["status"] = get(h, p)[0]
        results["took"] = time.time() - t

    g = threading.Thread(target=good)
    g.start()
    g.join(10)
    if results.get("status") != 200:
        fail(f"a scrape beside a slow client: {results}")
    if results["took"] > 2.0:
        fail(f"a scrape beside a slow client took {results['took']:.2f} s")
    data = b""
    try:
        while True:
            c = slow.recv(65536)
            if not c:
                break
            data += c
    except ConnectionResetError:
        pass
    except socket.timeout:
        fail("a client that sent half a request was not dropped within 30 s")
    dropped = time.time() - t_slow
    slow.close()
    first_line = data.split(b"\r\n", 1)[0].decode(errors="replace")
    if " 200 " in first_line:
        fail("half a request was answered 200")
    if dropped > a.timeout_s + 5:
        fail(f"a client that sent half a request was dropped after {dropped:.1f} s (timeout {a.timeout_s} s)")
    print(f"half a request: dropped after {dropped:.1f} s ({first_line or 'closed'}); "
          f"a scrape meanwhile took {results['took'] * 1000:.0f} ms")

    status, head, body, err = get(h, p)
    if status != 200 or b"dlfs_build_info" not in body:
        fail(f"GET /metrics after the abuse: {status} {err}")
    print("GET /metrics answers after all of it")


# ---- the Grafana dashboard ----

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless",
            "inf", "nan", "atan2"}


def metric_names(expr):
    """The metric names a PromQL expression selects (functions, keywords,
    label matchers, grouping labels, durations and strings left out)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)        # strings
    e = re.sub(r"\{[^}]*\}", " ", e)                      # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)                     # ranges and subqueries
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        word = m.group(0)
        rest = e[m.end():].lstrip()
        if rest.startswith("("):
            continue  # a function
        if word.lower() in KEYWORDS:
            continue
        if m.start() > 0 and (e[m.start() - 1].isdigit() or e[m.start() - 1] in "$."):
            continue  # 1e5, $var
        names.add(word)
    return names


def panels_of(dashboard):
    for p in dashboard.get("panels", []):
        yield p
        for q in p.get("panels", []):  # collapsed rows
            yield q


def exported_names(paths):
    names = set()
    for path in paths:
        for line in open(path):
            if line.startswith("#") or not line.strip():
                continue
            names.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    return names


def grafana_to_promql(expr):
    """Grafana's variables as a plain query would have them."""
    e = expr.replace("$__rate_interval", "30s").replace("${__rate_interval}", "30s")
    e = e.replace("$__interval", "5s").replace("${__interval}", "5s")
    return re.sub(r"\$\{?(instance|dataset)\}?", ".*", e)


def cmd_dashboard(a):
    d = json.load(open(a.dashboard))
    exported = exported_names(a.metrics)
    if not exported:
        fail("no metric names in " + " ".join(a.metrics))
    exprs = []
    for p in panels_of(d):
        if p.get("type") == "row":
            continue
        targets = p.get("targets", [])
        if not targets:
            fail(f"panel {p.get('title')!r} has no query")
        for t in targets:
            if "expr" not in t:
                fail(f"panel {p.get('title')!r}: a target without expr: {t}")
            exprs.append((p.get("title"), t["expr"]))
    used = set()
    for title, expr in exprs:
        names = metric_names(expr)
        if not names:
            fail(f"panel {title!r}: no metric in {expr!r}")
        unknown = names - exported
        if unknown:
            fail(f"panel {title!r}: {sorted(unknown)} not exported by dlfsd ({expr})")
        used |= names
    for v in d.get("templating", {}).get("list", []):
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else (q or "")
        for name in re.findall(r"\b(dlfs_[a-z0-9_]+|process_[a-z0-9_]+)", q):
            if name not in exported:
                fail(f"variable {v.get('name')!r}: {name} not exported by dlfsd")
    # Every query returns data from the Prometheus that scraped the daemons.
    empty = []
    for title, expr in exprs:
        if not query(a.prom, grafana_to_promql(expr)):
            empty.append(f"{title}: {expr}")
    if empty:
        fail("queries that return no data:\n  " + "\n  ".join(empty))
    print(f"dashboard: {len(exprs)} queries in {sum(1 for p in panels_of(d) if p.get('type') != 'row')} panels, "
          f"{len(used)} metrics, all exported by dlfsd and all returning data")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("wait-ready")
    s.add_argument("prom")
    s = sub.add_parser("wait-scrape")
    s.add_argument("prom")
    s.add_argument("--after", type=float, required=True)
    s.add_argument("--targets", type=int, required=True)
    s = sub.add_parser("compare")
    s.add_argument("prom")
    s.add_argument("--instance", required=True)
    s.add_argument("--stats", required=True)
    s.add_argument("--peer-gets", action="store_true")
    s = sub.add_parser("abuse")
    s.add_argument("host")
    s.add_argument("port", type=int)
    s.add_argument("--timeout-s", type=float, required=True)
    s = sub.add_parser("dashboard")
    s.add_argument("prom")
    s.add_argument("--dashboard", required=True)
    s.add_argument("--metrics", nargs="+", required=True)
    a = ap.parse_args()
    if a.cmd not in ("abuse",) and not a.prom.startswith("http://127.0.0.1:"):
        fail("only a Prometheus on loopback is queried")
    if a.cmd == "abuse" and not a.host.startswith("127."):
        fail("only loopback is abused")
    {"wait-ready": cmd_wait_ready, "wait-scrape": cmd_wait_scrape, "compare": cmd_compare, "abuse": cmd_abuse,
     "dashboard": cmd_dashboard}[a.cmd](a)


if __name__ == "__main__":
    main()
