"""What the scenario checkers share: one way to fail, one spelling of the
fixed-record backend's arguments, and what they share with the benchmarks
(tools/bench/benchlib): the daemon's stats, its counters' growth, a file
read whole and a tree's files. Imported by the check_*.py scripts next to it
(Python puts a script's own directory first on sys.path)."""
import os
import sys

# Second on sys.path: the checkers' own directory keeps precedence.
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench"))
from benchlib.readers import files_under as backend_files, read_whole as read  # noqa: E402
from benchlib.stats import ctl_stats, mount_stats, spent_between  # noqa: E402

__all__ = ["fail", "add_fixed_backend_args", "read", "backend_files", "add_daemon_args", "daemon_stats", "ctl_stats",
           "mount_stats", "spent_between"]


def fail(msg):
    """Ends the check with a line the scenario's log shows."""
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def add_fixed_backend_args(ap, world_size=2):
    """The shape of a fixed-record backend, as 12_rounds and 14_opportunistic make it."""
    ap.add_argument("--world-size", type=int, default=world_size, help="ranks of the epoch view")
    ap.add_argument("--record-size", type=int, default=3073, help="bytes per record")
    ap.add_argument("--header-bytes", type=int, default=16, help="bytes before the first record of each file")


def add_daemon_args(ap):
    """A check against one mounted dlfsd: its mountpoint, its backend, and
    dlfs-ctl with the daemon's control socket (a.mnt, a.backend, a.ctl, a.socket)."""
    ap.add_argument("--mnt", required=True)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--ctl", required=True)
    ap.add_argument("--socket", required=True)


def daemon_stats(a):
    """The daemon's stats over its control socket (no FUSE request is counted)."""
    return ctl_stats(a.ctl, a.socket)
