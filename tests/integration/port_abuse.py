#!/usr/bin/env python3
"""What anyone who reaches a daemon's UCX port can do without the job token
(tests/integration/23_cluster_auth.sh): plain TCP, no UCX.

  port_abuse.py garbage HOST PORT [--rounds N] [--seed S]
      connects N times and each time writes something that is not what UCX's
      connection manager expects (random bytes, a huge length header, a
      partial header, a flood of zeros, a connection reset at once), then
      closes; exits 0 once every round is done (the daemon may close first).
  port_abuse.py hold HOST PORT --count N --until FILE [--max-seconds S]
      opens N connections that stay half-open: some send nothing, some a
      few bytes of a header, and never finish; prints "holding N" once they
      are open, and keeps them until FILE exists (or S seconds passed), then
      closes them. Exits 0.
  port_abuse.py partial HOST PORT --count N --until FILE [--frame-bytes B]
      opens N connections that greet as a DLFS daemon would ("DLFSCTL1"),
      announce a frame of B bytes (default 4 MiB, the largest allowed) and
      send all of it but its last byte (what the port takes within 20 s);
      prints "holding N, sent X bytes"; once FILE exists (or S seconds
      passed) prints "closed by the daemon K of N" and closes the rest.

Only ever aimed at an address on this machine (the scenario's daemons).
Every loop is bounded in count and time.
"""
import argparse
import os
import random
import socket
import struct
import sys
import time


def connect(host, port, timeout=5.0):
    s = socket.create_connection((host, port), timeout=timeout)
    s.settimeout(timeout)
    return s


def payloads(rng):
    """What one round writes: a list of byte strings (or None: reset at once)."""
    return [
        bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 4096))),
        struct.pack("<Q", 0xFFFFFFFFFFFFFFFF) + b"\xff" * 64,  # an absurd length header
        struct.pack("<QQ", 1 << 40, 0) + b"A" * 100,
        b"\x00" * 65536,
        b"\x01\x00",  # a header cut short, then close
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        None,
    ]


def send_garbage(host, port, rounds, seed):
    rng = random.Random(seed)
    done = 0
    for r in range(rounds):
        for p in payloads(rng):
            try:
                s = connect(host, port)
            except OSError as e:
                print(f"round {r}: connect failed: {e}", file=sys.stderr)
                return 1
            try:
                if p is None:  # RST instead of FIN
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                else:
                    s.sendall(p)
                    s.shutdown(socket.SHUT_WR)
                    # Drain whatever the peer answers (bounded), then close.
                    deadline = time.monotonic() + 0.5
                    while time.monotonic() < deadline:
                        try:
                            if not s.recv(65536):
                                break
                        except (socket.timeout, OSError):
                            break
            except OSError:
                pass  # the daemon closed first: fine
            finally:
                s.close()
            done += 1
    print(f"sent {done} garbage connections")
    return 0


def hold(host, port, count, until, max_seconds):
    socks = []
    for i in range(count):
        s = connect(host, port)
        if i % 2:
            s.sendall(b"\x10\x00\x00")  # the start of something, never finished
        socks.append(s)
    print(f"holding {len(socks)}", flush=True)
    deadline = time.monotonic() + max_seconds
    while not os.path.exists(until) and time.monotonic() < deadline:
        time.sleep(0.1)
    for s in socks:
        s.close()
    return 0


def closed_by_peer(s):
    """Whether the other side has closed or reset `s` (what it sent, such as
    its greeting, is read and dropped on the way)."""
    while True:
        try:
            if s.recv(65536, socket.MSG_DONTWAIT) == b"":
                return True
        except BlockingIOError:
            return False
        except OSError:
            return True


def partial(host, port, count, until, max_seconds, frame_bytes):
    body = bytes(frame_bytes - 1)
    head = b"DLFSCTL1" + struct.pack("<IB", frame_bytes, 0)
    socks, pending, sent = [], [], 0
    for _ in range(count):
        s = connect(host, port)
        s.setblocking(False)
        socks.append(s)
        pending.append(memoryview(head + body))
    # Round robin, never blocking: the daemon stops reading when its budget is spent.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(len(p) for p in pending):
        progress = False
        for i, s in enumerate(socks):
            if not len(pending[i]):
                continue
            try:
                n = s.send(pending[i][:1 << 20])
            except BlockingIOError:
                continue
            except OSError:
                pending[i] = memoryview(b"")  # closed by the daemon
                continue
            pending[i] = pending[i][n:]
            sent += n
            progress = True
        if not progress:
            time.sleep(0.01)
    print(f"holding {len(socks)}, sent {sent} bytes", flush=True)
    deadline = time.monotonic() + max_seconds
    while not os.path.exists(until) and time.monotonic() < deadline:
        time.sleep(0.1)
    closed = sum(1 for s in socks if closed_by_peer(s))
    print(f"closed by the daemon {closed} of {len(socks)}", flush=True)
    for s in socks:
        s.close()
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["garbage", "hold", "partial"])
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--until", default="")
    ap.add_argument("--max-seconds", type=float, default=120)
    ap.add_argument("--frame-bytes", type=int, default=4 << 20)
    a = ap.parse_args()
    if not a.host.startswith("127.") and a.host not in ("localhost", "::1") and not a.host.startswith("10.213.0."):
        print("port_abuse.py: only the scenario's own addresses", file=sys.stderr)
        return 2
    if a.mode == "garbage":
        return send_garbage(a.host, a.port, a.rounds, a.seed)
    if not a.until:
        ap.error(f"{a.mode} needs --until FILE")
    if a.mode == "partial":
        return partial(a.host, a.port, a.count, a.until, a.max_seconds, a.frame_bytes)
    return hold(a.host, a.port, a.count, a.until, a.max_seconds)


if __name__ == "__main__":
    sys.exit(main())
