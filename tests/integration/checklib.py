"""What the scenario checkers share: one way to fail, one spelling of the
fixed-record backend's arguments. Imported by the check_*.py scripts next to
it (Python puts a script's own directory first on sys.path)."""
import json
import os
import subprocess
import sys


def fail(msg):
    """Ends the check with a line the scenario's log shows."""
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def add_fixed_backend_args(ap, world_size=2):
    """The shape of a fixed-record backend, as 12_rounds and 14_opportunistic make it."""
    ap.add_argument("--world-size", type=int, default=world_size, help="ranks of the epoch view")
    ap.add_argument("--record-size", type=int, default=3073, help="bytes per record")
    ap.add_argument("--header-bytes", type=int, default=16, help="bytes before the first record of each file")


def read(path):
    """A file's bytes, read whole with Python's open() (as user code does)."""
    with open(path, "rb") as f:
        return f.read()


def backend_files(root):
    """Every file under `root`, as sorted paths relative to it."""
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def add_daemon_args(ap):
    """A check against one mounted dlfsd: its mountpoint, its backend, and
    dlfs-ctl with the daemon's control socket (a.mnt, a.backend, a.ctl, a.socket)."""
    ap.add_argument("--mnt", required=True)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--ctl", required=True)
    ap.add_argument("--socket", required=True)


def daemon_stats(a):
    """The daemon's stats over its control socket (no FUSE request is counted)."""
    out = subprocess.run([a.ctl, "--socket", a.socket, "--json", "stats"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def spent_between(before, after):
    """What counters grew by between two snapshots of a flat {name: count}."""
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
