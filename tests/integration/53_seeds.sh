#!/usr/bin/env bash
# Several jobs on one node's copy: <dataset>/seeds/<s>/epochs/... is the
# epochs/ tree with seed s (docs/views.md). Two jobs with seeds 7 and 99
# read their views at once from one dlfsd configured with seed 42 (one
# through the mount, one through the client socket): each sees exactly what
# a dlfsd started with its seed serves (its samples' bytes in its order,
# and the .tar and .index byte for byte), dlfsd holds one copy (resident
# bytes as before, RSS grown by far less than the dataset), and the
# stats give each seed its traffic and randomization level. A dataset in
# rounds: another seed's views are right too, read past the round buffers,
# with no second set of them.
source "$(dirname "$0")/lib.sh"
require_fuse
CHECK="$(dirname "$0")/check_seeds.py"

# 16 MB: a second copy would show in the RSS.
"$PYTHON" "$GEN_DATASET" files "$WORK/tree" --count 2000 --size 8K --size-jitter 0.5 --dirs 9 --seed 4 >/dev/null
common=(--backend "$WORK/tree" --name t --world-size 2)

# No read-ahead rings (every sample is resident: they would fetch nothing,
# but each view's ring takes up to 8 MiB as it is made): the RSS then shows
# the dataset's copies and little else.
start_daemon "$WORK/mnt" "$WORK/a.log" "${common[@]}" --seed 42 --no-readahead
A=$DAEMON_PID
wait_loaded "$WORK/mnt"
resident0=$(stat_field "$WORK/mnt" 's["memory"]["resident_bytes"]')
# The configured seed's job first: what a one-seed daemon holds once read.
"$PYTHON" "$CHECK" "$WORK/mnt/t" "$WORK/job42" --epochs 0,1 >"$WORK/job42.log" 2>&1 ||
  { cat "$WORK/job42.log" >&2; fail "the configured seed's job"; }
rss0=$(stat_field "$WORK/mnt" 's["memory"]["rss_bytes"]')
# The two other jobs, concurrently.
"$PYTHON" "$CHECK" "$WORK/mnt/t" "$WORK/job7" --epochs 0,1 --seed 7 >"$WORK/job7.log" 2>&1 &
J7=$!
"$PYTHON" "$CHECK" "$WORK/mnt/t" "$WORK/job99" --epochs 0,1 --seed 99 --zero-copy >"$WORK/job99.log" 2>&1 &
J99=$!
wait_exit $J7 300
[ "$WAIT_RC" = 0 ] || { cat "$WORK/job7.log" >&2; fail "job of seed 7"; }
wait_exit $J99 300
[ "$WAIT_RC" = 0 ] || { cat "$WORK/job99.log" >&2; fail "job of seed 99"; }
log "jobs of seeds 7 (through the mount) and 99 (through the client socket) read 2 epochs at once beside seed 42's"

# One copy: nothing more resident, and the RSS grew by far less than the
# dataset (16 MB) while two more seeds read all of it.
[ "$(stat_field "$WORK/mnt" 's["memory"]["resident_bytes"]')" = "$resident0" ] ||
  fail "resident bytes grew with the other seeds' jobs"
rss1=$(stat_field "$WORK/mnt" 's["memory"]["rss_bytes"]')
[ $((rss1 - rss0)) -lt $((8 * 1024 * 1024)) ] ||
  fail "dlfsd's RSS grew from $rss0 to $rss1 bytes while seeds 7 and 99 read their views: a second copy?"
log "one copy: resident bytes unchanged, RSS $rss0 -> $rss1 bytes while seeds 7 and 99 read the 16 MB dataset twice"
# Per-seed stats: each job's own traffic and plan.
"$PYTHON" - "$WORK/mnt/.dlfs/stats" <<'PY' || fail "per-seed stats"
import json, sys
d = json.load(open(sys.argv[1]))["datasets"][0]
rows = {r["seed"]: r for r in d["views"]["seeds"]}
assert set(rows) == {42, 7, 99}, rows
assert rows[42]["configured"] and not rows[7]["configured"] and not rows[99]["configured"], rows
assert rows[7]["bytes"] > 16e6 and rows[7]["lookups"] >= 4, rows[7]  # 2 epochs x 2 ranks, through the mount
assert rows[99]["lookups"] >= 4, rows[99]  # its .index files: the samples came through the client socket
assert rows[42]["bytes"] > 16e6, rows[42]
assert all(r["randomization_level"] == 1.0 and r["rounds_per_epoch"] == 1 for r in rows.values()), rows
assert d["views"]["contexts"]["in_use"] >= 8, d["views"]["contexts"]
PY

# Against daemons started with those seeds: the same samples, bytes and files.
for s in 7 99; do
  start_daemon "$WORK/m$s" "$WORK/d$s.log" "${common[@]}" --seed $s
  wait_loaded "$WORK/m$s"
  "$PYTHON" "$CHECK" "$WORK/m$s/t" "$WORK/want$s" --epochs 0,1 >/dev/null || fail "reading the seed-$s daemon"
  cmp -s "$WORK/job$s" "$WORK/want$s" || fail "seed $s through seeds/$s/ differs from a dlfsd started with --seed $s"
  for f in 0/2/0.tar 0/2/1.index 1/2/1.tar 3/5/4.tar 3/5/4.index; do
    cmp -s "$WORK/mnt/t/seeds/$s/epochs/$f" "$WORK/m$s/t/epochs/$f" || fail "seeds/$s/epochs/$f differs from --seed $s's"
  done
  [ "$(stat_field "$WORK/m$s" 's["memory"]["resident_bytes"]')" = "$resident0" ] || fail "resident bytes differ"
  stop_daemon "$DAEMON_PID" "$WORK/m$s"
done
cmp -s "$WORK/job42" "$WORK/job7" && fail "seeds 42 and 7 gave one order"
log "seeds/7 and seeds/99 equal dlfsd's started with --seed 7 and --seed 99; one copy in memory"
stop_daemon "$A" "$WORK/mnt"

# In rounds (a budget of a quarter of the dataset): the round buffers follow
# seed 42; seed 7's views read past them (its read-ahead rings fetch from the
# backend), right all the same, and load no round: no second set of buffers,
# no round loaded for another seed's order.
rounds=(--memory-budget 4MiB --round-chunk 256K)
start_daemon "$WORK/mnt" "$WORK/r42.log" "${common[@]}" "${rounds[@]}" --seed 42
R42=$DAEMON_PID
slot=$(stat_field "$WORK/mnt" 's["datasets"][0]["rounds"]["slot_bytes"]')
capacity=$(stat_field "$WORK/mnt" 's["memory"]["capacity_bytes"]')
sleep 0.5  # the first round's load, started with the daemon
loads=$(stat_field "$WORK/mnt" 'len(s["datasets"][0]["rounds"]["timeline"])')
"$PYTHON" "$CHECK" "$WORK/mnt/t" "$WORK/rjob7" --epochs 0 --seed 7 >/dev/null || fail "seed 7 in rounds"
[ "$(stat_field "$WORK/mnt" 'len(s["datasets"][0]["rounds"]["timeline"])')" = "$loads" ] ||
  fail "seed 7's views loaded rounds: $(stat_field "$WORK/mnt" 's["datasets"][0]["rounds"]["timeline"]')"
"$PYTHON" "$CHECK" "$WORK/mnt/t" "$WORK/rjob42" --epochs 0 >/dev/null || fail "seed 42 in rounds"
[ "$(stat_field "$WORK/mnt" 'len(s["datasets"][0]["rounds"]["timeline"])')" -gt "$loads" ] ||
  fail "seed 42's epoch loaded no round"
[ "$(stat_field "$WORK/mnt" 's["datasets"][0]["rounds"]["slot_bytes"]')" = "$slot" ] || fail "round slots changed"
[ "$(stat_field "$WORK/mnt" 's["memory"]["capacity_bytes"]')" = "$capacity" ] || fail "memory capacity changed"
"$PYTHON" - "$WORK/mnt/.dlfs/stats" <<'PY' || fail "per-seed stats in rounds"
import json, sys
d = json.load(open(sys.argv[1]))["datasets"][0]
rows = {r["seed"]: r for r in d["views"]["seeds"]}
assert rows[7]["rounds_per_epoch"] > 1 and 0 < rows[7]["randomization_level"] < 1, rows[7]
assert rows[42]["randomization_level"] == d["plan"]["randomization_level"], (rows[42], d["plan"])
assert rows[42]["rounds_per_epoch"] == d["plan"]["rounds_per_epoch"], (rows[42], d["plan"])
PY
start_daemon "$WORK/m7" "$WORK/r7.log" "${common[@]}" "${rounds[@]}" --seed 7
"$PYTHON" "$CHECK" "$WORK/m7/t" "$WORK/rwant7" --epochs 0 >/dev/null || fail "the seed-7 daemon in rounds"
cmp -s "$WORK/rjob7" "$WORK/rwant7" || fail "seed 7 in rounds differs from a dlfsd started with --seed 7"
stop_daemon "$DAEMON_PID" "$WORK/m7"
stop_daemon "$R42" "$WORK/mnt"
log "in rounds: seed 7's views equal --seed 7's, read past seed 42's round buffers (no round loaded for them)"
log "ok"
