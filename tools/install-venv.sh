#!/usr/bin/env bash
# Creates or refreshes the project's Python environment: Debian's python3 with its packages
# (--system-site-packages: python3-torch, python3-torchvision, python3-pil, ...) plus the pinned
# PyPI packages of tools/requirements.txt and the Python client python/dlfs (editable: the
# environment always runs the tree's client). Does nothing when both files are unchanged since
# the last run. Called by tools/install-deps.sh.
#   .venv/bin/python script.py       or     source .venv/bin/activate
# Environment: DLFS_VENV (default: .venv at the top of the tree).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
venv=${DLFS_VENV:-$top/.venv}
req=$top/tools/requirements.txt
stamp=$venv/.dlfs-installed
want=$(cat "$req" "$top/python/pyproject.toml" | sha256sum | cut -d' ' -f1)

if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "install-venv.sh: $venv is up to date"
  exit 0
fi
t0=$(date +%s)
echo "install-venv.sh: installing tools/requirements.txt into $venv (about 3.5 GB: TensorFlow and DALI)"
/usr/bin/python3 -m venv --system-site-packages "$venv"
# Every version is pinned: pip checks them and resolves nothing.
"$venv/bin/pip" install --quiet --no-input --disable-pip-version-check -r "$req"
"$venv/bin/pip" install --quiet --no-input --disable-pip-version-check --no-build-isolation --no-deps \
  --editable "$top/python"
echo "$want" >"$stamp"
echo "install-venv.sh: $venv ready in $(( $(date +%s) - t0 )) s"
