#!/usr/bin/env bash
# Raw files read while this node's stripe is still loading: right bytes, and
# the kernel's page-cache copy dropped a moment later (the stripe will hold
# them; fs/page_cache_release.h); after the load, the kernel keeps pages as
# usual. With --kernel-cache-while-loading nothing is dropped. Also: SIGTERM
# while readers read during the load stops the daemon at once (the releaser
# is stopped while the workers still answer).
source "$(dirname "$0")/lib.sh"
require_fuse
command -v fincore >/dev/null || skip "fincore (util-linux) not installed"

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 240 --size 64K --dirs 4 --seed 33 >/dev/null
# A slow backend (80 ms a pread, 2 loader threads: about 10 s of load) so
# that there is a load to read during.
DAEMON_WRAP=(env LD_PRELOAD="$FAULTY_BACKEND" DLFS_FAULT_DELAY="$WORK/data/*" DLFS_FAULT_DELAY_MS=80)
ARGS=(--backend "$WORK/data" --name ds --extent-size 256KiB --loader-threads 2)

start_daemon "$WORK/mnt" "$WORK/dlfsd.log" "${ARGS[@]}"
"$PYTHON" "$(dirname "$0")/check_reads_while_loading.py" --mnt "$WORK/mnt" --backend "$WORK/data" --expect dropped |
  while read -r line; do log "$line"; done
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "reads while loading (page cache dropped)"
stop_daemon "$DAEMON_PID" "$WORK/mnt"

start_daemon "$WORK/mnt2" "$WORK/dlfsd2.log" "${ARGS[@]}" --kernel-cache-while-loading
"$PYTHON" "$(dirname "$0")/check_reads_while_loading.py" --mnt "$WORK/mnt2" --backend "$WORK/data" --expect kept |
  while read -r line; do log "$line"; done
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "reads while loading (--kernel-cache-while-loading)"
stop_daemon "$DAEMON_PID" "$WORK/mnt2"

# SIGTERM in the middle of reads during the load, three times: exit 0 within
# the 30 s stop_daemon allows (it measures), nothing left mounted.
for i in 1 2 3; do
  start_daemon "$WORK/mnt3" "$WORK/dlfsd3-$i.log" "${ARGS[@]}"
  "$PYTHON" - "$WORK/mnt3/ds/raw" <<'PY' &
import os, sys, threading
root = sys.argv[1]
names = [os.path.join(d, n) for d, _, ns in os.walk(root) for n in ns]
def reader(k):
    for n in names[k::4]:
        try:
            fd = os.open(n, os.O_RDONLY); os.read(fd, 1 << 20); os.close(fd)
        except OSError:
            return  # the mount went away under us: expected
threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
[t.start() for t in threads]; [t.join() for t in threads]
PY
  readers=$!
  sleep 0.$((3 * i))
  t0=$(date +%s%N)
  stop_daemon "$DAEMON_PID" "$WORK/mnt3"
  log "SIGTERM during reads while loading ($i): stopped in $((($(date +%s%N) - t0) / 1000000)) ms"
  wait "$readers" || true
done
log "ok"
