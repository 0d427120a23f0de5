# Network namespaces as cluster "nodes" (sourced, not run).
#
# Scenarios that need several DLFS nodes talking over a real network stack
# (UCX over tcp, not over loopback) build them here: N network namespaces
# joined by veth pairs through a Linux bridge that lives in a namespace of its
# own, so nothing is added to, and no traffic leaves through, the host's
# network. Callers `set -euo pipefail`; the functions below check every step
# themselves and return non-zero with a reason, because `set -e` is off inside
# a function called as `netns_up ... || fail ...`.
#
# Names and addresses (TAG is the caller's: its PID, or a tag of its own, so
# that parallel runs never collide):
#   dlfs-TAG-n0 .. dlfs-TAG-n{N-1}   the nodes (network namespaces)
#   dlfs-TAG-hub                     the hub: one bridge, the nodes' peer ends
#   node i: eth0 = 10.213.0.$((i+1))/24 (so N <= 250); lo up everywhere
#   in the hub: bridge dl<S>br, ports dl<S>h<i>, where <S> is TAG itself when
#   it has at most 8 characters, else an 8-hex-digit checksum of it (interface
#   names are limited to 15 characters).
# Both ends of every veth pair are created directly inside their namespaces
# (`ip link add ... netns A type veth peer ... netns B`): no interface ever
# appears in the host's namespace, even for a moment, and deleting the
# namespaces deletes every interface this made.
#
# UCX in a node (found with UCX 1.13, Debian 12):
#   - UCX_TLS=tcp UCX_NET_DEVICES=eth0. UCX_TLS must exclude shared memory:
#     namespaces separate networks, not memory, so with posix/sysv/cma allowed
#     two "nodes" talk through shared memory and no byte crosses the veth.
#   - UCX's tcp transport lists its devices from /sys/class/net, and under
#     nsenter --net that is still the *host's* sysfs (sysfs shows the network
#     namespace of whoever mounted it): UCX sees a node interface only if the
#     host has an interface of the same name. Node interfaces are named eth0
#     for that reason; on a host without an eth0, UCX in a node finds no
#     device ("network device 'eth0' is not available"): `require_netns ucx`
#     skips then.
#   - UCX checks IFF_RUNNING, which the kernel sets up to a second after a veth
#     comes up (linkwatch); netns_up waits until every eth0 is operationally up.
#
# Functions: require_netns [ucx], netns_up TAG N, netns_down TAG, in_node I CMD...,
# node_wrap I, ucx_cluster_up TAG N PORT.
# After netns_up: NETNS_NAMES[i] (namespace of node i), NETNS_ADDRS[i] (its
# address, no prefix length), NETNS_HUB, NETNS_TAG (plain shell arrays and
# variables: bash cannot export arrays to child processes).

NETNS_NAMES=()
NETNS_ADDRS=()
NETNS_HUB=
NETNS_TAG=
NETNS_DIR=/var/run/netns   # where `ip netns add` puts its bind mounts

# require_netns [ucx]: exits 77 (the "skipped" code of meson and of lib.sh)
# with a one-line reason unless this machine can run netns_up: root, `ip
# netns`, nsenter, and veth and bridge devices. Probes by building and deleting
# a throwaway namespace with a veth pair and a bridge. With "ucx", also unless
# UCX's tcp transport can see a node's eth0 (the host must have an eth0: see
# the header).
require_netns() {
  local why= probe="dlfs-probe-$$-${RANDOM}" err
  if [ "$(id -u)" -ne 0 ]; then
    why="network namespaces need root"
  elif ! command -v ip >/dev/null; then
    why="ip (iproute2) not installed"
  elif ! command -v nsenter >/dev/null; then
    why="nsenter (util-linux) not installed"
  elif ! err=$(ip netns add "$probe" 2>&1); then
    why="ip netns add does not work here: ${err//$'\n'/ }"
  else
    if ! err=$(ip -n "$probe" link add dlfsprobe0 type veth peer name dlfsprobe1 2>&1); then
      why="cannot create veth devices: ${err//$'\n'/ }"
    elif ! err=$(ip -n "$probe" link add dlfsprobebr type bridge 2>&1); then
      why="cannot create bridge devices: ${err//$'\n'/ }"
    elif ! err=$(ip -n "$probe" link set dlfsprobe1 master dlfsprobebr 2>&1); then
      why="cannot attach a veth to a bridge: ${err//$'\n'/ }"
    elif ! [ -e "$NETNS_DIR/$probe" ]; then
      why="ip netns does not keep its namespaces in $NETNS_DIR (nsenter needs them there)"
    fi
    ip netns del "$probe" 2>/dev/null || true
  fi
  if [ -z "$why" ] && [ "${1:-}" = ucx ] && ! [ -e /sys/class/net/eth0 ]; then
    why="the host has no eth0: UCX (tcp) lists devices from the host's /sys/class/net and would not see a node's eth0"
  fi
  if [ -n "$why" ]; then
    echo "SKIP: $why"
    exit 77
  fi
}

# _netns_short TAG: the <S> of the interface names (see the header).
_netns_short() {
  if [ ${#1} -le 8 ]; then
    echo "$1"
  else
    printf '%08x\n' "$(printf '%s' "$1" | cksum | cut -d' ' -f1)"
  fi
}

# _netns_do WHAT CMD...: runs CMD; on failure prints "netns_up: WHAT: <error>"
# to stderr and returns 1.
_netns_do() {
  local what=$1 err rc=0
  shift
  err=$("$@" 2>&1) || rc=$?
  if [ $rc -ne 0 ]; then
    echo "netns_up: $what: ${err:-exit status $rc} (command: $*)" >&2
    return 1
  fi
}

# _netns_reachable NODE_NS ADDR: whether ADDR answers from inside NODE_NS.
# With ping (iputils-ping): one echo request, 3 tries of 1 s. Without it: a TCP
# connection attempt to port 9 of ADDR, which nothing listens on in a fresh
# namespace: the peer's kernel answering with a reset ("Connection refused")
# proves the round trip as well as an echo reply does; an unreachable peer
# gives "No route to host" after ARP fails, or the timeout.
_netns_reachable() {
  local ns=$1 addr=$2 try out
  for try in 1 2 3; do
    if command -v ping >/dev/null; then
      nsenter --net="$NETNS_DIR/$ns" -- ping -n -c1 -W1 "$addr" >/dev/null 2>&1 && return 0
    else
      out=$(nsenter --net="$NETNS_DIR/$ns" -- timeout 2 bash -c "exec 3<>/dev/tcp/$addr/9" 2>&1) && return 0
      case $out in *refused*) return 0 ;; esac
    fi
    sleep 0.2
  done
  return 1
}

# netns_up TAG N: builds N nodes and the hub (see the header), checks that
# node 0 reaches every other node, and sets NETNS_NAMES, NETNS_ADDRS, NETNS_HUB,
# NETNS_TAG. On any failure: prints the reason, removes what it built, returns 1.
# Pair it with a trap that runs `netns_down TAG` (e.g. lib.sh's CLEANUP_HOOKS),
# registered before calling it.
netns_up() {
  local tag=${1:?usage: netns_up TAG N} n=${2:?usage: netns_up TAG N}
  local s hub br i ns hport
  if ! [[ $tag =~ ^[A-Za-z0-9_.-]+$ ]] || [ ${#tag} -gt 40 ]; then
    echo "netns_up: tag '$tag' must be 1-40 characters of [A-Za-z0-9_.-]" >&2
    return 1
  fi
  if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 250 ]; then
    echo "netns_up: N must be 1..250 (10.213.0.1 .. 10.213.0.250), not '$n'" >&2
    return 1
  fi
  s=$(_netns_short "$tag")
  hub="dlfs-$tag-hub"
  br="dl${s}br"
  for ns in "$hub" $(for ((i = 0; i < n; i++)); do echo "dlfs-$tag-n$i"; done); do
    if [ -e "$NETNS_DIR/$ns" ]; then
      echo "netns_up: namespace $ns already exists (another run with tag '$tag', or a leftover: netns_down $tag)" >&2
      return 1
    fi
  done
  NETNS_NAMES=()
  NETNS_ADDRS=()
  NETNS_HUB=$hub
  NETNS_TAG=$tag

  _netns_do "creating hub namespace $hub" ip netns add "$hub" || { netns_down "$tag"; return 1; }
  _netns_do "bringing up lo in $hub" ip -n "$hub" link set lo up || { netns_down "$tag"; return 1; }
  _netns_do "creating bridge $br in $hub" ip -n "$hub" link add "$br" type bridge || { netns_down "$tag"; return 1; }
  _netns_do "bringing up bridge $br" ip -n "$hub" link set "$br" up || { netns_down "$tag"; return 1; }
  for ((i = 0; i < n; i++)); do
    ns="dlfs-$tag-n$i"
    hport="dl${s}h$i"
    _netns_do "creating node namespace $ns" ip netns add "$ns" || { netns_down "$tag"; return 1; }
    NETNS_NAMES+=("$ns")
    NETNS_ADDRS+=("10.213.0.$((i + 1))")
    _netns_do "bringing up lo in $ns" ip -n "$ns" link set lo up || { netns_down "$tag"; return 1; }
    _netns_do "creating veth pair eth0@$ns <-> $hport@$hub" \
      ip link add eth0 netns "$ns" type veth peer name "$hport" netns "$hub" || { netns_down "$tag"; return 1; }
    _netns_do "attaching $hport to $br" ip -n "$hub" link set "$hport" master "$br" || { netns_down "$tag"; return 1; }
    _netns_do "bringing up $hport" ip -n "$hub" link set "$hport" up || { netns_down "$tag"; return 1; }
    _netns_do "addressing eth0 in $ns" ip -n "$ns" addr add "10.213.0.$((i + 1))/24" dev eth0 || { netns_down "$tag"; return 1; }
    _netns_do "bringing up eth0 in $ns" ip -n "$ns" link set eth0 up || { netns_down "$tag"; return 1; }
  done
  # Operationally up (IFF_RUNNING, what UCX checks) can lag `ip link set up`
  # by up to a second (seen here: UCX started right after netns_up without
  # this wait found no eth0). On Linux 6.18 the first `ip link show` already
  # reports it up, and UCX sees it from then on.
  for ((i = 0; i < n; i++)); do
    local tries=0
    until ip -n "${NETNS_NAMES[$i]}" -o link show dev eth0 2>/dev/null | grep -q "state UP"; do
      if [ $((++tries)) -gt 100 ]; then
        echo "netns_up: eth0 in ${NETNS_NAMES[$i]} did not come up within 5 s: $(ip -n "${NETNS_NAMES[$i]}" -o link show dev eth0 2>&1)" >&2
        netns_down "$tag"
        return 1
      fi
      sleep 0.05
    done
  done
  for ((i = 1; i < n; i++)); do
    if ! _netns_reachable "${NETNS_NAMES[0]}" "${NETNS_ADDRS[$i]}"; then
      echo "netns_up: node 0 (${NETNS_ADDRS[0]}) cannot reach node $i (${NETNS_ADDRS[$i]}) through bridge $br in $hub" >&2
      netns_down "$tag"
      return 1
    fi
  done
}

# netns_down TAG: deletes the namespaces of netns_up TAG (and with them every
# veth and the bridge). Idempotent and silent when nothing is there. A
# namespace outlives `ip netns del` while a process still runs in it (its
# interfaces too), so processes still inside these namespaces are sent SIGTERM,
# then SIGKILL after 2 s, with a warning naming them: stop your daemons (and
# unmount their FUSE mounts) before calling this.
netns_down() {
  local tag=${1:?usage: netns_down TAG} ns pids=() p i
  local names=()
  [ -d "$NETNS_DIR" ] || return 0
  local rest
  for ns in "$NETNS_DIR"/dlfs-"$tag"-*; do
    ns=${ns##*/}
    rest=${ns#"dlfs-$tag-"}
    [[ $rest =~ ^(hub|n[0-9]+)$ ]] && names+=("$ns")
  done
  for ns in "${names[@]}"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do pids+=("$p"); done
  done
  if [ ${#pids[@]} -gt 0 ]; then
    echo "netns_down: processes still in dlfs-$tag-*: ${pids[*]}; terminating them" >&2
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for ((i = 0; i < 20; i++)); do
      local alive=0
      for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
      [ $alive = 0 ] && break
      sleep 0.1
    done
    kill -KILL "${pids[@]}" 2>/dev/null || true
  fi
  for ns in "${names[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  if [ "$NETNS_TAG" = "$tag" ]; then
    NETNS_NAMES=()
    NETNS_ADDRS=()
    NETNS_HUB=
    NETNS_TAG=
  fi
  return 0
}

# in_node I CMD...: runs CMD in node I's network namespace and nothing else.
# Deliberately nsenter --net, not `ip netns exec`: ip netns exec also unshares
# the mount namespace (to bind-mount /etc/netns/NAME/* and remount /sys), so a
# FUSE mount made by a daemon started that way would be invisible to the host,
# to the test, and to the other nodes. nsenter --net keeps the caller's mount
# namespace, /sys and /etc: only the network stack changes.
# nsenter execs CMD without forking, but `in_node 0 dlfsd ... &` runs in a
# subshell (in_node is a function), so its $! is that subshell's PID, not the
# daemon's; to start a background process whose PID you need, use node_wrap.
in_node() {
  local i=${1:?usage: in_node I CMD...}
  shift
  if ! [[ $i =~ ^[0-9]+$ ]] || [ "$i" -ge ${#NETNS_NAMES[@]} ]; then
    echo "in_node: no node $i (netns_up made ${#NETNS_NAMES[@]})" >&2
    return 1
  fi
  nsenter --net="$NETNS_DIR/${NETNS_NAMES[$i]}" -- "$@"
}

# node_wrap I: sets NODE_WRAP to the command prefix of in_node, as an array:
# `"${NODE_WRAP[@]}" dlfsd ... &` makes $! the daemon's own PID (lib.sh's
# DAEMON_WRAP takes exactly this: `node_wrap 1; DAEMON_WRAP=("${NODE_WRAP[@]}")`).
node_wrap() {
  local i=${1:?usage: node_wrap I}
  if ! [[ $i =~ ^[0-9]+$ ]] || [ "$i" -ge ${#NETNS_NAMES[@]} ]; then
    echo "node_wrap: no node $i (netns_up made ${#NETNS_NAMES[@]})" >&2
    return 1
  fi
  NODE_WRAP=(nsenter --net="$NETNS_DIR/${NETNS_NAMES[$i]}" --)
}

# ucx_cluster_up TAG N PORT: what a cluster scenario does before starting its daemons. Builds the
# namespaces (netns_up; netns_down TAG registered in lib.sh's CLEANUP_HOOKS first, and a failure
# fails the test), sets PEER_ADDRS[i] to node i's "address:PORT" and exports the UCX settings the
# header explains (tcp over each node's eth0).
ucx_cluster_up() {
  local tag=${1:?usage: ucx_cluster_up TAG N PORT} n=${2:?usage: ucx_cluster_up TAG N PORT}
  local port=${3:?usage: ucx_cluster_up TAG N PORT} i
  CLEANUP_HOOKS+=("netns_down $tag")
  netns_up "$tag" "$n" || fail "could not build the namespaces"
  PEER_ADDRS=()
  for i in $(seq 0 $((n - 1))); do PEER_ADDRS+=("${NETNS_ADDRS[$i]}:$port"); done
  export UCX_TLS=tcp UCX_NET_DEVICES=eth0 UCX_WARN_UNUSED_ENV_VARS=n
}
