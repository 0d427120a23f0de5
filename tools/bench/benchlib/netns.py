"""Network namespaces as cluster nodes for a benchmark: tests/integration/netns_lib.sh
(veth pairs through a bridge in a namespace of its own), from Python."""
import os
import subprocess
import sys

from . import SRC

NETNS_LIB = os.path.join(SRC, "tests/integration/netns_lib.sh")


def netns(cmd, tag, n=0, need_ucx=False):
    """cmd "up": n namespaces (exits saying why if they cannot be made), "down": deletes
    them. Returns the namespaces' names and the nodes' addresses."""
    script = f'set -euo pipefail; skip() {{ echo "$*" >&2; exit 77; }}; source {NETNS_LIB}; '
    require = "require_netns ucx" if need_ucx else "require_netns"
    script += {"up": f"{require}; netns_up {tag} {n}", "down": f"netns_down {tag}"}[cmd]
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    if r.returncode != 0 and cmd == "up":
        sys.exit(f"cannot build {n} network namespaces: {r.stderr.strip()}")
    return [f"dlfs-{tag}-n{i}" for i in range(n)], [f"10.213.0.{i + 1}" for i in range(n)]
