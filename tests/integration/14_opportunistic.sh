#!/usr/bin/env bash
# Opportunistic order (DeepIO-Opp): with about half the dataset resident (a
# budget too small for rounds), each rank's tar stream yields whichever of the
# next planned samples is ready first, so resident samples move ahead of
# backend ones. Every sample of the rank still comes exactly once, with the
# right bytes, never more than the window away from its planned position; a
# re-read of the open stream returns the same bytes. Read-ahead is off for
# the daemon checked for samples served ahead (with it on, whether a sample is
# fetched before it is asked for is a race: every other check still holds).
source "$(dirname "$0")/lib.sh"
require_fuse
W=32
"$PYTHON" "$GEN_DATASET" fixed "$WORK/fixed" --records 4001 --record-size 3073 --files 2 --header 16 >/dev/null
for readahead in on off; do
flags=(); [ $readahead = off ] && flags=(--no-readahead)
start_daemon "$WORK/mnt-$readahead" "$WORK/d-$readahead.log" --backend "$WORK/fixed" --name c --format fixed \
  --record-size 3073 --header-bytes 16 --seed 8 --memory-budget 6M --extent-size 1M --round-chunk 16M --order opportunistic \
  --opportunistic-window $W "${flags[@]}"
wait_loaded "$WORK/mnt-$readahead"
"$PYTHON" - "$WORK/mnt-$readahead/c/epochs/0/2" "$WORK/fixed" $W $readahead <<'PY' || fail "opportunistic streams (read-ahead $readahead)"
import os, sys, tarfile
base, backend, window, readahead = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
moved = 0
for rank in (0, 1):
    view = f"{base}/{rank}"
    assert os.getxattr(view + ".tar", "user.dlfs.order") == b"opportunistic"
    rows = [l.rstrip("\n").split("\t") for l in open(view + ".index") if not l.startswith("#")]
    planned = {r[4]: int(r[0]) for r in rows}
    fd = os.open(view + ".tar", os.O_RDONLY)
    with tarfile.open(fileobj=os.fdopen(os.dup(fd), "rb"), mode="r|") as t:
        names = []
        for j, m in enumerate(t):
            path, rec = m.name.rsplit("/", 1)
            with open(f"{backend}/{path}", "rb") as f:
                f.seek(16 + int(rec[:8]) * 3073)
                assert t.extractfile(m).read() == f.read(3073), f"rank {rank}: member {m.name} differs"
            k = planned[m.name]
            assert abs(j - k) < window, f"rank {rank}: planned {k} served at {j}, window {window}"
            moved += j != k
            names.append(m.name)
    assert sorted(names) == sorted(planned), f"rank {rank}: not every planned sample exactly once"
    size = os.fstat(fd).st_size
    for off in (0, size // 3, size - 5000):
        assert os.pread(fd, 4096, off) == os.pread(fd, 4096, off), "a re-read of the stream differs"
    os.close(fd)
if readahead == "off":
    assert moved > 0, "no sample was served ahead of its plan position although half are resident"
print(f"ok (read-ahead {readahead}): {len(rows)} samples per rank, {moved} served out of plan order")
PY
done
log "ok"
