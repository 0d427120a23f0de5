#!/usr/bin/env bash
# Every file read through raw/ equals the backend (SHA-256), both while the
# dataset is still loading and once it is resident; sizes, modes and mtimes
# match; the second read comes from memory, not the backend.
source "$(dirname "$0")/lib.sh"
require_fuse

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 3000 --size 40K --size-jitter 0.9 --dirs 7 --seed 1 >/dev/null
mkdir -p "$WORK/data/empty_dir"; : >"$WORK/data/zero_length"
head -c $((16 << 20)) /dev/urandom >"$WORK/data/big_16MiB"
start_daemon "$WORK/mnt" "$WORK/dlfsd.log" --backend "$WORK/data" --name ds --extent-size 1MiB --loader-threads 2

fds_before=$(ls /proc/"$DAEMON_PID"/fd | wc -l)
log "reading every file while loading"
same_tree "$WORK/data" "$WORK/mnt/ds/raw"
wait_loaded "$WORK/mnt"
log "reading every file once resident"
same_tree "$WORK/data" "$WORK/mnt/ds/raw"

[ -d "$WORK/mnt/ds/raw/empty_dir" ] || fail "empty directory missing"
# Thousands of opens and backend reads later, the daemon holds no more fds.
fds_after=$(ls /proc/"$DAEMON_PID"/fd | wc -l)
[ "$fds_after" -le "$((fds_before + 2))" ] || fail "dlfsd fds grew from $fds_before to $fds_after (leak)"
# size, permission bits without write, mtime
"$PYTHON" "$(dirname "$0")/check_attrs.py" "$WORK/data" "$WORK/mnt/ds/raw"

# inode numbers are stable across lookups
i1=$(stat -c %i "$WORK/mnt/ds/raw/zero_length"); i2=$(stat -c %i "$WORK/mnt/ds/raw/zero_length")
[ "$i1" = "$i2" ] || fail "inode number changed"

total=$(stat_field "$WORK/mnt" 's["datasets"][0]["total_bytes"]')
resident=$(stat_field "$WORK/mnt" 's["datasets"][0]["resident_bytes"]')
[ "$total" = "$resident" ] || fail "resident $resident != total $total after load"
per_sample=$(stat_field "$WORK/mnt" 's["memory"]["metadata_bytes_per_sample"]')
"$PYTHON" -c "import sys; sys.exit(0 if $per_sample < 100 else 1)" || fail "metadata $per_sample bytes/sample"
log "metadata bytes per sample: $per_sample"

# Read everything again with the page cache dropped: all from memory now.
sync; echo 3 >/proc/sys/vm/drop_caches
before=$(stat_field "$WORK/mnt" 's["datasets"][0]["served"]["bytes_from_backend"]')
same_tree "$WORK/data" "$WORK/mnt/ds/raw"
after=$(stat_field "$WORK/mnt" 's["datasets"][0]["served"]["bytes_from_backend"]')
[ "$before" = "$after" ] || fail "resident reads went to the backend ($before -> $after bytes)"

# 1 MiB FUSE requests: a cold sequential read of 16 MiB takes about 16 of them
# (the kernel's default readahead window would make it 128).
sync; echo 3 >/proc/sys/vm/drop_caches
req_before=$(stat_field "$WORK/mnt" 's["datasets"][0]["views"]["raw"]["requests"]')
dd if="$WORK/mnt/ds/raw/big_16MiB" of=/dev/null bs=1M status=none
req_after=$(stat_field "$WORK/mnt" 's["datasets"][0]["views"]["raw"]["requests"]')
requests=$((req_after - req_before))
log "16 MiB read in $requests FUSE requests"
[ "$requests" -ge 16 ] && [ "$requests" -le 20 ] || fail "expected ~16 requests of 1 MiB, got $requests"
# keep_cache: a second open and read is served by the kernel page cache.
dd if="$WORK/mnt/ds/raw/big_16MiB" of=/dev/null bs=1M status=none
req_again=$(stat_field "$WORK/mnt" 's["datasets"][0]["views"]["raw"]["requests"]')
[ "$req_again" = "$req_after" ] || fail "second read reached the daemon ($((req_again - req_after)) requests)"

stop_daemon "$DAEMON_PID" "$WORK/mnt"
log "ok"
