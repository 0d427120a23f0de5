#!/usr/bin/env bash
# Issue 33, clients no one here wrote: the webdataset library (1.0.2, the
# project's environment), unchanged, reads DLFS epoch views as shards.
# Two root dlfsd (allow_other): a tree of plain files grouped by key
# (c0/img000.jpg + .cls [+ .txt], --group-by first-dot) and WebDataset tar
# shards served with --format tar alone (its default key rule, first-dot).
# As an unprivileged user (uid 60001, no groups), for W = 2, epochs 0 and 1
# (check_client_webdataset.py):
#  - wds.WebDataset(<r>.tar) yields the keys of <r>.index in its order, each
#    sample's members byte for byte the backend's (no decoding); decoded
#    (.decode("pil") for the files, "rgb8" for the shards, .to_tuple) the
#    pixels of PIL's decoding of the backend's JPEG/PNG and the .cls labels;
#    every key once per epoch across the ranks; the epochs' orders differ;
#    webdataset does not warn (shardshuffle=False); with RANK and WORLD_SIZE
#    set (torchrun) its default nodesplitter refuses, so the recipes pass
#    nodesplitter=None (DLFS split the epoch among the ranks already);
#  - wds.WebLoader with 2 workers over one view: webdataset splits shards
#    among workers, so the second gets none and webdataset raises "fewer
#    shards than workers" (with empty_check=False worker 0 reads it all);
#    the recipe (recipe_webloader: worker k reads the view of rank
#    r + k*W of world size W*2) yields exactly rank r's samples of world
#    size W, in its .index order;
#  - wds.WebDataset over the shards' raw/ files: the backend's samples, in
#    the order webdataset reads them from the backend directory.
source "$(dirname "$0")/lib.sh"
require_fuse
require_venv webdataset torch PIL numpy
outsider_setup
HERE="$(cd "$(dirname "$0")" && pwd)"
CHECK="$HERE/check_client_webdataset.py"
READER=("${OUTSIDER[@]}")
t0=$(date +%s)

"$VENV_PYTHON" "$CHECK" make-files "$WORK/files" || fail "making the grouped files"
"$VENV_PYTHON" "$CHECK" make-shards "$WORK/shards" || fail "making the shards"

start_daemon "$WORK/mnt-files" "$WORK/files.log" --backend "$WORK/files" --name pics --group-by first-dot \
  --seed 41 --world-size 2
start_daemon "$WORK/mnt-shards" "$WORK/shards.log" --backend "$WORK/shards" --name wds --format tar \
  --seed 42 --world-size 2
wait_loaded "$WORK/mnt-files"
wait_loaded "$WORK/mnt-shards"
for v in "$WORK/mnt-files/pics" "$WORK/mnt-shards/wds"; do
  mode=$(stat -c %A "$v/epochs/0/2/0.tar")
  [ "${mode:7:1}" = r ] || fail "$v/epochs/0/2/0.tar is $mode: others may not read it (world-readable backend)"
done
log "views readable by others ($(stat -c %A "$WORK/mnt-shards/wds/epochs/0/2/0.tar")); samples:" \
  "files $(stat_field "$WORK/mnt-files" 's["datasets"][0]["samples"]')," \
  "shards $(stat_field "$WORK/mnt-shards" 's["datasets"][0]["samples"]')"

"${READER[@]}" "$VENV_PYTHON" "$CHECK" check --ds "$WORK/mnt-files/pics" --backend "$WORK/files" --kind files ||
  fail "webdataset over the grouped files' views (as uid 60001)"
"${READER[@]}" "$VENV_PYTHON" "$CHECK" check --ds "$WORK/mnt-shards/wds" --backend "$WORK/shards" --kind shards ||
  fail "webdataset over the tar shards' views (as uid 60001)"

stop_daemon "${DAEMON_PIDS[0]}" "$WORK/mnt-files"
stop_daemon "${DAEMON_PIDS[1]}" "$WORK/mnt-shards"
log "ok in $(($(date +%s) - t0)) s"
