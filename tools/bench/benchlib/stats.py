"""A dlfsd's stats and its FUSE request counters, for the benchmarks and for
tests/integration's checkers (checklib imports this module: keep it to the
standard library).

Two ways to read them: over the control socket with dlfs-ctl, which costs no
FUSE request (so counters read that way count only what was measured), or
from <mnt>/.dlfs/stats, which is itself a FUSE read."""
import json
import os
import subprocess


def ctl_stats(ctl, sock):
    """The daemon's stats over its control socket (no FUSE request is counted)."""
    out = subprocess.run([ctl, "--socket", sock, "--json", "stats"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def mount_stats(mnt):
    """The daemon's stats read through its mount (<mnt>/.dlfs/stats)."""
    with open(os.path.join(mnt, ".dlfs", "stats")) as f:
        return json.load(f)


def try_stats(ctl, sock, mnt):
    """The stats over the control socket when there is a dlfs-ctl (`ctl` not
    None), else through the mount; None if the daemon does not answer."""
    try:
        return ctl_stats(ctl, sock) if ctl else mount_stats(mnt)
    except (OSError, ValueError, subprocess.CalledProcessError):
        return None


def fuse_requests(stats):
    """The per-opcode FUSE request counts ("fuse": {"requests": {...}}) of a
    dlfsd's stats, or None if it has none (an older dlfsd)."""
    f = (stats or {}).get("fuse")
    if not isinstance(f, dict):
        return None
    req = f.get("requests", f)
    if not isinstance(req, dict):
        return None
    flat = {k: v for k, v in req.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return flat or None


def raw_under_overlay(stats):
    """Whether the dlfsd had its dataset's raw/ under its overlay (fs/kernel/raw_overlay.h:
    Python's open() then sends no isatty() ioctl to it), None if its stats do not say."""
    o = ((stats or {}).get("fuse") or {}).get("raw_overlay")
    return bool(o.get("mounted")) if isinstance(o, dict) else None


def spent_between(before, after):
    """What counters grew by between two snapshots of a flat {name: count}."""
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def per_sample(before, after, samples):
    """Every counter's growth between two snapshots divided by `samples`, in
    name order (zeros included); None without both snapshots or samples."""
    if before is None or after is None or not samples:
        return None
    return {k: (after[k] - before.get(k, 0)) / samples for k in sorted(after)}
