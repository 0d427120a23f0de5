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
  "$C" lmdb show --json "$1" | "$PYTHON" -c '
import json, sys
s = json.load(sys.stdin)["sidecar"]
assert s["present"] and s["matches"], s
print(s["form"])'
}

# Reads every record with python3-lmdb and compares with the source files in
# canonical order; `datum` values are decoded (protobuf by hand) first.
check_files_db() {
  "$PYTHON" - "$@" <<'PY'
import lmdb, os, sys
src, db, mode = sys.argv[1], sys.argv[2], sys.argv[3]
paths = []
for root, dirs, files in os.walk(src):
    for f in files:
        paths.append(os.path.relpath(os.path.join(root, f), src))
paths.sort(key=lambda p: p.encode())
top = sorted({p.split("/")[0] for p in paths if "/" in p}, key=lambda p: p.encode())

def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1
        v |= (c & 0x7f) << s; s += 7
        if c < 0x80:
            return v, i

def datum(b):
    out, i = {}, 0
    while i < len(b):
        tag, i = varint(b, i)
        if tag & 7 == 2:
            n, i = varint(b, i)
            out[tag >> 3] = bytes(b[i:i + n]); i += n
        else:
            out[tag >> 3], i = varint(b, i)
    return out

env = lmdb.open(db, readonly=True, lock=False)
with env.begin() as txn:
    recs = [(bytes(k), bytes(v)) for k, v in txn.cursor()]
assert len(recs) == len(paths), f"{len(recs)} records for {len(paths)} files"
for i, ((k, v), p) in enumerate(zip(recs, paths)):
    want = open(os.path.join(src, p), "rb").read()
    if mode == "raw":
        assert k == b"%08d" % i, f"record {i}: key {k!r}"
        assert v == want, f"record {i} ({p}): value differs"
    else:
        assert k == (b"%08d_" % i) + p.encode(), f"record {i}: key {k!r}"
        d = datum(v)
        assert d[4] == want and d.get(7) == 1, f"record {i}: datum data/encoded wrong"
        assert d.get(5, 0) == (top.index(p.split("/")[0]) if "/" in p else 0), f"record {i}: label {d.get(5)}"
print(f"{len(recs)} records ok ({mode})")
PY
}

"$PYTHON" "$GEN_DATASET" files "$WORK/imgs" --count 300 --size 5K --size-jitter 0.5 --dirs 3 --seed 4 >/dev/null
"$C" lmdb ingest --help | grep -q "lock.mdb" || fail "ingest --help should explain lock.mdb"

# Raw values, Caffe-style commit interval: the provenance form, tiny.
"$C" lmdb ingest "$WORK/imgs" "$WORK/raw" -q >"$WORK/ingest.out" || fail "ingest (raw)"
grep -q "provenance form" "$WORK/ingest.out" || { cat "$WORK/ingest.out"; fail "ingest should store the provenance form"; }
check_files_db "$WORK/imgs" "$WORK/raw" raw || fail "python3-lmdb reads other values than the files"
"$C" lmdb show --json "$WORK/raw" >"$WORK/show.json" || fail "show --json"
"$PYTHON" - "$WORK/show.json" <<'PY' || fail "show --json reports the wrong database"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["records"] == 300, s["records"]
assert s["sidecar"]["present"] and s["sidecar"]["form"] == "provenance" and s["sidecar"]["matches"], s["sidecar"]
assert not s["fixed_size_bin_view"], "the files differ in size"
assert s["locations_from"] == "sidecar (provenance)", s["locations_from"]
assert s["sidecar"]["bytes"] < 1024, s["sidecar"]["bytes"]
PY
"$C" lmdb verify "$WORK/raw" | grep -q "^ok: 300 records, sidecar (provenance) matches the tree" \
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
"$PYTHON" - "$WORK/cifar" "$WORK/cdb" <<'PY' || fail "fixed Datum records"
import lmdb, os, sys
files = sorted(os.listdir(sys.argv[1]))
first = open(os.path.join(sys.argv[1], files[0]), "rb").read(3073)
env = lmdb.open(sys.argv[2], readonly=True, lock=False)
with env.begin() as txn:
    v = bytes(txn.get(b"00000000"))
    n = txn.stat()["entries"]
assert n == 500, n
# channels 3, height 32, width 32, data (3072 bytes), label
want = bytes([0x08, 3, 0x10, 32, 0x18, 32, 0x22, 0x80, 0x18]) + first[1:] + bytes([0x28]) + bytes([first[0]])
assert v == want or (first[0] >= 0x80 and v[:-2] == want[:-1]), "datum bytes differ"
PY
[ "$(form "$WORK/cdb")" = provenance ] || fail "fixed Datum build: provenance form expected"
"$C" lmdb show --json "$WORK/cdb" | "$PYTHON" -c 'import json,sys; assert json.load(sys.stdin)["fixed_size_bin_view"]' \
  || fail "fixed-size Datum values: the .bin view should be reported available"

# One more commit: the sidecar is stale; verify names both states.
"$PYTHON" -c '
import lmdb, sys
env = lmdb.open(sys.argv[1], map_size=1 << 32)
with env.begin(write=True) as txn:
    txn.put(b"99999999", b"late record")
env.close()' "$WORK/raw"
expect_fail "verify of a stale sidecar" 1 "different database state.*txnid 1[^0-9].*txnid 2[^0-9]" \
  "$C" lmdb verify "$WORK/raw"
"$C" lmdb show "$WORK/raw" | grep -q "NOT usable" || fail "show should say the stale sidecar is not usable"
expect_fail "sidecar without --force" 2 "exists" "$C" lmdb sidecar "$WORK/raw"
# Explicit offsets fit any database. (The search may also find a provenance
# here: 300 + 1 records in 2 transactions is an insert-only build.)
"$C" lmdb sidecar --force --explicit "$WORK/raw" | grep -q "explicit form" || fail "sidecar --force --explicit"
[ "$(form "$WORK/raw")" = explicit ] || fail "sidecar --explicit should store the explicit form"
"$C" lmdb verify "$WORK/raw" | grep -q "^ok: 301 records, sidecar (explicit)" || fail "verify after sidecar --force"
"$C" lmdb sidecar --force "$WORK/raw" >/dev/null || fail "sidecar --force"
"$C" lmdb verify "$WORK/raw" | grep -q "^ok: 301 records" || fail "verify after sidecar --force (search)"
# A delete: no insert-only build explains it, so the search stores explicit.
"$PYTHON" -c '
import lmdb, sys
env = lmdb.open(sys.argv[1], map_size=1 << 32)
with env.begin(write=True) as txn:
    assert txn.delete(b"00000100")
env.close()' "$WORK/raw"
expect_fail "verify after a delete" 1 "different database state" "$C" lmdb verify "$WORK/raw"
"$C" lmdb sidecar --force "$WORK/raw" >"$WORK/sidecar.out" || fail "sidecar --force after a delete"
grep -q "explicit form" "$WORK/sidecar.out" || { cat "$WORK/sidecar.out"; fail "a delete should give the explicit form"; }
grep -q "no Caffe-style build replays" "$WORK/sidecar.out" || fail "sidecar should say why it stored explicit offsets"
"$C" lmdb verify "$WORK/raw" | grep -q "^ok: 300 records, sidecar (explicit) matches the tree" \
  || fail "verify of the explicit sidecar"

# Damage: a truncated sidecar, a truncated database.
head -c 60 "$WORK/raw/data.mdb.dlfs" >"$WORK/short" && mv "$WORK/short" "$WORK/raw/data.mdb.dlfs"
expect_fail "verify of a truncated sidecar" 1 "data.mdb.dlfs: truncated" "$C" lmdb verify "$WORK/raw"
"$C" lmdb show "$WORK/raw" | grep -q "NOT usable: .*truncated" || fail "show should explain the truncated sidecar"
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
