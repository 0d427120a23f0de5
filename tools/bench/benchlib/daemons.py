"""FUSE servers for a benchmark (dlfsd, the ceiling): started with their log in
the workdir, waited for until they serve, and always stopped and unmounted,
also on errors and signals (`with Daemons() as daemons:`)."""
import collections
import os
import subprocess
import sys
import time

from . import stats
from .teardown import exit_on_signals, signals_blocked, stop_process


def dlfsd_argv(dlfsd, mnt, backend, sock, extra=(), name="ds", seed=None):
    """The command line of a dlfsd serving directory `backend` as dataset `name`."""
    argv = [dlfsd, "--mountpoint", mnt, "--backend", backend, "--name", name]
    if seed is not None:
        argv += ["--seed", str(seed)]
    return argv + ["--control-socket", sock, *extra]


def loaded(mnt):
    """Whether the dlfsd at `mnt` has loaded every dataset and is done with its
    overlays: what a measurement of resident data waits for."""
    try:
        s = stats.mount_stats(mnt)
        # A dataset still scanning has no "load" yet (dlfsd mounts before it scans).
        if not all(d.get("load", {}).get("state") == "done" for d in s["datasets"]):
            return False
        return raw_overlays_settled(s)
    except (OSError, ValueError):
        return False


def raw_overlays_settled(s):
    """Whether dlfsd is done with the overlays over raw/ (fs/kernel/raw_overlay.h): where
    its stats say the overlay is in effect ("mode" not "off"), it mounts one per
    dataset just after the dataset's load, and a measurement must not start with
    raw/ changing under it."""
    o = (s.get("fuse") or {}).get("raw_overlay")
    if not isinstance(o, dict) or o.get("mode") == "off":  # off in effect: not root, allow_other off, or asked
        return True
    return len(o.get("mounted", [])) + o.get("failures", 0) >= len(s["datasets"])


def answers(mnt):
    """Whether a dlfsd's mount answers (its stats file exists), loaded or not."""
    return os.path.exists(os.path.join(mnt, ".dlfs/stats"))


Served = collections.namedtuple("Served", "mnt sock proc")


class Daemons:
    """Starts FUSE servers, always stops them and unmounts (also on errors/signals)."""

    def __init__(self):
        self.procs = []  # (Popen, mountpoint, name)
        self._logs = []

    def __enter__(self):
        exit_on_signals()
        return self

    def __exit__(self, *exc):
        with signals_blocked():
            self.stop_all()

    def spawn(self, name, argv, mnt, log_path, env=None):
        """Starts a server without waiting for it; stop_all stops it. The Popen's
        `started` is the perf_counter() right before the server was started."""
        os.makedirs(mnt, exist_ok=True)
        logf = open(log_path, "w")
        self._logs.append(logf)
        started = time.perf_counter()
        p = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT,
                             env=dict(os.environ, **env) if env else None)
        p.started = started
        self.procs.append((p, mnt, name))
        return p

    @staticmethod
    def wait(p, name, ready, log_path, timeout=120, poll=0.1):
        """Returns once ready() is true; exits with the server's log if it ends or times out first."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if p.poll() is not None:
                sys.exit(f"{name} exited with {p.returncode} before it was ready; log:\n" + open(log_path).read())
            if ready():
                return p
            time.sleep(poll)
        sys.exit(f"{name} not ready after {timeout}s; log:\n" + open(log_path).read())

    def start(self, name, argv, mnt, ready, log_path, timeout=120, env=None):
        """spawn, then wait until ready(); returns the Popen."""
        return self.wait(self.spawn(name, argv, mnt, log_path, env), name, ready, log_path, timeout)

    def serve(self, dlfsd, workdir, tag, backend, extra=(), prefix="views", seed=1, ready=loaded, env=None):
        """A dlfsd serving `backend` as dataset ds at <workdir>/mnt-<prefix>-<tag>
        (socket <prefix>-<tag>.sock, log dlfsd-<prefix>-<tag>.log), returned once
        ready(mnt) (default: loaded). The default prefix is the one views_bench.py
        gave its daemons: the scripts that share its workdir keep those names."""
        mnt = os.path.join(workdir, f"mnt-{prefix}-{tag}")
        sock = os.path.join(workdir, f"{prefix}-{tag}.sock")
        p = self.start("dlfsd", dlfsd_argv(dlfsd, mnt, backend, sock, extra, seed=seed), mnt,
                       lambda: ready(mnt), os.path.join(workdir, f"dlfsd-{prefix}-{tag}.log"), env=env)
        return Served(mnt, sock, p)

    def stop_all(self):
        for p, mnt, _name in self.procs:
            stop_process(p, timeout=30)
            with open("/proc/mounts") as f:
                if f" {mnt} " in f.read():
                    subprocess.run(["fusermount3", "-u", "-z", mnt], check=False)
        self.procs = []
        for f in self._logs:
            f.close()
        self._logs = []


def run_parts(a, parts, *args):
    """{name: parts[name](a, daemons, *args)} for each part --only names, in its
    order, with one Daemons: a part that fails or is interrupted leaves no
    daemon running."""
    with Daemons() as daemons:
        return {name: parts[name](a, daemons, *args) for name in a.only.split(",")}
