#!/usr/bin/env bash
# The PyTorch pipeline benchmark (tools/bench/pipeline_bench.py) runs end to end
# in quick mode: every (size, backend, variant, epoch) has a positive samples/s
# and positive ratios in its JSON, raw/ is under dlfsd's overlay where the
# kernel has overlayfs and read with open() then costs no ioctl (one without
# it; none with dlfs.read_file), and nothing stays mounted or exported.
# Speeds are not judged here. Argument: the backends besides local (whose files
# every ratio is also against):
#   local  (default) local only;
#   sshfs  local,sshfs: a private sshd and an sshfs mount (tools/bench/sshfs_backend.py);
#          runs wherever FUSE does, so it fails, not skips, when sshfs_backend.py check
#          says no (tools/install-deps.sh installs sshfs and openssh-server);
#   nfs    local,nfs: skips (77) with the reason where tools/bench/nfs_backend.py check
#          says no (neither a kernel with nfsd and an NFS client nor nfs-ganesha and the
#          built dlfs-bench-nfsmount); 32_nfs_backend tests that backend itself.
source "$(dirname "$0")/lib.sh"
require_fuse
mode=${1:-local}
bench=$(dirname "$0")/../../tools/bench
case "$mode" in
  local) backends=local ;;
  sshfs | nfs)
    reason=$("$PYTHON" "$bench/${mode}_backend.py" check) || {
      rc=$?
      [ $rc -eq 77 ] && [ "$mode" = nfs ] && skip "$reason"
      fail "${mode}_backend.py check failed ($rc): $reason"
    }
    backends=local,$mode ;;
  *) fail "unknown mode '$mode' (local, sshfs or nfs)" ;;
esac
# The backends' temporary files (sshfs: sshd config and keys) go under $WORK: the
# checks at the end find whatever they leave.
export TMPDIR=$WORK/tmp
mkdir -p "$TMPDIR"
# If the benchmark itself was killed before its teardown: unmount what it left under
# $WORK and stop what it left running, before lib.sh deletes $WORK.
CLEANUP_HOOKS+=(leftovers_in_work)
"$PYTHON" -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (tools/install-deps.sh installs it)"
build_dir=$(dirname "$(dirname "$DLFSD")")
"$PYTHON" "$bench/pipeline_bench.py" --quick --backends "$backends" --build "$build_dir" --workdir "$WORK/bench" \
  --json "$WORK/pipeline.json" >"$WORK/bench.out" 2>&1 || { cat "$WORK/bench.out"; fail "pipeline_bench.py failed"; }
sed -n '/^PyTorch DataLoader/,$p' "$WORK/bench.out"
# As root (this scenario is) dlfsd puts raw/ under its overlay wherever the
# kernel has overlayfs.
overlay=no; grep -qw overlay /proc/filesystems && overlay=yes
"$PYTHON" - "$WORK/pipeline.json" "$backends" "$overlay" <<'EOF'
import json, sys
res = json.load(open(sys.argv[1]))
backends = sys.argv[2].split(",")
overlay = sys.argv[3] == "yes"
bad, cells = [], 0
for size in ("small", "large"):
    for b in backends:
        for v in ("files", "raw", "files-rf", "raw-rf", "views", "views-b", "zero-copy", "bin", "ceiling"):
            for e in ("epoch1", "epoch2"):
                c = res["summary"].get(size, {}).get(b, {}).get(v, {}).get(e)
                if c is None:
                    bad.append(f"{size}/{b}/{v}/{e}: missing")
                    continue
                cells += 1
                for k in ("samples_s", "ratio_backend_files", "ratio_local_files"):
                    if not isinstance(c.get(k), (int, float)) or c[k] <= 0:
                        bad.append(f"{size}/{b}/{v}/{e}: {k} = {c.get(k)!r}")
                # Python's open() asks isatty() once per sample, an ioctl the kernel
                # forwards to dlfsd, unless raw/ is under dlfsd's overlay (the default
                # as root: fs/kernel/raw_overlay.h), whose files answer it in the kernel;
                # dlfs.read_file makes none.
                if v in ("raw", "raw-rf"):
                    run = [r for r in res["runs"] if (r["size"], r["backend"], r["variant"]) == (size, b, v)]
                    if any(r.get("raw_overlay") is not overlay for r in run):
                        bad.append(f"{size}/{b}/{v}/{e}: raw/ under the overlay: {[r.get('raw_overlay') for r in run]}, "
                                   f"want {overlay}")
                    ioctl = (c.get("fuse_per_sample") or {}).get("ioctl", 0)
                    want = 1.0 if v == "raw" and not overlay else 0.0
                    if abs(ioctl - want) > 0.01:
                        bad.append(f"{size}/{b}/{v}/{e}: {ioctl} ioctl requests per sample, want {want}")
for b in backends[1:]:  # the shared backend was mounted, with the options it reports
    if not res["config"].get("mount_options", {}).get(b):
        bad.append(f"config: no mount options for backend {b}")
# --quick is one repetition: one run per cell, none lost or doubled
if len(res["runs"]) != cells:
    bad.append(f"{len(res['runs'])} runs for {cells} summary cells")
if bad:
    sys.exit("pipeline JSON:\n  " + "\n  ".join(bad))
print(f"pipeline JSON: {cells} cells, every figure positive")
EOF
grep -qE " $WORK/bench/" /proc/mounts && fail "the benchmark left a mount: $(grep " $WORK/bench/" /proc/mounts)"
left=$(ls -A "$TMPDIR")
[ -z "$left" ] || fail "the benchmark left temporary files: $left"
procs=$(pgrep -a -f "$WORK/" || true)
[ -z "$procs" ] || fail "the benchmark left processes running: $procs"
if [ "$mode" = nfs ] && command -v exportfs >/dev/null; then
  exportfs -v | grep -q "$WORK/bench" && fail "the benchmark left an export: $(exportfs -v)"
fi
log "ok"
