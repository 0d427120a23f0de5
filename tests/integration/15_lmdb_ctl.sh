#!/usr/bin/env bash
# dlfs-ctl lmdb (no daemon): ingest builds a database python3-lmdb reads back
# byte for byte (raw and Caffe Datum values, files and fixed sources) with a
# provenance sidecar; show and verify report it; one more commit makes the
# sidecar stale (verify fails naming both states) until `sidecar --force`
# makes a new one; a truncated sidecar or database and bad arguments get
# clear errors, never a crash.
source "$(dirname "$0")/lib.sh"
"$PYTHON" -c 'import lmdb' 2>/dev/null || skip "python3-lmdb is not installed (tools/install-deps.sh installs it)"
C=$DLFS_CTL
LMDB_CHECK="$(dirname "$0")/lmdb_check.py"
LMDB_BUILD="$(dirname "$0")/lmdb_build.py"

# expect_fail WHAT RC PATTERN CMD...: CMD exits with RC (1 failed, 2 usage;
# never a signal) and its stderr matches PATTERN.
expect_fail() {
  local what=$1 want=$2 pattern=$3; shift 3
  local rc=0
  "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
  [ "$rc" -ne 0 ] || fail "$what: should have failed"
  [ "$rc" -lt 128 ] || fail "$what: killed by a signal (exit $rc)"
  [ "$rc" -eq "$want" ] || { cat "$WORK/err" >&2; fail "$what: exit $rc, want $want"; }
  grep -qE -- "$pattern" "$WORK/err" || { cat "$WORK/err" >&2; fail "$what: message should match '$pattern'"; }
}

# form DIR: the sidecar form `lmdb show --json` reports, after checking that
# it matches.
form() {
  "$C" lmdb show --json "$1" | "$PYTHON" "$LMDB_CHECK" show-json - --sidecar-matches --print-form
}

# Reads every record with python3-lmdb and compares with the source files in
# canonical order; `datum` values are decoded (protobuf by hand) first.
check_files_db() {
  "$PYTHON" "$LMDB_CHECK" files "$@"
}

"$PYTHON" "$GEN_DATASET" files "$WORK/imgs" --count 300 --size 5K --size-jitter 0.5 --dirs 3 --seed 4 >/dev/null
grep -q "lock.mdb" <<<"$("$C" lmdb ingest --help)" || fail "ingest --help should explain lock.mdb"

# Raw values, Caffe-style commit interval: the provenance form, tiny.
"$C" lmdb ingest "$WORK/imgs" "$WORK/raw" -q >"$WORK/ingest.out" || fail "ingest (raw)"
grep -q "provenance form" "$WORK/ingest.out" || { cat "$WORK/ingest.out"; fail "ingest should store the provenance form"; }
check_files_db "$WORK/imgs" "$WORK/raw" raw || fail "python3-lmdb reads other values than the files"
"$C" lmdb show --json "$WORK/raw" >"$WORK/show.json" || fail "show --json"
"$PYTHON" "$LMDB_CHECK" show-json "$WORK/show.json" --records 300 --form provenance --fixed-bin no \
  --locations-from "sidecar (provenance)" --sidecar-bytes-below 1024 || fail "show --json reports the wrong database"
grep -q "^ok: 300 records, sidecar (provenance) matches the tree" <<<"$("$C" lmdb verify "$WORK/raw")" \
  || fail "verify of a fresh sidecar"

# Datum values, filename keys, a commit every 7, APPEND.
"$C" lmdb ingest "$WORK/imgs" "$WORK/datum" -q --value datum --keys index_name --commit-every 7 --append \
  >/dev/null || fail "ingest (datum)"
check_files_db "$WORK/imgs" "$WORK/datum" datum || fail "Datum records do not decode to the files"
"$C" lmdb verify "$WORK/datum" >/dev/null || fail "verify (datum)"

# Fixed records (CIFAR-10 style: 1 label byte + 3072 pixels) as Datum.
"$PYTHON" "$GEN_DATASET" fixed "$WORK/cifar" --records 500 --record-size 3073 --files 2 >/dev/null
"$C" lmdb ingest "$WORK/cifar" "$WORK/cdb" -q --format fixed --record-size 3073 --value datum --shape 3,32,32 \
  >/dev/null || fail "ingest (fixed, datum)"
"$PYTHON" "$LMDB_CHECK" fixed-datum "$WORK/cifar" "$WORK/cdb" --records 500 --record-size 3073 --shape 3,32,32 ||
  fail "fixed Datum records"
[ "$(form "$WORK/cdb")" = provenance ] || fail "fixed Datum build: provenance form expected"
"$C" lmdb show --json "$WORK/cdb" | "$PYTHON" "$LMDB_CHECK" show-json - --fixed-bin yes \
  || fail "fixed-size Datum values: the .bin view should be reported available"

# One more commit: the sidecar is stale; verify names both states.
"$PYTHON" "$LMDB_BUILD" put "$WORK/raw" 99999999 --value "late record" --map-size $((1 << 32))
expect_fail "verify of a stale sidecar" 1 "different database state.*txnid 1[^0-9].*txnid 2[^0-9]" \
  "$C" lmdb verify "$WORK/raw"
grep -q "NOT usable" <<<"$("$C" lmdb show "$WORK/raw")" || fail "show should say the stale sidecar is not usable"
expect_fail "sidecar without --force" 2 "exists" "$C" lmdb sidecar "$WORK/raw"
# Explicit offsets fit any database. (The search may also find a provenance
# here: 300 + 1 records in 2 transactions is an insert-only build.)
grep -q "explicit form" <<<"$("$C" lmdb sidecar --force --explicit "$WORK/raw")" || fail "sidecar --force --explicit"
[ "$(form "$WORK/raw")" = explicit ] || fail "sidecar --explicit should store the explicit form"
grep -q "^ok: 301 records, sidecar (explicit)" <<<"$("$C" lmdb verify "$WORK/raw")" || fail "verify after sidecar --force"
"$C" lmdb sidecar --force "$WORK/raw" >/dev/null || fail "sidecar --force"
grep -q "^ok: 301 records" <<<"$("$C" lmdb verify "$WORK/raw")" || fail "verify after sidecar --force (search)"
# A delete: no insert-only build explains it, so the search stores explicit.
"$PYTHON" "$LMDB_BUILD" delete "$WORK/raw" 00000100 --map-size $((1 << 32))
expect_fail "verify after a delete" 1 "different database state" "$C" lmdb verify "$WORK/raw"
"$C" lmdb sidecar --force "$WORK/raw" >"$WORK/sidecar.out" || fail "sidecar --force after a delete"
grep -q "explicit form" "$WORK/sidecar.out" || { cat "$WORK/sidecar.out"; fail "a delete should give the explicit form"; }
grep -q "no Caffe-style build replays" "$WORK/sidecar.out" || fail "sidecar should say why it stored explicit offsets"
grep -q "^ok: 300 records, sidecar (explicit) matches the tree" <<<"$("$C" lmdb verify "$WORK/raw")" \
  || fail "verify of the explicit sidecar"

# Damage: a truncated sidecar, a truncated database.
head -c 60 "$WORK/raw/data.mdb.dlfs" >"$WORK/short" && mv "$WORK/short" "$WORK/raw/data.mdb.dlfs"
expect_fail "verify of a truncated sidecar" 1 "data.mdb.dlfs: truncated" "$C" lmdb verify "$WORK/raw"
grep -q "NOT usable: .*truncated" <<<"$("$C" lmdb show "$WORK/raw")" || fail "show should explain the truncated sidecar"
cp -r "$WORK/datum" "$WORK/broken"
truncate -s 4096 "$WORK/broken/data.mdb"
expect_fail "show of a truncated database" 1 "broken/data.mdb" "$C" lmdb show "$WORK/broken"
expect_fail "sidecar of a directory without a database" 1 "data.mdb" "$C" lmdb sidecar "$WORK/imgs"

# Bad arguments.
expect_fail "ingest without a source" 2 "SRC|required" "$C" lmdb ingest
expect_fail "ingest of a missing source" 2 "not exist|No such" "$C" lmdb ingest "$WORK/nope" "$WORK/x"
expect_fail "record size that does not divide" 2 "3000-byte records" \
  "$C" lmdb ingest "$WORK/cifar" "$WORK/bad" --format fixed --record-size 3000
expect_fail "fixed without a record size" 2 "needs --record-size" \
  "$C" lmdb ingest "$WORK/cifar" "$WORK/bad" --format fixed
expect_fail "shape that does not fit" 2 "--shape 3,32,33" \
  "$C" lmdb ingest "$WORK/cifar" "$WORK/bad" --format fixed --record-size 3073 --value datum --shape 3,32,33
expect_fail "shape of a files dataset" 2 "--shape apply to --format fixed --value datum" \
  "$C" lmdb ingest "$WORK/imgs" "$WORK/bad" --shape 3,32,32
expect_fail "unknown value style" 2 "value" "$C" lmdb ingest "$WORK/imgs" "$WORK/bad" --value jpeg
expect_fail "DEST inside SRC" 2 "inside SRC" "$C" lmdb ingest "$WORK/imgs" "$WORK/imgs/db"
expect_fail "ingest over an existing database" 2 "exists.*--force" "$C" lmdb ingest "$WORK/imgs" "$WORK/datum"
[ ! -e "$WORK/bad/data.mdb" ] || fail "a refused ingest should not leave a database"
log "ok"
