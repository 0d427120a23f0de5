#!/usr/bin/env bash
# Issue 33, clients no one here wrote: torchvision's datasets.ImageFolder
# (Debian's torchvision 0.14 in the project's environment), unchanged, over
# a dataset's raw/ reads what it reads from the backend directory. The
# backend: 4 class directories of 30 real JPEG and PNG images (RGB, RGBA, L,
# palette; 12 to 96 pixels a side; some .JPG/.PNG) and files that are not
# images. Two root dlfsd over it: one as deployed (allow_other, raw/ under
# the read-only overlay), one with --raw-overlay off (every open() reaches
# dlfsd, isatty() ioctl included). As an unprivileged user (uid 60001, no
# groups), for each mount (check_client_torchvision.py):
#  - the same classes, class_to_idx and sample list (relative paths, targets)
#    as ImageFolder over the backend, non-images skipped;
#  - every file's bytes, and every image decoded to the same RGB pixels;
#  - a DataLoader with 2 workers and ToTensor: the backend's tensors;
#  - recipe_imagefolder (Resize + ToTensor, batches of 16, shuffled with a
#    seeded generator, 2 workers): the same batches as over the backend.
source "$(dirname "$0")/lib.sh"
require_fuse
require_venv torchvision torch PIL numpy
outsider_setup
HERE="$(cd "$(dirname "$0")" && pwd)"
CHECK="$HERE/check_client_torchvision.py"
READER=("${OUTSIDER[@]}")
t0=$(date +%s)

"$VENV_PYTHON" "$CHECK" make "$WORK/images" || fail "making the ImageFolder tree"

start_daemon "$WORK/mnt" "$WORK/d.log" --backend "$WORK/images" --name images
start_daemon "$WORK/mnt-plain" "$WORK/d-plain.log" --backend "$WORK/images" --name images --raw-overlay off
wait_loaded "$WORK/mnt"
wait_loaded "$WORK/mnt-plain"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || true
if grep -qw overlay /proc/filesystems; then
  for _ in $(seq 1 100); do grep -q " $WORK/mnt/images/raw overlay" /proc/mounts && break; sleep 0.1; done
  grep -q " $WORK/mnt/images/raw overlay" /proc/mounts || fail "no raw overlay over $WORK/mnt/images/raw"
  log "raw/ of $WORK/mnt under the raw overlay; $WORK/mnt-plain without"
else
  log "this kernel has no overlayfs: both mounts serve raw/ without the overlay"
fi

"${READER[@]}" "$VENV_PYTHON" "$CHECK" check --backend "$WORK/images" \
  --root "$WORK/mnt/images/raw" --root "$WORK/mnt-plain/images/raw" ||
  fail "torchvision ImageFolder through raw/ (as uid 60001)"
log "requests answered by the plain mount's dlfsd: ioctl $(stat_field "$WORK/mnt-plain" 's["fuse"]["requests"]["ioctl"]')," \
  "open $(stat_field "$WORK/mnt-plain" 's["fuse"]["requests"]["open"]')"

stop_daemon "${DAEMON_PIDS[0]}" "$WORK/mnt"
stop_daemon "${DAEMON_PIDS[1]}" "$WORK/mnt-plain"
log "ok in $(($(date +%s) - t0)) s"
