#!/usr/bin/env bash
# LMDB datasets through the mount (format lmdb): python3-lmdb opens the raw
# view read-only and sees the backend's records; every epoch view (tar,
# directory, index, and bin when all values have one size) serves the values
# in key order, whole-dataset and in rounds; a provenance sidecar made by
# dlfs-ctl is used; a stale one (one more commit) is refused and the daemon
# walks the tree instead; a sidecar that misplaces one overflow value past
# the open-time spot checks is caught by the read-time page-header check and
# corrected, with every byte still right; striped over two daemons (UCX shared
# memory), both serve every view with the other stripe from the peer.
source "$(dirname "$0")/lib.sh"
require_fuse
"$PYTHON" -c 'import lmdb' 2>/dev/null || skip "python3-lmdb is not installed (tools/install-deps.sh installs it)"
: "${LMDB_FORGE_SIDECAR:?LMDB_FORGE_SIDECAR must point at the lmdb_forge_sidecar test program}"
CHECK="$(dirname "$0")/check_views.py"

# make_db DIR N ORDER SIZES EVERY: N records with "%08d" keys, put in
# `sorted` or `shuffled` order, values of `mixed` sizes (in-leaf and overflow
# of 1-17 pages) or of one size (a number), a commit every EVERY puts.
make_db() {
  "$PYTHON" "$(dirname "$0")/lmdb_build.py" make "$@"
}

# same_records A B: python3-lmdb reads the same (key, value) pairs from both.
same_records() {
  "$PYTHON" "$(dirname "$0")/lmdb_check.py" same-records "$1" "$2" ||
    fail "python3-lmdb reads other records from $2 than from $1"
}

# 1. Shuffled insertion, mixed sizes: no sidecar, the tree is walked once.
make_db "$WORK/mixed" 1500 shuffled mixed 100
start_daemon "$WORK/mnt" "$WORK/d1.log" --backend "$WORK/mixed" --name m --format lmdb --seed 9
[ "$(stat_field "$WORK/mnt" 's["datasets"][0]["lmdb"]["locations_from"]')" = "tree walk" ] ||
  fail "without a sidecar the locations should come from a tree walk"
same_records "$WORK/mixed" "$WORK/mnt/m/raw"
"$PYTHON" "$CHECK" "$WORK/mnt" m "$WORK/mixed" --format lmdb --samples 1500 --epochs 0,1 --world-sizes 1,3 \
  --tar-tool || fail "views of a mixed-size LMDB dataset"
[ ! -e "$WORK/mnt/m/epochs/0/1/0.bin" ] || fail "values of several sizes must not get a .bin view"
stop_daemon "$DAEMON_PID" "$WORK/mnt"

# 2. Caffe-style build (APPEND, commit every 1000, one value size) with a
#    provenance sidecar from dlfs-ctl; rounds (R = 0.3) read chunks of it,
#    at most 2 backend reads at a time.
make_db "$WORK/fixed" 2600 sorted 3072 1000
"$DLFS_CTL" lmdb sidecar "$WORK/fixed" >"$WORK/sidecar.out" 2>&1 || { cat "$WORK/sidecar.out" >&2; fail "dlfs-ctl lmdb sidecar"; }
start_daemon "$WORK/mnt" "$WORK/d2.log" --backend "$WORK/fixed" --name f --format lmdb --seed 9 --shuffle-ratio 0.3 \
  --loader-threads 4 --backend-requests 2
[ "$(stat_field "$WORK/mnt" 's["datasets"][0]["lmdb"]["locations_from"]')" = "sidecar (provenance)" ] ||
  fail "the provenance sidecar was not used: $(stat_field "$WORK/mnt" 's["datasets"][0]["lmdb"]')"
[ "$(stat_field "$WORK/mnt" 's["datasets"][0]["lmdb"]["value_size"]')" = 3072 ] || fail "value size not reported"
"$PYTHON" "$CHECK" "$WORK/mnt" f "$WORK/fixed" --format lmdb --samples 2600 --epochs 0 --world-sizes 1,2 ||
  fail "views (bin included) of a fixed-size LMDB dataset in rounds"
peak=$(stat_field "$WORK/mnt" 's["datasets"][0]["backend_requests"]["peak"]')
[ "$peak" -ge 1 ] && [ "$peak" -le 2 ] || fail "backend requests in flight: peak $peak with a bound of 2"
stop_daemon "$DAEMON_PID" "$WORK/mnt"

# 3. One more commit after the sidecar was made: refused, named, walked.
"$PYTHON" "$(dirname "$0")/lmdb_build.py" put "$WORK/fixed" 99999999 --value-size 3072 --map-size $((1 << 34))
start_daemon "$WORK/mnt" "$WORK/d3.log" --backend "$WORK/fixed" --name f --format lmdb
[ "$(stat_field "$WORK/mnt" 's["datasets"][0]["lmdb"]["locations_from"]')" = "tree walk" ] ||
  fail "a stale sidecar must not be used"
grep -q "different database state" "$WORK/d3.log" || fail "the stale sidecar is not reported in the log"
grep -q "sidecar not used: .*different database state" <<<"$("$DLFS_CTL" --socket "$(ctl_socket "$WORK/mnt")" status)" ||
  fail "dlfs-ctl status should say why the sidecar was not used"
[ "$(stat_field "$WORK/mnt" 's["datasets"][0]["samples"]')" = 2601 ] || fail "the new record is missing"
"$PYTHON" "$CHECK" "$WORK/mnt" f "$WORK/fixed" --format lmdb --samples 2601 --epochs 0 --world-sizes 1 ||
  fail "views after a stale sidecar"
stop_daemon "$DAEMON_PID" "$WORK/mnt"

# 4. A sidecar that misplaces one overflow value by a page, with only the
#    first and last leaf spot-checked: the read check catches it, the daemon
#    walks the tree once, and every byte served is still right.
make_db "$WORK/big" 600 sorted mixed 50
bad=$("$LMDB_FORGE_SIDECAR" "$WORK/big") || fail "could not forge a sidecar"
cat >"$WORK/forged.toml" <<TOML
[[dataset]]
name = "b"
backend = "$WORK/big"
format = "lmdb"
lmdb_spot_checks = 0
TOML
start_daemon "$WORK/mnt" "$WORK/d4.log" --config "$WORK/forged.toml"
[ "$(stat_field "$WORK/mnt" 's["datasets"][0]["lmdb"]["locations_from"]')" = "sidecar (explicit)" ] ||
  fail "the forged sidecar should pass the open-time checks of the first and last leaf"
"$PYTHON" "$CHECK" "$WORK/mnt" b "$WORK/big" --format lmdb --samples 600 --epochs 0 --world-sizes 1,2 ||
  fail "a misplaced value was served with wrong bytes"
[ "$(stat_field "$WORK/mnt" 's["datasets"][0]["lmdb"]["repairs"]')" = 1 ] || fail "no repair after the failed check"
grep -q "record $bad" "$WORK/d4.log" || fail "the log does not name record $bad"
grep -q "value offsets corrected" "$WORK/d4.log" || fail "the correction is not logged"
grep -q "corrected from the tree 1x" <<<"$("$DLFS_CTL" --socket "$(ctl_socket "$WORK/mnt")" status)" ||
  fail "dlfs-ctl status should report the correction"
stop_daemon "$DAEMON_PID" "$WORK/mnt"

# 5. The mixed-size database striped over two daemons on this host (UCX over
#    shared memory): both serve every view right, the other stripe from the
#    peer's memory, nothing from the backend.
PB=$(free_port_base 2)
PEERS="127.0.0.1:$PB,127.0.0.1:$((PB + 1))"
make_token "$WORK/token"
export UCX_TLS=posix,cma,sysv,tcp UCX_WARN_UNUSED_ENV_VARS=n
for i in 0 1; do
  start_daemon "$WORK/c$i" "$WORK/c$i.log" --backend "$WORK/mixed" --name m --format lmdb --seed 9 \
    --extent-size 256K --peers "$PEERS" --rank "$i" --token-file "$WORK/token"
done
for _ in $(seq 1 300); do
  [ "$(stat_field "$WORK/c0" 's["cluster"]["all_resident"]')" = True ] &&
    [ "$(stat_field "$WORK/c1" 's["cluster"]["all_resident"]')" = True ] && break
  sleep 0.1
done
for i in 0 1; do
  "$PYTHON" "$CHECK" "$WORK/c$i" m "$WORK/mixed" --format lmdb --samples 1500 --epochs 0 --world-sizes 2 \
    --threads 4 >/dev/null || fail "node $i: views of a striped LMDB dataset"
  by=$(stat_field "$WORK/c$i" 's["datasets"][0]["bytes_by_source"]')
  [ "$(stat_field "$WORK/c$i" 's["datasets"][0]["bytes_by_source"]["backend"]')" = 0 ] &&
    [ "$(stat_field "$WORK/c$i" 's["datasets"][0]["bytes_by_source"]["remote"]')" -gt 0 ] ||
    fail "node $i: a resident striped LMDB dataset should be read from memory, local and remote: $by"
done
log "striped over two daemons: views right on both, the other stripe from the peer"
log "ok"
