#!/usr/bin/env python3
"""A TCP listener and client for the network namespace self-test: checks that
a connection reaches a listener bound to a node's address and that its reply
comes back.

Used by netns_selftest.sh:

  tcp_echo.py serve HOST PORT READY_FILE [--clients 2] [--timeout 30]
      listens on HOST:PORT, creates READY_FILE once listening, then answers
      CLIENTS connections, each with the bytes it received reversed plus
      " from <the client's address>"; fails if a client does not come within
      TIMEOUT seconds.
  tcp_echo.py ask HOST PORT [--message olleh] [--timeout 5]
      connects, sends MESSAGE and prints the reply.
"""
import argparse
import socket

from checklib import fail


def serve(args):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((args.host, args.port))
    s.listen(4)
    s.settimeout(args.timeout)
    open(args.ready, "w").close()
    for k in range(args.clients):
        try:
            c, peer = s.accept()
        except socket.timeout:
            fail(f"client {k + 1} of {args.clients} did not connect to {args.host}:{args.port} within {args.timeout} s")
        data = c.recv(100)
        c.sendall(data[::-1] + b" from " + peer[0].encode())
        c.close()


def ask(args):
    try:
        c = socket.create_connection((args.host, args.port), timeout=args.timeout)
        c.sendall(args.message.encode())
        print(c.recv(100).decode())
    except OSError as e:
        fail(f"{args.host}:{args.port}: {e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="the listener")
    s.add_argument("host")
    s.add_argument("port", type=int)
    s.add_argument("ready", help="created once listening")
    s.add_argument("--clients", type=int, default=2)
    s.add_argument("--timeout", type=float, default=30)
    s.set_defaults(func=serve)
    a = sub.add_parser("ask", help="a client")
    a.add_argument("host")
    a.add_argument("port", type=int)
    a.add_argument("--message", default="olleh")
    a.add_argument("--timeout", type=float, default=5)
    a.set_defaults(func=ask)
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
