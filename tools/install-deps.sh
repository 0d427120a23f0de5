#!/usr/bin/env bash
# Installs every Debian package DLFS needs to build, test and benchmark, then the project's
# Python environment (.venv at the top of the tree, or $DLFS_VENV) from tools/requirements.txt:
# the clients and loaders users run (webdataset, TensorFlow, DALI, Mosaic Streaming, Hugging Face
# datasets), pinned, from PyPI. Idempotent; run as root on Debian 12.
# Usage: tools/install-deps.sh [--quickstart]
#   --quickstart  only what tools/quickstart.sh runs: the build, dlfsd's libraries, FUSE and
#                 Debian's python3 (no test tools, no benchmarks, no Python environment)
set -euo pipefail

mode=all
case "${1:-}" in
  "") ;;
  --quickstart) mode=quickstart ;;
  -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
  *) echo "install-deps.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

# What building dlfsd and dlfs-ctl and running the quick start need.
quickstart_packages=(
  # build
  meson ninja-build pkg-config g++
  help2man  # makes dlfs-slurm-launch(1) (docs/man/; Meson's set-up looks for it)
  # libraries (found through pkg-config)
  libfuse3-dev liburing-dev libucx-dev liblmdb-dev libspdlog-dev libfmt-dev
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libxxhash-dev libzstd-dev libsodium-dev
  libisal-dev  # CRC32C for TFRecord
  libcivetweb-dev  # the HTTP server of dlfsd's Prometheus endpoint (metrics_address, docs/metrics.md)
  libibverbs-dev rdma-core
  # running it: the mount, the sample generator and the reads (Debian's python3)
  fuse3 python3 procps
)

packages=(
  "${quickstart_packages[@]}"
  # tests
  # the man pages rendered by the man_pages test
  man-db groff-base
  # the Debian packages (debian/) and their scenario 55_debian_package: dpkg-buildpackage, debhelper
  # with dh-python, lintian
  dpkg-dev build-essential debhelper dh-python lintian
  libgtest-dev libgmock-dev util-linux iproute2 lmdb-utils python3-lmdb ucx-utils tar attr
  python3-crcmod  # an independent CRC32C for the TFRecord scenario
  # the real client: PyTorch reading Fashion-MNIST through the epoch views
  python3-torch python3-numpy dataset-fashion-mnist
  # torchvision's ImageFolder (tests/clients), and what the venv's pinned packages expect to find
  python3-torchvision python3-venv
  # Fashion-MNIST as WebDataset shards of PNGs (28_fashion_mnist_wds)
  python3-pil
  # a one-host Slurm for the launcher's scenario (24_real_slurm)
  slurmctld slurmd slurm-client munge
  # the Python client (python/): pip install --no-build-isolation uses Debian's setuptools
  python3-pip python3-setuptools
  # benchmarks; python3-matplotlib draws their PNG figures (tools/bench/plots.py)
  fio python3-matplotlib
  # the sshfs backend of tools/bench/pipeline_bench.py (tools/bench/sshfs_backend.py starts its own sshd).
  sshfs openssh-server
  # its NFS backend where the kernel has no nfsd nor NFS client (nfs_backend.py's ganesha mode): a
  # user-space NFS server, and libnfs for the FUSE client tools/bench/dlfs-bench-nfsmount. The kernel
  # mode's nfs-kernel-server and nfs-common are not listed: this project's kernels cannot use them;
  # `tools/bench/nfs_backend.py check` names them where a kernel can.
  nfs-ganesha nfs-ganesha-vfs libnfs-dev
  # the Prometheus scenario (56_prometheus): the real server scrapes dlfsd, promtool checks its output
  # (the scenario runs its own prometheus on a free loopback port; the system's service is kept off below)
  prometheus curl
)

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: run as root (it calls apt-get)" >&2
  exit 1
fi

[ "$mode" = quickstart ] && packages=("${quickstart_packages[@]}")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps.sh: all ${#packages[@]} packages already installed"
else
echo "install-deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Installing openssh-server makes its postinst start and enable the system's sshd (port 22, all
# addresses); DLFS never needs it. Where openssh-server is new, Debian's documented off switch
# /etc/ssh/sshd_not_to_be_run (checked by ssh.service and /etc/init.d/ssh) keeps it from starting;
# delete that file to run the system's sshd. Where it was installed before, nothing changes.
if [[ " ${missing[*]} " == *" openssh-server "* ]] && [ ! -e /etc/ssh/sshd_config ]; then
  mkdir -p /etc/ssh
  echo "created by DLFS's tools/install-deps.sh: the system's sshd stays off; delete to enable it" \
    >/etc/ssh/sshd_not_to_be_run
fi
# Installing prometheus makes its postinst start the system's Prometheus (port 9090, all
# addresses, scraping localhost) where it can; DLFS's scenario runs its own. While apt-get runs, a
# temporary /usr/sbin/policy-rc.d (Debian's documented hook, asked by invoke-rc.d and
# deb-systemd-invoke before starting any service) refuses to start prometheus (exit 101) and lets
# every other service start as before; it is removed afterwards, and never replaces one already
# there. A newly installed prometheus is also left disabled at boot (`update-rc.d prometheus
# enable`, or `systemctl enable --now prometheus`, to run the system's Prometheus).
policy=/usr/sbin/policy-rc.d
made_policy=
new_prometheus=
if [[ " ${missing[*]} " == *" prometheus "* ]]; then
  new_prometheus=1
  if [ ! -e "$policy" ]; then
    made_policy=1
    trap 'rm -f "$policy"' EXIT
    cat >"$policy" <<'POLICY'
#!/bin/sh
# Temporary, made by DLFS's tools/install-deps.sh while it installs packages: the system's
# Prometheus must not start (DLFS's scenario runs its own). Removed when the install ends.
case "$1" in
  prometheus|prometheus-node-exporter) exit 101 ;;
esac
exit 0
POLICY
    chmod 0755 "$policy"
  fi
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
if [ -n "$made_policy" ]; then
  rm -f "$policy"
  trap - EXIT
fi
if [ -n "$new_prometheus" ]; then
  if [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus.service >/dev/null 2>&1 || true
  else
    update-rc.d prometheus disable >/dev/null 2>&1 || true
  fi
  # A policy-rc.d that was already there may have let it start: stop the system's instance (it
  # runs as user prometheus), never one a user started by hand.
  if pgrep -u prometheus -x prometheus >/dev/null 2>&1; then
    echo "install-deps.sh: stopping the system Prometheus its package started"
    if [ -x /etc/init.d/prometheus ]; then /etc/init.d/prometheus stop >/dev/null 2>&1 || true; fi
    sleep 1
    left=$(pgrep -u prometheus -x prometheus || true)
    if [ -n "$left" ]; then kill $left 2>/dev/null || true; fi
  fi
fi
fi

if [ "$mode" = all ]; then
  "$(dirname "$0")/install-venv.sh"
fi
echo "install-deps.sh: done"
