#!/usr/bin/env bash
# ucx_baseline.sh: the UCX ceiling a DLFS remote read is compared with.
# Runs `ucx_perftest -t ucp_get` (the one-sided get DLFS uses for remote
# reads) between two processes and prints its bandwidth. See --help.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: tools/bench/ucx_baseline.sh [--tls tcp|shm|both] [--size 1M] [--iters N]
                                   [--mem user|ucx|both] [--outstanding N] [--repeat R]
                                   [--netns] [--json]

Measures UCX's one-sided get (ucx_perftest -t ucp_get) between a server and a
client process: the ceiling of what a DLFS remote read (ucp_get_nbx on the
owner's registered memory) can reach over the same transport. One line per
measurement:

  ucx_get tls=<tls> size=<bytes> bandwidth_MBps=<x> link=<netns|loopback> mem=<user|ucx> outstanding=<n>

  --tls tcp    UCX_TLS=tcp (UCX_NET_DEVICES=lo on the host, eth0 in --netns)
  --tls shm    UCX_TLS=sm,self: posix/sysv shared memory (and cma); with
               --netns the two processes are in different network namespaces,
               which do not separate memory, so this is shared memory too
  --tls both   tcp, then shm (default)
  --size S     bytes per get; K/M/G suffixes are powers of 1024 (default 1M)
  --iters N    gets measured (default 1000; warm-up: N/10 more)
  --mem user   (default) the buffers are plain malloc()ed memory registered
               with ucp_mem_map, as DLFS registers its own memory
               (UCX_ALLOC_PRIO=heap); over shm, UCX 1.13 then emulates the get
               with active messages through the posix FIFO
  --mem ucx    ucx_perftest's own choice: UCX allocates the buffers, in posix
               or sysv shared memory when shm transports are on, and a shm get
               becomes a memcpy from the mapped segment (a cache-hot copy
               at these sizes: an upper bound no registered buffer reaches)
  --mem both   both, one line each
  --outstanding N
               gets in flight at once (ucx_perftest -O; default 4). Over tcp,
               and over shm with --mem user, UCX emulates the get with active
               messages, so the *target* must progress; during a get test
               ucx_perftest's target progresses from its socket barrier,
               between poll()s of 1 ms. With 1 get in flight (ucx_perftest's
               own default) every get then costs ~1 ms more, whatever its size
               (8 bytes: 1.0 ms), an artefact of the tool (a DLFS target's
               progress thread reacts within 200 us) that caps a 1 MiB tcp get
               near 500 MB/s. With 2 or more in flight the gets stop paying it
               (measured: median 1 MiB tcp get 0.85 ms with -O 2..8, 1.95 ms
               with -O 1).
  --repeat R   run each measurement R times and report the median (default
               1); --json lists every run. The two processes poll: on a
               machine with few cores, or a busy one, expect noise (--json
               records the load average)
  --netns      server in node 0, client in node 1 of two network namespaces
               joined by a veth pair through a bridge
               (tests/integration/netns_lib.sh, tag ucxb<PID>, 10.213.0.0/24);
               needs root. Without it both processes run on this host and tcp
               goes over loopback.
  --json       print one JSON object instead of the lines
  Other UCX_* variables in the environment (e.g. UCX_TCP_TX_SEG_SIZE=64K)
  reach both processes; UCX_TLS, UCX_NET_DEVICES and UCX_ALLOC_PRIO are the
  script's.
  -h, --help   this text

bandwidth_MBps is ucx_perftest's "overall" bandwidth of its Final line:
total bytes / total time, in MB/s with MB = 2^20 bytes (as ucx_perftest
prints it). Every ucx_perftest runs under `timeout 60`; the server, the
namespaces and the temporary files are removed on exit, also on errors.
Addresses are exchanged over ucx_perftest's own TCP socket (a random free
port; on the host its server listens on all addresses for that moment, the
client connects to 127.0.0.1).
Exit status: 0 all measured, 1 a measurement failed, 2 usage, 77 --netns
impossible here (not root, no network namespaces, no UCX device in a node).
EOF
}

TLS=both SIZE_ARG=1M ITERS=1000 MEM=user OUTSTANDING=4 REPEAT=1 NETNS=0 JSON=0
while [ $# -gt 0 ]; do
  case $1 in
    --tls) TLS=${2:?--tls needs a value}; shift 2 ;;
    --tls=*) TLS=${1#*=}; shift ;;
    --size) SIZE_ARG=${2:?--size needs a value}; shift 2 ;;
    --size=*) SIZE_ARG=${1#*=}; shift ;;
    --iters) ITERS=${2:?--iters needs a value}; shift 2 ;;
    --iters=*) ITERS=${1#*=}; shift ;;
    --mem) MEM=${2:?--mem needs a value}; shift 2 ;;
    --mem=*) MEM=${1#*=}; shift ;;
    --outstanding) OUTSTANDING=${2:?--outstanding needs a value}; shift 2 ;;
    --outstanding=*) OUTSTANDING=${1#*=}; shift ;;
    --repeat) REPEAT=${2:?--repeat needs a value}; shift 2 ;;
    --repeat=*) REPEAT=${1#*=}; shift ;;
    --netns) NETNS=1; shift ;;
    --json) JSON=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "ucx_baseline.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

die_usage() { echo "ucx_baseline.sh: $*" >&2; exit 2; }
case $TLS in tcp) TLS_LIST=(tcp) ;; shm) TLS_LIST=(shm) ;; both) TLS_LIST=(tcp shm) ;; *) die_usage "--tls must be tcp, shm or both" ;; esac
case $MEM in user) MEM_LIST=(user) ;; ucx) MEM_LIST=(ucx) ;; both) MEM_LIST=(user ucx) ;; *) die_usage "--mem must be user, ucx or both" ;; esac
[[ $ITERS =~ ^[1-9][0-9]*$ ]] || die_usage "--iters must be a positive integer"
[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || die_usage "--repeat must be a positive integer"
[[ $OUTSTANDING =~ ^[1-9][0-9]*$ ]] || die_usage "--outstanding must be a positive integer"
if [[ $SIZE_ARG =~ ^([0-9]+)([KkMmGg]?)(i?B?)$ ]]; then
  SIZE=${BASH_REMATCH[1]}
  case ${BASH_REMATCH[2]} in [Kk]) SIZE=$((SIZE << 10)) ;; [Mm]) SIZE=$((SIZE << 20)) ;; [Gg]) SIZE=$((SIZE << 30)) ;; esac
else
  die_usage "--size must be a number of bytes with an optional K, M or G suffix, not '$SIZE_ARG'"
fi
[ "$SIZE" -ge 1 ] || die_usage "--size must be at least 1 byte"
WARMUP=$((ITERS / 10 > 0 ? ITERS / 10 : 1))

command -v ucx_perftest >/dev/null || { echo "ucx_baseline.sh: ucx_perftest not found (Debian: apt-get install ucx-utils)" >&2; exit 1; }
UCX_VERSION=$(ucx_info -v 2>/dev/null | sed -n 's/^# Version //p' | head -1)
LOADAVG=$(cut -d' ' -f1 /proc/loadavg)
# The script chooses these per measurement; any other UCX_* variable of the
# caller's environment reaches both processes (and is recorded in --json).
unset UCX_TLS UCX_NET_DEVICES UCX_ALLOC_PRIO
INHERITED=$(env | grep -E '^UCX_' | sort | tr '\n' ' ' | sed 's/ $//; s/\\/\\\\/g; s/"/\\"/g' || true)

TMP=$(mktemp -d /tmp/dlfs-ucx-baseline-XXXXXX)
SERVER_PID= CLIENT_PID=
NETNS_TAG=
cleanup() {
  local rc=$? p
  for p in $CLIENT_PID $SERVER_PID; do
    kill -TERM "$p" 2>/dev/null || true   # timeout passes it on to ucx_perftest
    wait "$p" 2>/dev/null || true
  done
  [ -n "$NETNS_TAG" ] && netns_down "$NETNS_TAG"
  rm -rf "$TMP"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

SERVER_WRAP=() CLIENT_WRAP=() SERVER_HOST=127.0.0.1 LINK=loopback TCP_DEV=lo
if [ $NETNS = 1 ]; then
  source "$(cd "$(dirname "$0")/../../tests/integration" && pwd)/netns_lib.sh"
  require_netns ucx
  NETNS_TAG="ucxb$$"
  netns_up "$NETNS_TAG" 2 || { echo "ucx_baseline.sh: could not build the namespaces" >&2; exit 1; }
  node_wrap 0
  SERVER_WRAP=("${NODE_WRAP[@]}")
  node_wrap 1
  CLIENT_WRAP=("${NODE_WRAP[@]}")
  SERVER_HOST=${NETNS_ADDRS[0]}
  LINK=netns
  TCP_DEV=eth0
fi

# free_port: a TCP port nothing listens on where the server runs.
free_port() {
  local p
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 40000))
    "${SERVER_WRAP[@]}" ss -Hltn "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return 0; }
  done
  echo "ucx_baseline.sh: no free port found" >&2
  return 1
}

# measure TLS MEM: one ucx_perftest pair; sets BW (MB/s) and LAT (usec per
# get: total time / gets), or
# returns 1 after printing the reason and the logs' tails.
measure() {
  # LC_ALL=C: the figures are parsed with a decimal point.
  local tls=$1 mem=$2 port attempt env=(LC_ALL=C UCX_WARN_UNUSED_ENV_VARS=n) ready
  case $tls in
    tcp) env+=(UCX_TLS=tcp "UCX_NET_DEVICES=$TCP_DEV") ;;
    shm) env+=(UCX_TLS=sm,self) ;;
  esac
  [ "$mem" = user ] && env+=(UCX_ALLOC_PRIO=heap)
  ENV_USED="${env[*]:2}"
  for attempt in 1 2 3; do
    port=$(free_port) || return 1
    : >"$TMP/server.log"
    "${SERVER_WRAP[@]}" env "${env[@]}" timeout -k 5 60 ucx_perftest -p "$port" >"$TMP/server.log" 2>&1 &
    SERVER_PID=$!
    ready=0
    for _ in $(seq 1 200); do
      # The server prints nothing until a client connects (its stdout is a
      # file), so readiness is its listening socket.
      if "${SERVER_WRAP[@]}" ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then ready=1; break; fi
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.05
    done
    [ $ready = 1 ] && break
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
  done
  if [ -z "$SERVER_PID" ]; then
    echo "ucx_baseline.sh: ucx_perftest server did not start listening (tls=$tls):" >&2
    tail -5 "$TMP/server.log" >&2
    return 1
  fi
  local crc=0
  # In the background, so that a signal runs the traps at once (bash defers
  # them while a foreground command runs).
  "${CLIENT_WRAP[@]}" env "${env[@]}" timeout -k 5 60 ucx_perftest "$SERVER_HOST" -p "$port" \
    -t ucp_get -s "$SIZE" -n "$ITERS" -w "$WARMUP" -O "$OUTSTANDING" >"$TMP/client.log" 2>&1 &
  CLIENT_PID=$!
  wait "$CLIENT_PID" || crc=$?
  CLIENT_PID=
  # The server ends with a successful client; give it 10 s, then stop it.
  if [ $crc -eq 0 ]; then
    for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  fi
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
  # Final: iters  lat50  lat_avg  lat_overall  bw_avg  bw_overall  rate_avg  rate_overall
  local final
  final=$(grep '^Final:' "$TMP/client.log" | tail -1 || true)
  if [ $crc -ne 0 ] || [ -z "$final" ]; then
    echo "ucx_baseline.sh: ucx_perftest failed (tls=$tls mem=$mem link=$LINK, exit $crc):" >&2
    local f
    for f in client server; do
      { grep -E 'ERROR|WARN|rror' "$TMP/$f.log" || tail -3 "$TMP/$f.log"; } | head -4 | sed "s/^/  $f: /" >&2
    done
    return 1
  fi
  BW=$(awk '{print $7}' <<<"$final")
  LAT=$(awk '{print $5}' <<<"$final")
}

# median NUMBERS...: the median (the mean of the middle two for an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {printf "%.2f\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

RESULTS=() FAILED=0
for tls in "${TLS_LIST[@]}"; do
  for mem in "${MEM_LIST[@]}"; do
    bws=() lats=() ok=1
    for ((r = 0; r < REPEAT; r++)); do
      if measure "$tls" "$mem"; then bws+=("$BW"); lats+=("$LAT"); else ok=0; break; fi
    done
    if [ $ok = 0 ]; then FAILED=1; continue; fi
    bw=$(median "${bws[@]}")
    lat=$(median "${lats[@]}")
    if [ $JSON = 1 ]; then
      RESULTS+=("$(printf '{"test": "ucp_get", "tls": "%s", "ucx_env": "%s", "size": %d, "iters": %d, "warmup": %d, "bandwidth_MBps": %s, "us_per_get": %s, "runs_bandwidth_MBps": [%s], "link": "%s", "mem": "%s", "outstanding": %d}' \
        "$tls" "$ENV_USED" "$SIZE" "$ITERS" "$WARMUP" "$bw" "$lat" "$(IFS=,; echo "${bws[*]}" | sed 's/,/, /g')" "$LINK" "$mem" "$OUTSTANDING")")
    else
      echo "ucx_get tls=$tls size=$SIZE bandwidth_MBps=$bw link=$LINK mem=$mem outstanding=$OUTSTANDING"
    fi
  done
done
if [ $JSON = 1 ]; then
  printf '{"tool": "ucx_perftest", "ucx_version": "%s", "MB": 1048576, "cpus": %d, "loadavg_1min_at_start": %s, "ucx_env_inherited": "%s", "results": [' \
    "${UCX_VERSION:-unknown}" "$(nproc)" "$LOADAVG" "$INHERITED"
  for i in "${!RESULTS[@]}"; do
    [ "$i" -gt 0 ] && printf ', '
    printf '%s' "${RESULTS[$i]}"
  done
  printf ']}\n'
fi
exit $FAILED
