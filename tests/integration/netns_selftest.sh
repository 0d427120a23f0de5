#!/usr/bin/env bash
# Self-test of netns_lib.sh (run as root; exits 77 where namespaces cannot be
# built). Brings up 3 nodes and checks: that UCX's tcp transport (if
# installed) sees eth0 in every node at once; the address plan; that no interface of
# the run appears in the host's namespace; TCP between nodes through the bridge
# (a python3 listener in n1, clients in n0 and n2); that in_node changes the
# network namespace only (a tmpfs mounted through in_node is visible in the
# host's /proc/mounts, one mounted through `ip netns exec` is not); node_wrap's
# $! is the process itself; netns_down removes every namespace and interface
# (and is idempotent), also with a process left running in a node.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/netns_lib.sh"
PY=/usr/bin/python3

fail() { echo "FAIL: $*" >&2; exit 1; }
log() { echo "[netns_selftest] $*"; }

require_netns
[ -x "$PY" ] || { echo "SKIP: $PY not installed"; exit 77; }

TAG="st$$"
SHORT=$(_netns_short "$TAG")   # the <S> of the lib's interface names
TMP=$(mktemp -d "/tmp/dlfs-netns-selftest-XXXXXX")
BG=()
cleanup() {
  local rc=$? m p
  for p in "${BG[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for m in "$TMP/mnt-nsenter" "$TMP/mnt-ipnetns"; do
    grep -q " $m " /proc/mounts && umount "$m" 2>/dev/null || true
  done
  netns_down "$TAG"
  rm -rf "$TMP"
  exit $rc
}
trap cleanup EXIT

netns_up "$TAG" 3 || fail "netns_up failed"
# At once after netns_up, UCX (when installed) in each node sees eth0.
if command -v ucx_info >/dev/null && [ -e /sys/class/net/eth0 ]; then
  for i in 0 1 2; do
    out=$(in_node "$i" env UCX_TLS=tcp UCX_NET_DEVICES=eth0 UCX_WARN_UNUSED_ENV_VARS=n ucx_info -e -u t 2>&1) || true
    grep -q "tcp/eth0" <<<"$out" || fail "UCX in node $i does not see eth0: $(grep -m2 -E 'WARN|ERROR' <<<"$out")"
  done
  log "UCX (tcp) sees eth0 in every node"
fi
[ ${#NETNS_NAMES[@]} = 3 ] && [ ${#NETNS_ADDRS[@]} = 3 ] || fail "NETNS_NAMES/NETNS_ADDRS do not have 3 entries"
[ "$NETNS_HUB" = "dlfs-$TAG-hub" ] || fail "NETNS_HUB is '$NETNS_HUB'"

# The address plan, lo up, one default-less /24 on eth0.
for i in 0 1 2; do
  [ "${NETNS_NAMES[$i]}" = "dlfs-$TAG-n$i" ] || fail "node $i is named ${NETNS_NAMES[$i]}"
  [ "${NETNS_ADDRS[$i]}" = "10.213.0.$((i + 1))" ] || fail "node $i has address ${NETNS_ADDRS[$i]}"
  got=$(in_node "$i" ip -4 -o addr show dev eth0 | awk '{print $4}')
  [ "$got" = "10.213.0.$((i + 1))/24" ] || fail "node $i: eth0 has '$got'"
  in_node "$i" ip -o link show lo | grep -q "UP" || fail "node $i: lo is not up"
  [ -z "$(in_node "$i" ip route show default)" ] || fail "node $i has a default route"
done
[ "$(ip netns exec "$NETNS_HUB" ip -o link show type bridge | wc -l)" = 1 ] || fail "the hub has no bridge"
[ "$(ip -n "$NETNS_HUB" -o link show master "dl${SHORT}br" | wc -l)" = 3 ] || fail "the bridge does not have 3 ports"
if ip -o link | grep -q "dl$SHORT"; then fail "interfaces of this run appear in the host's namespace"; fi
[ "$(readlink /proc/self/ns/net)" != "$(in_node 0 readlink /proc/self/ns/net)" ] || fail "in_node 0 is in the host's network namespace"
[ "$(in_node 0 readlink /proc/self/ns/net)" != "$(in_node 1 readlink /proc/self/ns/net)" ] || fail "nodes 0 and 1 share a network namespace"
log "addresses ok: ${NETNS_ADDRS[*]}"

# TCP through the bridge: a listener on n1's address answers clients in n0 and n2.
PORT=$((20000 + RANDOM % 20000))
node_wrap 1
"${NODE_WRAP[@]}" "$PY" "$HERE/tcp_echo.py" serve "${NETNS_ADDRS[1]}" "$PORT" "$TMP/ready" --clients 2 --timeout 30 &
SERVER=$!
BG+=("$SERVER")
for _ in $(seq 1 100); do [ -e "$TMP/ready" ] && break; sleep 0.05; done
[ -e "$TMP/ready" ] || fail "the listener in n1 did not start"
[ "$(readlink "/proc/$SERVER/ns/net")" = "$(in_node 1 readlink /proc/self/ns/net)" ] || fail "node_wrap: \$! is not the listener in n1"
# The listener exists in n1 only: not in the host's namespace, not in n0's.
if ss -Hltn "sport = :$PORT" | grep -q .; then fail "the listener of n1 is visible in the host's namespace"; fi
in_node 1 ss -Hltn "sport = :$PORT" | grep -q "${NETNS_ADDRS[1]}:$PORT" || fail "ss in n1 does not show the listener"
for i in 0 2; do
  reply=$(in_node "$i" "$PY" "$HERE/tcp_echo.py" ask "${NETNS_ADDRS[1]}" "$PORT" --message olleh --timeout 5) || fail "node $i could not talk to node 1"
  [ "$reply" = "hello from ${NETNS_ADDRS[$i]}" ] || fail "node $i got '$reply' from node 1"
done
wait "$SERVER" || fail "the listener in n1 failed"
log "TCP n0 -> n1 and n2 -> n1 ok (the listener is invisible from the host)"

# in_node changes the network namespace only: its mounts are the host's.
mkdir -p "$TMP/mnt-nsenter" "$TMP/mnt-ipnetns"
in_node 0 mount -t tmpfs -o size=1M "dlfs-selftest-$$" "$TMP/mnt-nsenter" || fail "mount through in_node failed"
grep -q "^dlfs-selftest-$$ $TMP/mnt-nsenter tmpfs" /proc/mounts || fail "a tmpfs mounted through in_node is not in the host's /proc/mounts"
echo x >"$TMP/mnt-nsenter/f"
[ "$(in_node 2 cat "$TMP/mnt-nsenter/f")" = x ] || fail "node 2 does not see node 0's mount"
umount "$TMP/mnt-nsenter" || fail "cannot unmount the tmpfs from the host"
# ... while `ip netns exec` mounts land in a private mount namespace.
inside=$(ip netns exec "${NETNS_NAMES[0]}" sh -c "mount -t tmpfs -o size=1M dlfs-selftest-ipx-$$ '$TMP/mnt-ipnetns' && grep -c ' $TMP/mnt-ipnetns ' /proc/self/mounts")
[ "$inside" = 1 ] || fail "ip netns exec: the tmpfs is not visible even inside"
if grep -q " $TMP/mnt-ipnetns " /proc/mounts; then fail "ip netns exec's mount leaked to the host (the contrast this test relies on is gone)"; fi
log "mounts: in_node's tmpfs visible on the host, ip netns exec's not"

# Teardown, with a process left in n2: nothing of the run may remain.
NS_INODES=$(for i in 0 1 2; do in_node "$i" readlink /proc/self/ns/net; done; ip netns exec "$NETNS_HUB" readlink /proc/self/ns/net)
node_wrap 2
"${NODE_WRAP[@]}" sleep 300 &
STRAY=$!
BG+=("$STRAY")
sleep 0.1
netns_down "$TAG" 2>"$TMP/down.err"
grep -q "processes still in dlfs-$TAG" "$TMP/down.err" || fail "netns_down did not report the process left in n2"
wait "$STRAY" 2>/dev/null || true
if ip netns list | grep -q "^dlfs-$TAG-"; then fail "namespaces remain: $(ip netns list | grep "^dlfs-$TAG-" | tr '\n' ' ')"; fi
if ls /var/run/netns/ | grep -q "^dlfs-$TAG-"; then fail "bind mounts remain in /var/run/netns"; fi
if ip -o link | grep -q "dl$SHORT"; then fail "interfaces remain"; fi
# No namespace of the run survives in any process (one could hold it open).
for p in /proc/[0-9]*/ns/net; do
  ino=$(readlink "$p" 2>/dev/null) || continue
  if grep -qxF "$ino" <<<"$NS_INODES"; then fail "process ${p#/proc/} still holds a namespace of the run ($ino)"; fi
done
[ ${#NETNS_NAMES[@]} = 0 ] || fail "NETNS_NAMES not cleared"
netns_down "$TAG" || fail "a second netns_down failed"
netns_down "never-made-$$" || fail "netns_down of an unknown tag failed"
log "teardown ok: no dlfs-$TAG namespace, bind mount or interface remains"

# netns_up refuses a tag that is in use, and cleans up after itself on failure.
netns_up "$TAG" 1 || fail "netns_up (1 node) failed"
if netns_up "$TAG" 1 2>"$TMP/dup.err"; then fail "netns_up accepted a tag in use"; fi
grep -q "already exists" "$TMP/dup.err" || fail "no clear reason for a tag in use: $(cat "$TMP/dup.err")"
netns_down "$TAG"
if netns_up "bad/tag" 1 2>/dev/null; then fail "netns_up accepted a tag with a slash"; fi
if netns_up "x$$" 251 2>/dev/null; then fail "netns_up accepted 251 nodes"; fi
if ip netns list | grep -q "^dlfs-\(x$$\|$TAG\)-"; then fail "refused netns_up calls left namespaces"; fi
log "ok"
