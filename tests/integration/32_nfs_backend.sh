#!/usr/bin/env bash
# The benchmarks' NFS backend (tools/bench/nfs_backend.py) runs here: on kernels
# without nfsd or an NFS client its ganesha mode (nfs-ganesha + the FUSE client
# dlfs-bench-nfsmount), else the kernel mode. Over a generated tree (empty, tiny,
# odd-sized and multi-MiB files, nested directories, names with spaces):
#  - every file read through the mount has the source's bytes, also read by
#    several processes at once (the client's per-thread NFS connections);
#  - the mount is read-only (writes, creates, mkdir refused);
#  - SIGTERM to nfs_backend.py tears everything down: no mount, no ganesha.nfsd,
#    no client process, no temporary directory left;
#  - a quick pipeline_bench.py run with --backends nfs has every nfs row;
#  - a quick load_bench.py --backend nfs run measures both phases over the NFS
#    mount and leaves no mount, process or temporary file.
# Skips only without root or /dev/fuse (tools/install-deps.sh installs the rest;
# a missing piece is a failure, named by `nfs_backend.py check`).
source "$(dirname "$0")/lib.sh"
require_fuse
bench=$(cd "$(dirname "$0")/../../tools/bench" && pwd)
build_dir=$(dirname "$(dirname "$DLFSD")")
client=$build_dir/tools/bench/dlfs-bench-nfsmount
reason=$("$PYTHON" "$bench/nfs_backend.py" check --client "$client") ||
  fail "nfs_backend.py check: $reason"
# The backend's temporary files (ganesha's config, log, recovery dir) go under $WORK.
export TMPDIR=$WORK/tmp
mkdir -p "$TMPDIR"
CLEANUP_HOOKS+=(leftovers_in_work)
# nothing_left WHO DIR: no mount under DIR, no process naming $WORK, nothing
# in $TMPDIR once WHO (a benchmark, the backend's teardown) has finished.
nothing_left() {
  local who=$1 dir=$2 procs
  grep -qE " $dir" /proc/mounts && fail "$who left a mount: $(grep " $dir" /proc/mounts)"
  procs=$(pgrep -a -f "$WORK/" || true)
  [ -z "$procs" ] || fail "$who left processes running: $procs"
  [ -z "$(ls -A "$TMPDIR")" ] || fail "$who left temporary files: $(ls -A "$TMPDIR")"
}

src=$WORK/src
"$PYTHON" - "$src" <<'EOF'
import os, random, sys
root = sys.argv[1]
rng = random.Random(31)
sizes = [0, 1, 4095, 4096, 4097, 3 << 10, 110 << 10, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 << 20]
for d in ("", "a", "a/b", "with space", "many"):
    os.makedirs(os.path.join(root, d), exist_ok=True)
for i, size in enumerate(sizes):
    for d in ("", "a/b", "with space"):
        with open(os.path.join(root, d, f"f{i} x.bin" if d == "with space" else f"f{i}.bin"), "wb") as f:
            f.write(rng.randbytes(size))
for i in range(300):
    with open(os.path.join(root, "many", f"s{i:04d}"), "wb") as f:
        f.write(rng.randbytes(rng.randrange(1, 9000)))
EOF
mnt=$WORK/mnt
"$PYTHON" "$bench/nfs_backend.py" mount "$src" "$mnt" --client "$client" >"$WORK/backend.log" 2>&1 &
backend=$!
for _ in $(seq 1 300); do
  grep -q "SIGINT or SIGTERM unmounts" "$WORK/backend.log" && break
  kill -0 "$backend" 2>/dev/null || { cat "$WORK/backend.log"; fail "nfs_backend.py mount exited"; }
  sleep 0.1
done
grep -q "SIGINT or SIGTERM unmounts" "$WORK/backend.log" || { cat "$WORK/backend.log"; fail "no NFS mount in 30 s"; }
cat "$WORK/backend.log"
fstype=$(awk -v m="$mnt" '$2 == m {print $3}' /proc/mounts)
case "$fstype" in
  fuse.dlfs-nfs)
    mode=ganesha
    server=$(sed -n 's/.*ganesha.nfsd (pid \([0-9]*\)).*/\1/p' "$WORK/backend.log")
    [ -n "$server" ] && kill -0 "$server" || fail "ganesha mode, but no running ganesha.nfsd in the log" ;;
  nfs | nfs4) mode=kernel ;;
  *) fail "$mnt: file system type '$fstype', want an NFS mount" ;;
esac
log "mode: $mode ($fstype)"

# Bytes: the same tree (sha256 of every file, no file more or less), then cmp of
# every file by 8 processes at once.
same_tree "$src" "$mnt"
(cd "$src" && find . -type f -print0) | xargs -0 -P 8 -n 16 sh -c \
  's=$1 m=$2; shift 2; for f; do cmp -s "$s/$f" "$m/$f" || { echo "differs: $f"; exit 1; }; done' _ "$src" "$mnt" ||
  fail "a file read concurrently through the mount differs from the source"
files=$(find "$mnt" -type f | wc -l)
[ "$files" -eq "$(find "$src" -type f | wc -l)" ] || fail "$files files in the mount"
[ "$(stat -c %s "$mnt/a/b/f10.bin")" -eq $((3 << 20)) ] || fail "size of a 3 MiB file: $(stat -c %s "$mnt/a/b/f10.bin")"
[ ! -e "$mnt/no-such-file" ] || fail "a missing name exists"
# Inode numbers are the server's (the source's), also after the kernel forgot the
# names: dlfsd takes a file whose st_ino changed for a replaced one.
ino=$(stat -c %i "$src/a/b/f3.bin")
[ "$(stat -c %i "$mnt/a/b/f3.bin")" = "$ino" ] || fail "st_ino $(stat -c %i "$mnt/a/b/f3.bin"), source's $ino"
sync
echo 3 >/proc/sys/vm/drop_caches
[ "$(stat -c %i "$mnt/a/b/f3.bin")" = "$ino" ] || fail "st_ino changed after drop_caches"
log "$files files read, same bytes"
# The same few files opened and closed over and over by several threads: an open
# arrives while FUSE's release of the previous one is still pending, which broke
# libnfs's NFSv4.0 open state (NFS4ERR_OLD_STATEID, then BAD_SEQID on every request)
# until the client shared one open state per connection and file.
"$PYTHON" - "$src" "$mnt" <<'EOF2' || fail "repeated opens of the same files failed"
import sys, threading
src, mnt = sys.argv[1:]
names = ["f6.bin", "a/b/f6.bin", "with space/f6 x.bin"]
want = {n: open(f"{src}/{n}", "rb").read() for n in names}
errors = []
def reopen(k):
    for i in range(300):
        n = names[(k + i) % len(names)]
        try:
            with open(f"{mnt}/{n}", "rb") as f:
                if f.read() != want[n]:
                    errors.append(f"{n}: other bytes at open {i}")
        except OSError as e:
            errors.append(f"{n}: open {i}: {e}")
            return
threads = [threading.Thread(target=reopen, args=(k,)) for k in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
if errors:
    sys.exit("repeated opens: " + "; ".join(errors[:5]))
print("1200 opens of 3 files by 4 threads: same bytes")
EOF2

# Idle for longer than the server's NFSv4 lease (ganesha: 60 s): libnfs sends no
# RENEW, so the client's state expires and the next OPEN fails with
# NFS4ERR_EXPIRED; the client must recover (a new connection) and serve it.
if [ "$mode" = ganesha ]; then
  sleep 90
  cmp -s "$src/a/b/f2.bin" "$mnt/a/b/f2.bin" ||
    fail "a file opened after 90 s idle (past the NFSv4 lease) is not served: $(cat "$TMPDIR"/dlfs-ganesha-*/client.log)"
  grep -h "retrying on a new connection" "$TMPDIR"/dlfs-ganesha-*/client.log || log "(the lease had not expired)"
  log "served after 90 s idle"
fi

# Read-only.
err=$( (echo x >"$mnt/f1.bin") 2>&1) && fail "a write through the mount succeeded"
case "$err" in *"Read-only file system"*) ;; *) fail "write refused with '$err', want EROFS" ;; esac
touch "$mnt/new" 2>/dev/null && fail "a create through the mount succeeded"
mkdir "$mnt/newdir" 2>/dev/null && fail "a mkdir through the mount succeeded"
cmp -s "$src/f1.bin" "$mnt/f1.bin" || fail "f1.bin changed"

# Teardown on SIGTERM.
kill -TERM "$backend"
for _ in $(seq 1 200); do kill -0 "$backend" 2>/dev/null || break; sleep 0.1; done
kill -0 "$backend" 2>/dev/null && fail "nfs_backend.py still running 20 s after SIGTERM"
wait "$backend" || true
[ "$mode" = ganesha ] && kill -0 "$server" 2>/dev/null && fail "ganesha.nfsd (pid $server) outlived nfs_backend.py"
nothing_left "nfs_backend.py's teardown" "$mnt "
log "torn down on SIGTERM"

# The pipeline benchmark over the nfs backend: tiny counts, every nfs row there.
"$PYTHON" -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (tools/install-deps.sh installs it)"
"$PYTHON" "$bench/pipeline_bench.py" --quick --backends nfs --variants files,raw,views --build "$build_dir" \
  --workdir "$WORK/bench" --json "$WORK/pipeline.json" >"$WORK/bench.out" 2>&1 ||
  { cat "$WORK/bench.out"; fail "pipeline_bench.py --backends nfs failed"; }
sed -n '/^PyTorch DataLoader/,$p' "$WORK/bench.out"
"$PYTHON" - "$WORK/pipeline.json" <<'EOF'
import json, sys
res = json.load(open(sys.argv[1]))
bad = []
for size in ("small", "large"):
    for v in ("files", "raw", "views"):
        for e in ("epoch1", "epoch2"):
            c = res["summary"].get(size, {}).get("nfs", {}).get(v, {}).get(e)
            if not c or not c.get("samples_s", 0) > 0 or not c.get("ratio_backend_files", 0) > 0:
                bad.append(f"{size}/nfs/{v}/{e}: {c!r}")
if not res["config"].get("mount_options", {}).get("nfs"):
    bad.append("config: no mount options for nfs")
if bad:
    sys.exit("pipeline JSON, nfs rows:\n  " + "\n  ".join(bad))
print("pipeline JSON: every nfs row present and positive")
EOF
# dlfsd over the nfs mount loaded everything (a file whose identity changed between
# scan and load would be logged and left to the backend).
grep -h -E "changed since the scan|[1-9][0-9]* failed extents" "$WORK"/bench/dlfsd-nfs-*.log &&
  fail "dlfsd over the nfs mount saw backend files change"
ls "$WORK"/bench/dlfsd-nfs-*.log >/dev/null || fail "no dlfsd log of the nfs rows"
nothing_left pipeline_bench.py "$WORK/bench/"

# Reads while loading, over the nfs mount (load_bench.py --backend nfs): phase a
# reads the NFS mount, and dlfsd loads from it.
"$PYTHON" "$bench/load_bench.py" --quick --loading-only --backend nfs --build "$build_dir" \
  --workdir "$WORK/load" --json "$WORK/load.json" >"$WORK/load.out" 2>&1 ||
  { cat "$WORK/load.out"; fail "load_bench.py --backend nfs failed"; }
tail -4 "$WORK/load.out"
"$PYTHON" - "$WORK/load.json" <<'EOF'
import json, sys
res = json.load(open(sys.argv[1]))
bad = []
if res["config"].get("backend") != "nfs":
    bad.append(f"config backend {res['config'].get('backend')!r}")
for k in ("backend", "b0:loading"):
    if not res["median_gbps"].get(k, 0) > 0:
        bad.append(f"{k}: {res['median_gbps'].get(k)!r}")
if bad:
    sys.exit("load_bench JSON over nfs:\n  " + "\n  ".join(bad))
print("load_bench JSON: backend and loading measured over nfs")
EOF
grep -q "backend: NFS mount $WORK/load/mnt-nfs" "$WORK/load.out" || fail "load_bench did not read through its NFS mount"
nothing_left load_bench.py "$WORK/load/"
log "ok"
