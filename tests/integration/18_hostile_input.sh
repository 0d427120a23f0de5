#!/usr/bin/env bash
# Hostile names, sizes and offsets against a real mount (check_hostile_input.py):
# huge and non-canonical epoch/W/rank names, '.' and '..', names past NAME_MAX
# and PATH_MAX, backend names that are not UTF-8 or are longer than NAME_MAX,
# xattr buffers of 1 byte and 64 KiB, O_DIRECT, mmap, reads past the end,
# negative offsets, opens for writing, malformed control requests. Each must
# get the right errno or the right bytes, and the daemon must still serve and
# exit cleanly afterwards. The backend directory's own name is not UTF-8
# either: stats and dlfs-ctl status must still answer.
source "$(dirname "$0")/lib.sh"
require_fuse
CHECK="$(dirname "$0")/check_hostile_input.py"
data="$WORK/data-"$'\xff'

"$PYTHON" "$GEN_DATASET" files "$data" --count 20 --size 6K --size-jitter 0.5 --dirs 3 --seed 18 >/dev/null
# Names a backend may hold that no DLFS name may break on: bytes that are not
# UTF-8 (a file, a directory), tab, newline, CR and backslash, and relative paths of about 560 and 1200 bytes
# (each component within NAME_MAX).
"$PYTHON" - "$data" <<'PY'
import os, random, sys
root, rng = os.fsencode(sys.argv[1]), random.Random(18)
def put(rel, n):
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(rng.randbytes(n))
put(b"\xff\xfe.bin", 9000)
put(b"dir\xc3\x28/x.bin", 700)
put(b"line\nbreak\ttab\\back\rslash.bin", 321)  # the .index escapes these
put(b"/".join([b"d" * 200] * 2) + b"/" + b"n" * 150 + b".bin", 1234)
put(b"/".join([b"e" * 250] * 4) + b"/" + b"m" * 200 + b".bin", 999)
PY

start_daemon "$WORK/mnt" "$WORK/dlfsd.log" --backend "$data" --name ds --world-size 2 --seed 18
"$PYTHON" "$CHECK" "$WORK/mnt" ds "$data" --control-socket "$(ctl_socket "$WORK/mnt")" ||
  { tail -20 "$WORK/dlfsd.log" >&2; fail "hostile input"; }

# Still alive and serving: a raw file and a view read back, stats parse.
kill -0 "$DAEMON_PID" 2>/dev/null || fail "dlfsd died"
f=$(cd "$data" && find . -name 'img_*' -type f | LC_ALL=C sort | head -1)
cmp -s "$data/$f" "$WORK/mnt/ds/raw/$f" || fail "raw/$f differs from the backend after the hostile input"
[ "$(stat -c %s "$WORK/mnt/ds/epochs/1/2/0.tar")" -gt 0 ] || fail "a view no longer resolves"
# The backend path is not UTF-8: its bad byte is shown as U+FFFD, the rest answers.
stat_field "$WORK/mnt" 's["datasets"][0]["backend"]' | grep -qxF "$WORK/data-"$'\xef\xbf\xbd' ||
  fail "stats do not show the backend path: $(head -c 300 "$WORK/mnt/.dlfs/stats" 2>&1)"
"$DLFS_CTL" --socket "$(ctl_socket "$WORK/mnt")" status >"$WORK/status.txt" 2>&1 ||
  fail "dlfs-ctl status failed: $(cat "$WORK/status.txt")"
stop_daemon "$DAEMON_PID" "$WORK/mnt"
log "ok"
