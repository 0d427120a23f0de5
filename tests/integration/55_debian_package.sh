#!/usr/bin/env bash
# The Debian packages (debian/), end to end: built from the tracked tree with
# dpkg-buildpackage, lintian without an error, installed with apt-get
# (dependencies from Debian's archive), the same files as `meson install`;
# the installed dlfsd, started as its unit starts it (/etc/dlfs/NAME.toml),
# serves a generated dataset byte-exact, and the installed dlfs-ctl and
# Python client read it; purged while it serves, nothing is left: no mount,
# no dlfsd, no file of the packages. A failure midway purges them too: the
# machine never keeps a dlfs installed by this scenario.
#
# Slow: the package build compiles the product once more. On the 2-core
# machine, 11 minutes of which the build takes 10.5 (14 of 13.5 while other
# builds shared it).
DLFS_SCENARIO_TIMEOUT=${DLFS_SCENARIO_TIMEOUT:-1440}  # lib.sh's watchdog; meson's timeout is 1500 s
source "$(dirname "$0")/lib.sh"
require_fuse
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PACKAGES=(dlfs libdlfs-client0 libdlfs-client-dev python3-dlfs)
for tool in git dpkg-buildpackage dpkg-checkbuilddeps lintian apt-get; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (tools/install-deps.sh)"
done
git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1 || skip "$ROOT is not a git checkout (the package is built from its tracked files)"
for p in "${PACKAGES[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q installed; then
    fail "package $p is installed on this machine already: this scenario installs and purges its own; remove it first"
  fi
done

# ---- cleanup: on every exit, after lib.sh has stopped the daemon ----------

NAME=dlfs-it-$$                  # the service instance: /etc/dlfs/$NAME.toml, /run/dlfs/$NAME.sock
CONFIG=/etc/dlfs/$NAME.toml
SOCKET=/run/dlfs/$NAME.sock
ETC_CREATED=0
[ -d /etc/dlfs ] || ETC_CREATED=1
installed_packages() {
  local p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q installed && echo "$p"
  done
  return 0
}
purge_leftovers() {
  local left
  left=$(installed_packages)
  if [ -n "$left" ]; then
    echo "[$TEST_NAME] purging $(echo $left) (the scenario stopped midway)" >&2
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $left >/dev/null 2>&1 || dpkg --purge $left >/dev/null 2>&1 || true
  fi
  rm -f "$CONFIG"
  [ "$ETC_CREATED" = 1 ] && rmdir /etc/dlfs 2>/dev/null
  return 0
}
CLEANUP_HOOKS+=(purge_leftovers)
if [ -d /run/systemd/system ] && [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ]; then SYSTEMD=1; else SYSTEMD=0; fi
[ "$SYSTEMD" = 1 ] && CLEANUP_HOOKS=("systemctl stop dlfsd@$NAME.service >/dev/null 2>&1" "${CLEANUP_HOOKS[@]}")

# ---- build --------------------------------------------------------------------

# The tracked files only, as committed or changed in the worktree: no build/, no .venv.
mkdir "$WORK/src"
(cd "$ROOT" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$WORK/src"
missing=$(cd "$WORK/src" && dpkg-checkbuilddeps 2>&1) || skip "$missing (tools/install-deps.sh installs them)"
start=$SECONDS
if ! (cd "$WORK/src" && DEB_BUILD_OPTIONS="nocheck parallel=2" dpkg-buildpackage -b -us -uc) >"$WORK/build.log" 2>&1; then
  tail -n 40 "$WORK/build.log" >&2
  fail "dpkg-buildpackage failed (the end of its log above)"
fi
log "dpkg-buildpackage: $((SECONDS - start)) s"
debs=()
for p in "${PACKAGES[@]}"; do
  deb=$(ls "$WORK/${p}_"*.deb 2>/dev/null | head -n 1)
  [ -n "$deb" ] || fail "dpkg-buildpackage made no $p package: $(ls "$WORK")"
  debs+=("$deb")
done

# ---- lintian ----------------------------------------------------------------

start=$SECONDS
lintian --fail-on none "$WORK"/dlfs_*.changes >"$WORK/lintian.log" 2>&1 || true
log "lintian: $((SECONDS - start)) s, $(grep -c '^E: ' "$WORK/lintian.log") errors, $(grep -c '^W: ' "$WORK/lintian.log") warnings"
sed 's/^/  /' "$WORK/lintian.log"
! grep -q '^E: ' "$WORK/lintian.log" || fail "lintian reports errors (above)"

# ---- install: the packages' files are what `meson install` installs ----------

DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${debs[@]}" >"$WORK/apt.log" 2>&1 ||
  { cat "$WORK/apt.log" >&2; fail "apt-get install of the packages failed"; }
# What the packages hold (dpkg -L: directories too), and their files.
for p in "${PACKAGES[@]}"; do dpkg -L "$p"; done | LC_ALL=C sort -u >"$WORK/dpkg-paths"
# (-d follows symlinks: /lib is one on a merged /usr, a directory in the package.)
while read -r f; do [ -d "$f" ] || echo "$f"; done <"$WORK/dpkg-paths" >"$WORK/dpkg-files"
# Debian's own additions (changelog, copyright) aside, and dh_compress's .gz
# undone, the same files as `meson install` of the package's build tree.
grep -vE '^/usr/share/doc/[^/]+/(changelog\.Debian\.gz|copyright)$' "$WORK/dpkg-files" |
  sed -E 's#^(/usr/share/(man|doc)/.*)\.gz$#\1#' | LC_ALL=C sort >"$WORK/deb-set"
meson install -C "$WORK/src/obj-$(dpkg-architecture -qDEB_HOST_GNU_TYPE)" --no-rebuild --destdir "$WORK/root" \
  >"$WORK/meson-install.log" 2>&1 || { cat "$WORK/meson-install.log" >&2; fail "meson install failed"; }
(cd "$WORK/root" && find . -type f -o -type l) | sed 's#^\.##' | LC_ALL=C sort >"$WORK/meson-set"
if ! cmp -s "$WORK/deb-set" "$WORK/meson-set"; then
  { diff "$WORK/meson-set" "$WORK/deb-set" || true; } | head -n 30 >&2
  fail "the packages' files differ from meson install's (< meson only, > packages only)"
fi
log "$(wc -l <"$WORK/deb-set") files, the same as meson install's"
for f in /usr/sbin/dlfsd /usr/bin/dlfs-ctl /usr/bin/dlfs-slurm-launch /lib/systemd/system/dlfsd@.service \
         /usr/share/man/man8/dlfsd.8.gz /usr/share/man/man5/dlfs.toml.5.gz /usr/share/doc/dlfs/examples/example-job.toml; do
  grep -qxF "$f" "$WORK/dpkg-files" || fail "the packages have no $f"
done

# ---- the installed daemon, started as dlfsd@$NAME starts it --------------------

"$PYTHON" "$GEN_DATASET" files "$WORK/data" --count 300 --size 12K --size-jitter 0.5 --dirs 3 --seed 55 >/dev/null
mkdir "$WORK/mnt"
MOUNTS+=("$WORK/mnt")
mkdir -p /etc/dlfs
cat >"$CONFIG" <<TOML
[daemon]
mountpoint = "$WORK/mnt"
[[dataset]]
name = "ds"
backend = "$WORK/data"
world_size = 1
TOML
if [ "$SYSTEMD" = 1 ]; then
  systemctl start "dlfsd@$NAME.service" || fail "systemctl start dlfsd@$NAME failed"
else
  # No systemd here: the unit's own ExecStart, %i its instance name.
  exec_start=$(sed -n 's/^ExecStart=//p' /lib/systemd/system/dlfsd@.service)
  read -r -a cmd <<<"${exec_start//%i/$NAME}"
  [ "${cmd[0]}" = /usr/sbin/dlfsd ] || fail "the installed unit runs ${cmd[0]}, not /usr/sbin/dlfsd"
  "${cmd[@]}" >"$WORK/dlfsd.log" 2>&1 &
  DAEMON_PID=$!
  DAEMON_PIDS+=("$DAEMON_PID")
fi
/usr/bin/dlfs-ctl --socket "$SOCKET" --timeout 60 wait-ready >/dev/null ||
  { cat "$WORK/dlfsd.log" >&2 2>/dev/null; fail "the installed dlfsd did not serve within 60 s"; }
same_tree "$WORK/data" "$WORK/mnt/ds/raw"
/usr/bin/dlfs-ctl --socket "$SOCKET" status >"$WORK/status.txt" || fail "the installed dlfs-ctl status failed"
grep -q '\bds\b' "$WORK/status.txt" || { cat "$WORK/status.txt" >&2; fail "dlfs-ctl status does not name dataset ds"; }

# The installed Python client, by Debian's python3 from a directory that is
# not the source tree, with no PYTHONPATH (-I): rank 0 of 1 of epoch 0 holds
# every sample once, with the backend's bytes.
mkdir "$WORK/elsewhere"
(cd "$WORK/elsewhere" && /usr/bin/python3 -I - "$WORK/mnt/ds" "$WORK/data") <<'PY' || fail "the installed Python client"
import collections, hashlib, os, sys
import dlfs
dataset, backend = sys.argv[1:]
assert dlfs.__file__.startswith("/usr/lib/python3/dist-packages/dlfs/"), f"imported {dlfs.__file__}"
digest = lambda b: hashlib.sha256(b).hexdigest()
want = collections.Counter()
for d, _, files in os.walk(backend):
    for f in files:
        with open(os.path.join(d, f), "rb") as fh:
            want[digest(fh.read())] += 1
got = collections.Counter()
for key, members in dlfs.TarView(dataset, epoch=0, rank=0, world_size=1).samples():
    for data in members.values():
        got[digest(bytes(data))] += 1
assert got == want, f"{sum(got.values())} samples read, {sum(want.values())} in the backend, or bytes differ"
print(f"python3-dlfs {dlfs.__version__}: {sum(got.values())} samples, byte-exact")
PY

# ---- purge, the daemon serving: nothing may be left ---------------------------

start=$SECONDS
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${PACKAGES[@]}" >"$WORK/purge.log" 2>&1 ||
  { cat "$WORK/purge.log" >&2; fail "apt-get purge failed"; }
log "apt-get purge: $((SECONDS - start)) s"
if [ "$SYSTEMD" = 0 ]; then
  wait_exit "$DAEMON_PID" 5
  [ "$WAIT_RC" -eq 0 ] || fail "dlfsd exited with $WAIT_RC after the package's removal"
fi
! grep -q " $WORK/mnt" /proc/mounts || fail "still mounted after the purge: $(grep " $WORK/mnt" /proc/mounts)"
! pgrep -f '^/usr/sbin/dlfsd' >/dev/null || fail "a dlfsd still runs after the purge: $(pgrep -af '^/usr/sbin/dlfsd')"
[ -z "$(installed_packages)" ] || fail "still installed after the purge: $(installed_packages)"
left=$(while read -r f; do if [ -e "$f" ] || [ -L "$f" ]; then echo "$f"; fi; done <"$WORK/dpkg-files")
[ -z "$left" ] || fail "the purge left the packages' files: $(echo $left | head -c 400)"
left=$(grep -E '/[^/]*dlfs[^/]*$' "$WORK/dpkg-paths" | while read -r f; do if [ -e "$f" ]; then echo "$f"; fi; done)
[ -z "$left" ] || fail "the purge left the packages' directories: $(echo $left)"
log "ok"
