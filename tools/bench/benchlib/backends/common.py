"""What the benchmarks' shared-filesystem backends (nfs.py, sshfs.py) have in
common: set up in steps, each step registering its undo, everything undone
last-first on exit, errors and signals; servers on a free port of 127.0.0.1
and FUSE clients waited for; and the same command line (`check`, `mount SRC
MNT`, `run SRC MNT -- CMD`) of nfs_backend.py and sshfs_backend.py."""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time

from ..teardown import exit_on_signals, signals_blocked, stop_process


class Unavailable(RuntimeError):
    """The backend cannot run on this machine; the message says why, in one line."""


def run(argv, check=True, **kw):
    """subprocess.run with captured text output; raises with the command's stderr."""
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({r.returncode}): {(r.stderr or r.stdout).strip()}")
    return r


def free_port():
    """A TCP port on 127.0.0.1 that is free now (a server may lose it before it binds: retry)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def log_tail(path, lines=5, skip=()):
    """The last non-empty lines of a log joined on one line, leaving out lines
    that contain any of `skip` (a server's expected complaints); "" if unreadable."""
    try:
        with open(path, errors="replace") as f:
            kept = [ln for ln in f.read().splitlines() if ln.strip() and not any(w in ln for w in skip)]
        return " | ".join(kept[-lines:])
    except OSError:
        return ""


def wait_listening(port, p, timeout):
    """True once 127.0.0.1:port accepts a connection; False if process p exits or
    `timeout` s pass first."""
    t0 = time.time()
    while time.time() - t0 < timeout and p.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def wait_mounted(mountpoint, p, what, log_path, timeout):
    """Waits until the FUSE client p has mounted `mountpoint`; raises naming
    `what`, the exit code or the timeout, and the client log's tail."""
    t0 = time.time()
    while not os.path.ismount(mountpoint):
        if p.poll() is not None or time.time() - t0 > timeout:
            raise RuntimeError(f"{what} did not mount {mountpoint} "
                               f"({'exit ' + str(p.returncode) if p.poll() is not None else 'timeout'}): "
                               f"{log_tail(log_path)}")
        time.sleep(0.05)


def unmount_fuse(mountpoint, p):
    """Unmounts a FUSE client's mount (lazily if it is busy) and stops the client."""
    if os.path.ismount(mountpoint):
        if run(["fusermount3", "-u", mountpoint], check=False).returncode != 0:
            run(["umount", "-l", mountpoint], check=False)
    stop_process(p)  # the client exits once unmounted; stop it if it did not


class Setup:
    """A context manager built in steps. Subclasses define `unavailable_reason()`
    (None or one line), `_setup()` (calls `self.undo(fn)` after each step it takes)
    and `log(msg)`. Entering checks, sets up, and on any failure undoes what was done."""

    def __init__(self):
        self._undo = []

    def undo(self, fn):
        self._undo.append(fn)

    def __enter__(self):
        reason = self.unavailable_reason()
        if reason:
            raise Unavailable(reason)
        try:
            self._setup()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        with signals_blocked():
            while self._undo:
                try:
                    self._undo.pop()()
                except Exception as e:  # keep tearing down the rest
                    self.log(f"teardown step failed: {e}")


def main_cli(name, doc, add_options, reason, make):
    """The backends' command line. add_options(parser, subcommand) adds backend
    options to each subcommand; reason(args) is None or why the backend cannot run; make(args)
    returns the Setup (with `.mountpoint` and `.run_prefix`) for args.src, args.mountpoint."""
    prog, label = f"{name}_backend.py", name.upper()
    ap = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    add_options(sub.add_parser("check", help=f"exit 0 if the {label} backend can run here, 77 (with the reason) if not"),
                "check")
    for cmd in ("mount", "run"):
        p = sub.add_parser(cmd)
        p.add_argument("src")
        p.add_argument("mountpoint")
        add_options(p, cmd)
        if cmd == "run":
            p.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if a.cmd == "check":
        why = reason(a)
        print(why or f"{label} backend available")
        sys.exit(77 if why else 0)
    if not os.path.isdir(a.src):
        sys.exit(f"{prog}: {a.src}: not a directory")
    cmd = (a.command[1:] if a.command[:1] == ["--"] else a.command) if a.cmd == "run" else None
    if a.cmd == "run" and not cmd:
        sys.exit(f"{prog} run: give a command after --")
    exit_on_signals()
    try:
        with make(a) as m:
            if a.cmd == "mount":
                m.log("mounted; SIGINT or SIGTERM unmounts and stops the server")
                try:
                    signal.pause()
                except KeyboardInterrupt:
                    pass
                return
            sys.exit(subprocess.run(m.run_prefix + cmd).returncode)
    except Unavailable as e:
        print(f"{prog}: {label} unavailable: {e}", file=sys.stderr)
        sys.exit(77)
