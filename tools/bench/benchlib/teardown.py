"""A benchmark leaves nothing behind: SIGTERM and SIGHUP become a normal exit
(so `with` blocks and `finally` run), and while it tears down those signals
wait until it is done."""
import contextlib
import signal
import subprocess


def exit_on_signals():
    """SIGTERM/SIGHUP raise SystemExit, so `with`-blocks and `finally` tear down."""
    def handler(signum, _frame):
        raise SystemExit(128 + signum)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, handler)


# Held off while tearing down: a second SIGTERM, or a SIGCHLD on which PyTorch's
# DataLoader handler raises (a worker was killed), would otherwise abort the teardown
# half-way and leave mounts and servers behind. They are delivered once it is done.
TEARDOWN_BLOCKED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD}


@contextlib.contextmanager
def signals_blocked():
    old = signal.pthread_sigmask(signal.SIG_BLOCK, TEARDOWN_BLOCKED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class Teardown(contextlib.ExitStack):
    """An ExitStack for what a benchmark sets up (mounts, then daemons that use
    them): entering it turns SIGTERM/SIGHUP into an exit; leaving it unwinds
    last-first with those signals held off, so that none cuts the unwinding short."""

    def __enter__(self):
        exit_on_signals()
        return super().__enter__()

    def __exit__(self, *exc):
        with signals_blocked():
            return super().__exit__(*exc)


def stop_process(p, timeout=10):
    """SIGTERM, then SIGKILL after `timeout` s; reaps the process."""
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
