#!/usr/bin/env bash
# TFRecord datasets through the mount (format tfrecord): files written and
# parsed by tfrecord_check.py (python3-crcmod's CRC32C, not DLFS's). Every
# rank's .tfrecord view parses as TFRecord with every CRC right, the ranks
# together hold each source record exactly once, and each rank's .tar holds
# the same records in the same order: records located by a scan, then by the
# DALI indexes `dlfs-ctl tfrecord index` writes, in rounds, then striped over
# two daemons. A record whose
# data was damaged makes reads of it fail with EIO, the log naming file and
# offset, never wrong bytes; `dlfs-ctl tfrecord verify` names it too, and a
# damaged length field is reported with its file and offset (and refused by
# dlfsd, unless tfrecord_skip_bad_files leaves the file out).
source "$(dirname "$0")/lib.sh"
require_fuse
"$PYTHON" -c 'import crcmod.predefined' 2>/dev/null ||
  skip "python3-crcmod is not installed (tools/install-deps.sh installs it)"
TF="$(dirname "$0")/tfrecord_check.py"
SRC="$WORK/src"
"$PYTHON" "$TF" make "$SRC" 3 200 7

# dlfs-ctl on the files: 600 records found by a scan, every CRC right.
"$DLFS_CTL" tfrecord show "$SRC" >"$WORK/show.out" || fail "dlfs-ctl tfrecord show"
grep -q "^3 TFRecord files, 600 records" "$WORK/show.out" || { cat "$WORK/show.out"; fail "show's totals"; }
grep -q "located by a scan" "$WORK/show.out" || fail "without indexes show should say the records are scanned"
grep -q "^600 records in 3 TFRecord files: every length and data CRC matches" <<<"$("$DLFS_CTL" tfrecord verify "$SRC")" ||
  fail "dlfs-ctl tfrecord verify on good files"

# 1. Located by a scan; whole-dataset epochs.
start_daemon "$WORK/mnt" "$WORK/d1.log" --backend "$SRC" --name t --format tfrecord --seed 5
grep -q "600 records in 3 TFRecord files (0 located by their .idx, 3 by a scan)" "$WORK/d1.log" ||
  fail "the load should report a scan of the 3 files"
for ew in "0 2" "1 1" "3 3"; do
  "$PYTHON" "$TF" views "$WORK/mnt" t "$SRC" $ew || fail "views of epoch/W $ew"
done
stop_daemon "$DAEMON_PID" "$WORK/mnt"

# 2. DALI indexes from dlfs-ctl; epochs in rounds (R = 0.3); the daemon's
#    verify compares what it holds with the backend.
grep -q "^wrote 3 indexes" <<<"$("$DLFS_CTL" tfrecord index "$SRC")" || fail "dlfs-ctl tfrecord index"
[ "$(wc -l <"$SRC/train-00000-of-00003.idx")" = 200 ] || fail "an index has a line per record"
"$DLFS_CTL" tfrecord show "$SRC" | grep -c "located by its .idx" | grep -qx 3 || fail "show should use the indexes"
start_daemon "$WORK/mnt" "$WORK/d2.log" --backend "$SRC" --name t --format tfrecord --seed 5 --shuffle-ratio 0.3
grep -q "(3 located by their .idx, 0 by a scan)" "$WORK/d2.log" || fail "the indexes were not used"
for ew in "0 2" "2 1"; do
  "$PYTHON" "$TF" views "$WORK/mnt" t "$SRC" $ew || fail "views of epoch/W $ew in rounds"
done
wait_loaded "$WORK/mnt"
"$DLFS_CTL" --socket "$(ctl_socket "$WORK/mnt")" verify >"$WORK/verify.out" || { cat "$WORK/verify.out"; fail "dlfs-ctl verify"; }
stop_daemon "$DAEMON_PID" "$WORK/mnt"

# 3. One record's data damaged (its index still tiles the file): EIO for the
#    rank whose view holds it, the log naming file and offset; dlfs-ctl
#    tfrecord verify names it and fails.
cp -r "$SRC" "$WORK/bad"
off=$("$PYTHON" "$TF" corrupt "$WORK/bad" train-00001-of-00003 7)
where="$WORK/bad/train-00001-of-00003: record at byte $off"
if "$DLFS_CTL" tfrecord verify "$WORK/bad" >"$WORK/bad.out" 2>&1; then fail "verify passed a damaged record"; fi
grep -q "^$where: the data's CRC does not match" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "verify's report"; }
start_daemon "$WORK/mnt" "$WORK/d3.log" --backend "$WORK/bad" --name t --format tfrecord --seed 5
"$PYTHON" "$TF" expect-eio "$WORK/mnt" t 2 || fail "reads of the damaged record"
grep -q "$where: the data's CRC does not match" "$WORK/d3.log" || fail "the log does not name the damaged record"
stop_daemon "$DAEMON_PID" "$WORK/mnt"

# 4. Striped over two daemons on this host (UCX over shared memory): both
#    serve every view right, the other stripe from the peer's memory.
PB=$(free_port_base 2)
PEERS="127.0.0.1:$PB,127.0.0.1:$((PB + 1))"
make_token "$WORK/token"
export UCX_TLS=posix,cma,sysv,tcp UCX_WARN_UNUSED_ENV_VARS=n
for i in 0 1; do
  start_daemon "$WORK/c$i" "$WORK/c$i.log" --backend "$SRC" --name t --format tfrecord --seed 5 \
    --extent-size 256K --peers "$PEERS" --rank "$i" --token-file "$WORK/token"
  NODE_PID[$i]=$DAEMON_PID
done
for _ in $(seq 1 300); do
  [ "$(stat_field "$WORK/c0" 's["cluster"]["all_resident"]')" = True ] &&
    [ "$(stat_field "$WORK/c1" 's["cluster"]["all_resident"]')" = True ] && break
  sleep 0.1
done
for i in 0 1; do
  "$PYTHON" "$TF" views "$WORK/c$i" t "$SRC" 0 2 >/dev/null || fail "node $i: views of a striped TFRecord dataset"
  by=$(stat_field "$WORK/c$i" 's["datasets"][0]["bytes_by_source"]')
  [ "$(stat_field "$WORK/c$i" 's["datasets"][0]["bytes_by_source"]["remote"]')" -gt 0 ] ||
    fail "node $i: a striped dataset should serve the other stripe from the peer: $by"
done
log "striped over two daemons: views right on both, the other stripe from the peer"
for i in 0 1; do stop_daemon "${NODE_PID[$i]}" "$WORK/c$i"; done

# 5. A damaged length field: found by the scan, named with file and offset.
rm "$WORK/bad"/*.idx
cp "$SRC/train-00002-of-00003" "$WORK/bad/train-00002-of-00003"
printf '\x99' | dd of="$WORK/bad/train-00002-of-00003" bs=1 seek=3 conv=notrunc status=none
if "$DLFS_CTL" tfrecord show "$WORK/bad" >"$WORK/len.out" 2>&1; then fail "show accepted a damaged length"; fi
grep -q "$WORK/bad/train-00002-of-00003: record at byte 0: the length's CRC does not match" "$WORK/len.out" ||
  { cat "$WORK/len.out"; fail "the damaged length is not named"; }
lenbad="$WORK/bad/train-00002-of-00003: record at byte 0: the length's CRC does not match"
# verify goes on past a bad file: both damaged files are named.
if "$DLFS_CTL" tfrecord verify "$WORK/bad" >"$WORK/both.out" 2>&1; then fail "verify passed two damaged files"; fi
grep -qF "$lenbad" "$WORK/both.out" && grep -qF "$where: the data's CRC does not match" "$WORK/both.out" &&
  grep -q "files with a bad record header: 1; records with a bad data CRC: 1 of 400" "$WORK/both.out" ||
  { cat "$WORK/both.out"; fail "verify should name both damaged files"; }
rc=0
mkdir -p "$WORK/mnt-refused"
timeout 30 "$DLFSD" --mountpoint "$WORK/mnt-refused" --control-socket "$WORK/ctl-refused.sock" --backend "$WORK/bad" \
  --name t --format tfrecord >"$WORK/d5.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "dlfsd should refuse a dataset with a damaged length (rc $rc)"
grep -qF "$lenbad" "$WORK/d5.log" || { cat "$WORK/d5.log"; fail "dlfsd's refusal does not name file and offset"; }
# tfrecord_skip_bad_files: the file is left out (logged), the other two serve.
cat >"$WORK/skip.toml" <<TOML
[[dataset]]
name = "t"
backend = "$WORK/bad"
format = "tfrecord"
tfrecord_skip_bad_files = true
TOML
start_daemon "$WORK/mnt" "$WORK/d6.log" --config "$WORK/skip.toml"
[ "$(stat_field "$WORK/mnt" 's["datasets"][0]["samples"]')" = 400 ] || fail "two files of 200 records should serve"
grep -F "$lenbad" "$WORK/d6.log" | grep -q "the file is left out of the samples" || { cat "$WORK/d6.log"; fail "the left-out file is not logged"; }
stop_daemon "$DAEMON_PID" "$WORK/mnt"
log "ok"
