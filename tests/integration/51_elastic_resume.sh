#!/usr/bin/env bash
# Elastic jobs: an epoch read in part by W ranks, resumed by W' ranks through
# epochs/<e>/<W>/resume/<consumed>/<W'>/ (docs/views.md). For W in {4, 3}
# and W' in {3, 4, 1, 6}, consumed counts uniform, uneven, none and all
# (check_elastic_resume.py): the .index and .tar views hold the rest of the
# epoch exactly once across the W' ranks (pad: plus the remainder's wrap
# only; drop: its last M mod W' left out), in the epoch's order, with the
# backend's bytes; python/dlfs reads them through the client socket the
# same. Bad resume paths are ENOENT, each with one log line naming the path
# and what is wrong, and a lookup loop does not flood the log.
source "$(dirname "$0")/lib.sh"
require_fuse
CHECK="$(dirname "$0")/check_elastic_resume.py"

N=211  # prime: no W divides it
"$PYTHON" "$GEN_DATASET" files "$WORK/tree" --count $N --size 2K --size-jitter 0.6 --dirs 5 --seed 3 >/dev/null

start_daemon "$WORK/mnt" "$WORK/pad.log" --backend "$WORK/tree" --name t --seed 42
"$PYTHON" "$CHECK" "$WORK/mnt" t "$WORK/tree" --epoch 2 --grid 4:3,4:4,4:1,4:6,3:3,3:4,3:1,3:6 --zero-copy ||
  fail "resumed views, remainder pad"
V=$WORK/mnt/t/epochs/2/4/resume
# 211 samples over 4 ranks, pad: 53 each.
[ -d "$V/53/3" ] || fail "a whole epoch consumed is a resume point (of nothing)"
[ "$(stat -c %s "$V/53/3/0.tar")" = 1024 ] || fail "an empty remainder's tar is its two end blocks"
bad_path() {  # NAME WHY: ENOENT for the lookup, and the log line
  local name=$1 why=$2
  if stat "$V/$name" >/dev/null 2>"$WORK/err"; then fail "resume/$name should not exist"; fi
  grep -q "No such file or directory" "$WORK/err" || fail "resume/$name: $(cat "$WORK/err") (want ENOENT)"
  grep -qF "no resume view t/epochs/2/4/resume/$name: $why" "$WORK/pad.log" ||
    { tail -5 "$WORK/pad.log" >&2; fail "no log line for resume/$name saying '$why'"; }
}
bad_path 54 "rank 0 of 4 consumed 54 samples, but its view holds 53"
bad_path 1,2,60,3 "rank 2 of 4 consumed 60 samples, but its view holds 53"
bad_path 1,2,3 "3 counts for world size 4"
bad_path 1,2,3,4,5 "more than 4 counts for world size 4"
bad_path x9 "'x9' is not a count"
[ ! -e "$WORK/mnt/t/epochs/2/4/resume/1/0" ] || fail "W' 0 exists"
[ ! -e "$WORK/mnt/t/epochs/2/4/resume/1/2/2.tar" ] || fail "rank 2 of W' 2 exists"
# A loop of bad lookups: a few lines, and a count of those held back.
before=$(grep -c "no resume view" "$WORK/pad.log")
for i in $(seq 100 400); do stat "$V/$i" >/dev/null 2>&1 && fail "resume/$i should not exist"; done
after=$(grep -c "no resume view" "$WORK/pad.log")
[ $((after - before)) -le 12 ] || fail "301 bad lookups wrote $((after - before)) log lines (rate limit: 10 per 10 s)"
# The .index header names what it resumes; python/dlfs's errors say what is wrong.
head -1 "$V/3,2*3/6/5.index" | grep -q " resume_world_size=4 consumed=3,2\*3$" ||
  fail "the resumed .index header: $(head -1 "$V/3,2*3/6/5.index")"
PYTHONPATH="$(dirname "$0")/../../python" "$PYTHON" - "$WORK/mnt/t" <<'PY' || fail "python/dlfs's resume errors"
import sys, dlfs
try:
    dlfs.TarView(sys.argv[1], 2, 0, 3, resume_from=(4, [60, 1, 1, 1]))
    sys.exit("a count above the view was accepted")
except FileNotFoundError as e:
    assert "rank 0 of 4 consumed 60 samples, but the views of" in str(e), e
try:
    dlfs.TarView(sys.argv[1], 2, 0, 3, resume_from=(4, [1, 1]))
    sys.exit("2 counts for W 4 accepted")
except ValueError as e:
    assert "one count (every rank) or 4 counts" in str(e), e
PY
stop_daemon "$DAEMON_PID" "$WORK/mnt"

start_daemon "$WORK/mnt" "$WORK/drop.log" --backend "$WORK/tree" --name t --seed 42 --remainder drop
"$PYTHON" "$CHECK" "$WORK/mnt" t "$WORK/tree" --epoch 0 --grid 4:3,3:4,4:6,3:1 --remainder drop ||
  fail "resumed views, remainder drop"
stop_daemon "$DAEMON_PID" "$WORK/mnt"
log "ok"
