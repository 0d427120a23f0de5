#!/usr/bin/env bash
# dlfsd's Prometheus endpoint (docs/metrics.md) with the real thing: two
# daemons of one job (UCX over shared memory on this host) serve /metrics on
# free loopback ports; `promtool check metrics` passes on both; Debian's
# prometheus, started here with its own config, data and port under $WORK,
# scrapes them, and its HTTP API shows up == 1 and the same figures as
# `dlfs-ctl stats --json` at a quiet moment (read bytes by source, FUSE
# reads and their latency count, peer gets). Every query of the Grafana
# dashboard (deploy/grafana-dlfs.json) uses only metrics dlfsd exports and
# returns data. Then abuse: wrong paths (404), other methods (405), a 1 MiB
# header, a client that sends half a request and waits (dropped after the
# timeout while a scrape beside it gets its answer at once); /metrics and
# the mount still answer afterwards. A taken or malformed metrics address
# stops dlfsd at start, naming metrics_address and the cause.
source "$(dirname "$0")/lib.sh"
require_fuse
command -v prometheus >/dev/null || skip "prometheus is not installed: run tools/install-deps.sh"
command -v promtool >/dev/null || skip "promtool is not installed: run tools/install-deps.sh"
command -v curl >/dev/null || skip "curl is not installed: run tools/install-deps.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
CHECK="$HERE/check_prometheus.py"
DASHBOARD="$HERE/../../deploy/grafana-dlfs.json"
REQUEST_TIMEOUT_S=5  # MetricsServer::kRequestTimeoutMs

# Ports: the cluster's two, the two metrics endpoints, Prometheus's, one to hold taken.
BASE=$(free_port_base 6)
CL0=$BASE CL1=$((BASE + 1)) M0=$((BASE + 2)) M1=$((BASE + 3)) PROM_PORT=$((BASE + 4)) TAKEN=$((BASE + 5))
PROM="http://127.0.0.1:$PROM_PORT"

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 240 --size 48K --size-jitter 0.5 --dirs 4 --seed 56 >/dev/null

# --- A bad address stops dlfsd before it mounts, naming the key and the cause. ---
mkdir -p "$WORK/mnt-bad"
rc=0
"$DLFSD" --mountpoint "$WORK/mnt-bad" --control-socket "$WORK/ctl-bad.sock" --backend "$WORK/data" \
  --metrics-address "127.0.0.1:notaport" >"$WORK/bad.log" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || { cat "$WORK/bad.log"; fail "a malformed metrics_address: exit $rc, wanted 2"; }
grep -q "metrics_address '127.0.0.1:notaport' is not valid" "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "the error does not name metrics_address"; }
"$PYTHON" -c 'import socket,sys,time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
print("held", flush=True); time.sleep(120)' "$TAKEN" >"$WORK/holder.out" 2>&1 &
HOLDER=$!
for _ in $(seq 1 50); do grep -q held "$WORK/holder.out" && break; sleep 0.1; done
rc=0
"$DLFSD" --mountpoint "$WORK/mnt-bad" --control-socket "$WORK/ctl-bad.sock" --backend "$WORK/data" \
  --metrics-address "$TAKEN" >"$WORK/taken.log" 2>&1 || rc=$?
kill "$HOLDER" 2>/dev/null || true
wait "$HOLDER" 2>/dev/null || true
[ "$rc" -eq 2 ] || { cat "$WORK/taken.log"; fail "a metrics port already taken: exit $rc, wanted 2"; }
grep -q "metrics_address '127.0.0.1:$TAKEN'.*Address already in use" "$WORK/taken.log" ||
  { cat "$WORK/taken.log"; fail "a taken port: the error does not name metrics_address and the cause"; }
if grep -q " $WORK/mnt-bad " /proc/mounts; then fail "dlfsd mounted although its metrics address failed"; fi
[ ! -e "$WORK/ctl-bad.sock" ] || fail "dlfsd left its control socket after failing to start"
log "bad metrics addresses refused at start: $(grep -o "metrics_address.*" "$WORK/taken.log" | head -1)"

# --- Two daemons of one job, each with its endpoint. ---
make_token "$WORK/token"
export UCX_TLS=posix,cma,sysv,tcp UCX_WARN_UNUSED_ENV_VARS=n
PEERS="127.0.0.1:$CL0,127.0.0.1:$CL1"
METRICS=("$M0" "$M1")
PIDS=()
for i in 0 1; do
  start_daemon "$WORK/mnt$i" "$WORK/d$i.log" --backend "$WORK/data" --name d --seed 5 --extent-size 256K \
    --memory-budget 1G --peers "$PEERS" --rank "$i" --token-file "$WORK/token" \
    --metrics-address "127.0.0.1:${METRICS[$i]}"
  PIDS[$i]=$DAEMON_PID
  grep -q "Prometheus metrics at http://127.0.0.1:${METRICS[$i]}/metrics" "$WORK/d$i.log" ||
    { cat "$WORK/d$i.log"; fail "node $i does not log its metrics address"; }
done
ctl() { local i=$1; shift; "$DLFS_CTL" --socket "$(ctl_socket "$WORK/mnt$i")" "$@"; }
for _ in $(seq 1 300); do
  [ "$(stat_field "$WORK/mnt0" 's["cluster"]["all_resident"] and s["cluster"]["peers_up"] == 1')" = True ] &&
    [ "$(stat_field "$WORK/mnt1" 's["cluster"]["all_resident"]')" = True ] && break
  sleep 0.1
done
[ "$(stat_field "$WORK/mnt0" 's["cluster"]["all_resident"]')" = True ] || fail "the two nodes never became resident"
ctl 0 status | grep -q "metrics: http://127.0.0.1:$M0/metrics" || { ctl 0 status; fail "dlfs-ctl status does not show the metrics URL"; }
[ "$(ctl 0 status --json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["metrics"]["address"])')" = "127.0.0.1:$M0" ] ||
  fail "status JSON does not report the metrics address"

# Reads through node 0: raw files (half of them node 1's stripe: peer gets) and an epoch view.
same_tree "$WORK/data" "$WORK/mnt0/d/raw"
cat "$WORK/mnt0/d/epochs/0/1/0.tar" >/dev/null
cat "$WORK/mnt1/d/raw/$(cd "$WORK/data" && find . -type f | LC_ALL=C sort | head -1)" >/dev/null

# --- What each endpoint serves passes promtool, with no complaint. ---
for i in 0 1; do
  curl -sS --max-time 10 -o "$WORK/metrics$i.txt" "http://127.0.0.1:${METRICS[$i]}/metrics" || fail "curl of node $i's /metrics failed"
  out=$(promtool check metrics <"$WORK/metrics$i.txt" 2>&1) || { echo "$out"; fail "promtool check metrics failed on node $i"; }
  [ -z "$out" ] || { echo "$out"; fail "promtool check metrics complained about node $i's exposition"; }
done
grep -q '^dlfs_read_bytes_total{dataset="d",source="peer"} [1-9]' "$WORK/metrics0.txt" ||
  { grep dlfs_read_bytes_total "$WORK/metrics0.txt"; fail "node 0 exports no bytes read from its peer"; }
log "promtool check metrics: clean on both nodes ($(grep -c '^# TYPE' "$WORK/metrics0.txt") families)"

# --- A real Prometheus scrapes both. ---
mkdir -p "$WORK/prometheus-data"
cat >"$WORK/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: dlfs
    static_configs:
      - targets: ["127.0.0.1:$M0", "127.0.0.1:$M1"]
EOF
promtool check config "$WORK/prometheus.yml" >/dev/null || fail "promtool rejects the scenario's own config"
stop_prometheus() {
  [ -n "${PROM_PID:-}" ] || return 0
  kill -TERM "$PROM_PID" 2>/dev/null || return 0
  for _ in $(seq 1 100); do kill -0 "$PROM_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$PROM_PID" 2>/dev/null || true
  wait "$PROM_PID" 2>/dev/null || true
  PROM_PID=
}
CLEANUP_HOOKS+=("stop_prometheus")
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/prometheus-data" \
  --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn >"$WORK/prometheus.log" 2>&1 &
PROM_PID=$!
"$PYTHON" "$CHECK" wait-ready "$PROM" || { cat "$WORK/prometheus.log"; fail "prometheus did not start"; }

# A quiet moment: nothing reads, the counters stand still (two stats 1 s apart agree).
figures() { ctl "$1" stats --json | "$PYTHON" -c 'import json,sys
s = json.load(sys.stdin); d = s["datasets"][0]
print(d["bytes_by_source"], s["fuse"]["requests"]["read"], s["fuse"]["requests"]["lookup"], s["cluster"]["gets"]["latency"]["count"])'; }
for _ in $(seq 1 20); do
  a0=$(figures 0) a1=$(figures 1)
  sleep 1
  [ "$a0" = "$(figures 0)" ] && [ "$a1" = "$(figures 1)" ] && break
done
QUIET=$(date +%s.%N)
ctl 0 stats --json >"$WORK/stats0.json"
ctl 1 stats --json >"$WORK/stats1.json"
"$PYTHON" "$CHECK" wait-scrape "$PROM" --after "$QUIET" --targets 2
"$PYTHON" "$CHECK" compare "$PROM" --instance "127.0.0.1:$M0" --stats "$WORK/stats0.json" --peer-gets
"$PYTHON" "$CHECK" compare "$PROM" --instance "127.0.0.1:$M1" --stats "$WORK/stats1.json"
# The stats taken then are still the stats now: nothing read behind the comparison's back.
[ "$a0" = "$(figures 0)" ] || fail "node 0's counters moved during the comparison"
log "Prometheus scraped both nodes: up == 1, and its figures equal dlfs-ctl stats"

# --- The Grafana dashboard: only exported metrics, and every query has data. ---
sleep 3  # a few more scrapes: rate() over the dashboard's window needs two samples at least
"$PYTHON" "$CHECK" dashboard "$PROM" --dashboard "$DASHBOARD" --metrics "$WORK/metrics0.txt" "$WORK/metrics1.txt"

# --- Abuse of the endpoint; it keeps serving, and so does the mount. ---
"$PYTHON" "$CHECK" abuse 127.0.0.1 "$M0" --timeout-s "$REQUEST_TIMEOUT_S"
kill -0 "${PIDS[0]}" || fail "node 0 died under the abuse"
same_tree "$WORK/data" "$WORK/mnt0/d/raw"
curl -sS --max-time 5 -o "$WORK/after.txt" "http://127.0.0.1:$M0/metrics" && grep -q '^dlfs_build_info' "$WORK/after.txt" ||
  fail "/metrics does not answer after the abuse"
"$PYTHON" "$CHECK" wait-scrape "$PROM" --after "$(date +%s.%N)" --targets 2
log "wrong paths, methods, a huge header and a slow client: answered or dropped; node 0 still serves"

stop_prometheus
for i in 0 1; do stop_daemon "${PIDS[$i]}" "$WORK/mnt$i"; done
log "ok"
