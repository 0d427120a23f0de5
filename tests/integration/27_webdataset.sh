#!/usr/bin/env bash
# WebDataset shards (format "tar") on a real mount: shards written by Python's
# tarfile (pax with a non-ASCII and a >100-byte name, GNU) read through the
# Python client with PyTorch DataLoaders (2 workers) for W = 2 and two
# epochs: every key once per epoch with its members' bytes, in a per-sample
# shuffle across shards. A shard with a broken header, and a truncated one,
# make dlfsd refuse the dataset naming the shard and the byte offset;
# `dlfs-ctl verify` finds the resident bytes equal to the shards; `dlfs-ctl
# tar show` lists the shards and names every bad one.
source "$(dirname "$0")/lib.sh"
require_fuse
"$PYTHON" -c 'import torch' 2>/dev/null || skip "python3-torch is not installed"
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
CHECK="$(dirname "$0")/check_webdataset.py"

"$PYTHON" "$CHECK" make "$WORK/shards" || fail "making the shards"
echo "not a shard" >"$WORK/shards/README"
start_daemon "$WORK/mnt" "$WORK/d.log" --backend "$WORK/shards" --name wds --format tar --group-by first-dot \
  --seed 21 --world-size 2
wait_loaded "$WORK/mnt"
PYTHONPATH="$SRC/python" "$PYTHON" "$CHECK" check "$WORK/mnt/wds" "$WORK/shards" || fail "WebDataset through views"
samples=$(stat_field "$WORK/mnt" 's["datasets"][0]["samples"]')
"$DLFS_CTL" --socket "$(ctl_socket "$WORK/mnt")" verify >"$WORK/verify.txt" ||
  { cat "$WORK/verify.txt" >&2; fail "dlfs-ctl verify of the resident shards"; }
stop_daemon "$DAEMON_PID" "$WORK/mnt"
"$DLFS_CTL" tar show --json "$WORK/shards" >"$WORK/show.json" || fail "dlfs-ctl tar show on good shards"
"$PYTHON" - "$WORK/show.json" "$samples" <<'PY' || fail "dlfs-ctl tar show's counts"
import json, sys
j = json.load(open(sys.argv[1]))
t = j["total"]
assert t["shards"] == 8 and t["bad_shards"] == 0, t
assert t["samples"] == int(sys.argv[2]) == 320, (t, sys.argv[2])
assert all(s["skipped"] == 1 and s["members"] > s["samples"] for s in j["shards"]), j["shards"]
PY

# expect_refused WHAT BACKEND TEXT: dlfsd exits non-zero with TEXT in its output.
expect_refused() {
  local what=$1 backend=$2 want=$3 out rc=0
  mkdir -p "$WORK/mnt2"
  out=$(timeout 30 "$DLFSD" --mountpoint "$WORK/mnt2" --control-socket "$WORK/ctl2.sock" --backend "$backend" \
    --format tar --group-by first-dot 2>&1) || rc=$?
  [ "$rc" -ne 0 ] || fail "$what: dlfsd started"
  grep -qF "$want" <<<"$out" || { echo "$out" >&2; fail "$what: no '$want' in dlfsd's output"; }
  log "refused as expected ($what): $(grep -F "$want" <<<"$out" | tail -1)"
}
cp -r "$WORK/shards" "$WORK/bad"
read -r at _ < <("$PYTHON" "$CHECK" header-offset "$WORK/bad/shard-0003.tar" s3/sample0004.cls)
printf 'Z' | dd of="$WORK/bad/shard-0003.tar" bs=1 seek=$((at + 10)) conv=notrunc status=none
broken="tar shard 'shard-0003.tar' at byte $at: header checksum does not match"
read -r at size < <("$PYTHON" "$CHECK" header-offset "$WORK/bad/shard-0005.tar" s5/sample0010.jpg)
[ "$size" -gt 100 ] || fail "the truncated member must have more than 100 bytes, has $size"
truncate -s $((at + 600)) "$WORK/bad/shard-0005.tar"
truncated="tar shard 'shard-0005.tar' at byte $at: member of $size bytes runs past the end of the shard"
rc=0
"$DLFS_CTL" tar show "$WORK/bad" >"$WORK/bad.txt" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || { cat "$WORK/bad.txt" >&2; fail "dlfs-ctl tar show exited $rc on bad shards, not 1"; }
grep -qF "$broken" "$WORK/bad.txt" && grep -qF "$truncated" "$WORK/bad.txt" && grep -q "8 shards (2 bad)" "$WORK/bad.txt" ||
  { cat "$WORK/bad.txt" >&2; fail "dlfs-ctl tar show does not name both bad shards"; }
expect_refused "broken header" "$WORK/bad" "$broken"
cp "$WORK/shards/shard-0003.tar" "$WORK/bad/shard-0003.tar"
expect_refused "truncated shard" "$WORK/bad" "$truncated"
log "ok"
