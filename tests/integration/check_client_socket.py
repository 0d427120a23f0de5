#!/usr/bin/python3
"""The daemon's end of the client socket (docs/client-protocol.md), spoken by
client_wire.py (written from the spec), against the mount as the reference.

  formats MNT NAME[:staged|:memory]... --worlds 1,3
      every rank's view of every dataset, read through the socket in batches of
      varied sizes and slots, equals the mount's .tar view: the same samples in
      the same order, their member names and bytes. :memory: every sample was
      located in the dataset memory (region 0); :staged: some were copied into
      staging (rounds, another node's stripe); :both: some of each.
  fuse CTL_SOCKET MNT NAME  a whole view read through the socket costs no FUSE request
  refused MNT NAME    (as a user who may not read NAME) open is refused, EACCES, and says who
  hostile MNT NAME    garbage, wrong fields, huge packets, passed descriptors, a flood of
                      connections: error replies or a closed connection, never a crash;
                      the daemon still serves the right bytes after
  hold MNT NAME FIFO  reads a view, then waits for a line on FIFO (the daemon is stopped
                      meanwhile): the mapped samples still hold their bytes, and the next
                      request finds the connection closed
"""
import argparse
import json
import os
import random
import socket
import struct
import subprocess
import sys
import tarfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from client_wire import Wire, WireError, find_socket  # noqa: E402


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def mount_view(mnt, name, epoch, world, rank):
    """[(member names, member bytes)] per sample of the mount's .tar view."""
    stem = os.path.join(mnt, name, "epochs", str(epoch), str(world), str(rank))
    with open(stem + ".index") as f:
        lines = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#")]
    with tarfile.open(stem + ".tar") as t:
        members = [(m.name, t.extractfile(m).read()) for m in t if m.isfile()]
    return lines, members


def wire_view(w, view, count, rng):
    """Every sample of the view through the socket: [(id, [member bytes], region, names)]."""
    out, start, slot = [], 0, 0
    while start < count:
        n = rng.choice([1, 7, 64, 500, 4096])
        got, header = w.batch(view, start, n, slot=slot, names=True)
        if header["count"] == 0:
            fail(f"batch at {start} of {count} located nothing")
        if header["count"] > n:
            fail(f"asked {n} samples, got {header['count']}")
        for (sample, parts, region), names in zip(got, header["names"]):
            out.append((sample, parts, region, names if isinstance(names, list) else [names]))
        start += header["count"]
        slot = (slot + 1) % w.info["regions"][1]["slots"]
    return out


def check_formats(a):
    rng = random.Random(7)
    worlds = [int(x) for x in a.worlds.split(",")]
    for spec in a.names:
        name, _, expect = spec.partition(":")
        path, ds = find_socket(os.path.join(a.mnt, name))
        w = Wire(path)
        info = w.open(ds)
        regions = [0, 0]
        checked = 0
        for world in worlds:
            for rank in range(world):
                epoch = world  # a view not read before through the mount
                view, count = w.view(epoch, world, rank)
                got = wire_view(w, view, count, rng)
                _, members = mount_view(a.mnt, name, epoch, world, rank)
                if len(got) != count:
                    fail(f"{name} {epoch}/{world}/{rank}: {len(got)} samples through the socket, the view has {count}")
                pos = 0
                for k, (sample, parts, region, names) in enumerate(got):
                    regions[region] += 1
                    if len(names) != len(parts):
                        fail(f"{name} {epoch}/{world}/{rank} position {k}: {len(names)} names, {len(parts)} members")
                    for j, (mname, mdata) in enumerate(zip(names, parts)):
                        if pos >= len(members):
                            fail(f"{name} {epoch}/{world}/{rank}: the socket gave more members than the .tar holds")
                        tname, tdata = members[pos]
                        if tname != mname:
                            fail(f"{name} {epoch}/{world}/{rank} position {k} member {j}: '{mname}' through the "
                                 f"socket, '{tname}' in the .tar view")
                        if mdata != tdata:
                            fail(f"{name} {epoch}/{world}/{rank} position {k} ({mname}): bytes differ from the "
                                 f".tar view's ({len(mdata)} vs {len(tdata)} bytes)")
                        pos += 1
                if pos != len(members):
                    fail(f"{name} {epoch}/{world}/{rank}: the socket gave {pos} members, the .tar view {len(members)}")
                checked += len(got)
        w.close()
        print(f"[{name}] {info['format']}{' grouped' if info['grouped'] else ''}: {checked} samples over W "
              f"{a.worlds} equal the mount's .tar views; in dataset memory {regions[0]}, staged {regions[1]}")
        if expect == "memory" and regions[1]:
            fail(f"{name}: {regions[1]} samples were staged, every one should be in the dataset memory")
        if expect in ("staged", "both") and not regions[1]:
            fail(f"{name}: no sample was staged (rounds and other nodes' samples are copied into staging)")
        if expect == "both" and not regions[0]:
            fail(f"{name}: no sample was in this node's dataset memory")


def fuse_requests(ctl_socket):
    out = subprocess.run([os.environ["DLFS_CTL"], "--socket", ctl_socket, "--json", "stats"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["fuse"]["requests"]


def check_fuse(a):
    before = fuse_requests(a.ctl)
    path, ds = find_socket(os.path.join(a.mnt, a.name))  # the xattrs: a LOOKUP and GETXATTRs, before
    mid = fuse_requests(a.ctl)
    w = Wire(path)
    w.open(ds)
    view, count = w.view(11, 1, 0)
    n = 0
    while n < count:
        got, header = w.batch(view, n, 4096)
        n += header["count"]
        if any(region for _, _, region in got):
            fail("a resident dataset's sample was staged")
    after = fuse_requests(a.ctl)
    grew = {k: after.get(k, 0) - mid.get(k, 0) for k in after if isinstance(after.get(k), int)
            and after.get(k, 0) != mid.get(k, 0)}
    print(f"finding the socket: {sum(mid.get(k, 0) - before.get(k, 0) for k in mid if isinstance(mid.get(k), int))} "
          f"FUSE requests; {count} samples through it: {sum(grew.values())} ({grew or 'none'})")
    if grew:
        fail(f"reading {count} resident samples through the socket sent FUSE requests: {grew}")


def check_refused(a):
    path, ds = find_socket_as_root_given(a)
    w = Wire(path)
    try:
        w.open(ds)
    except WireError as e:
        if e.code != "EACCES" or "may not read" not in e.header["error"]:
            fail(f"refused, but not as expected: {e}")
        print(f"uid {os.getuid()} refused: {e.header['error']}")
        return
    fail(f"uid {os.getuid()} opened dataset '{ds}', whose views it may not read")


def find_socket_as_root_given(a):
    # A user who may not read a dataset cannot read its view files' xattrs either:
    # the socket and name come from the command line.
    return a.socket, a.name


def expect_error(w, packet, code=None, what=""):
    header, _, fds = w.send_raw(packet)
    for fd in fds:
        os.close(fd)
    if header.get("ok") is not False or "error" not in header or "code" not in header:
        fail(f"{what or packet[:60]!r}: not an error reply: {header}")
    if code and header["code"] != code:
        fail(f"{what or packet[:60]!r}: {header['code']} ({header['error']}), expected {code}")
    return header


def check_hostile(a):
    rng = random.Random(11)
    path, ds = find_socket(os.path.join(a.mnt, a.name))
    w = Wire(path)
    for packet, code in [
        (b"\x00\xff garbage", "EINVAL"), (b"[1, 2]", "EINVAL"), (b'{"op": 3}', "EINVAL"),
        (b'{"op": "view", "epoch": 0, "world_size": 1, "rank": 0}', "EINVAL"),  # before open
        (b'{"op": "open", "version": 2, "dataset": "x"}', "EPROTO"),
        (b'{"op": "open", "version": 1}', "EINVAL"),
        (b'{"op": "open", "version": 1, "dataset": "no-such"}', "ENOENT"),
        (b'{"op": "rm -rf"}', "EINVAL"),
    ]:
        expect_error(w, packet, code)
    w.open(ds)
    expect_error(w, json.dumps({"op": "open", "version": 1, "dataset": ds}).encode(), "EBUSY")
    view, count = w.view(0, 2, 1)
    for req in [{"op": "batch", "view": 0, "start": 0, "count": 1, "slot": 0},
                {"op": "batch", "view": view + 1, "start": 0, "count": 1, "slot": 0},
                {"op": "batch", "view": view, "start": -1, "count": 1, "slot": 0},
                {"op": "batch", "view": view, "start": 0, "count": 4097, "slot": 0},
                {"op": "batch", "view": view, "start": 0, "count": 1, "slot": 4},
                {"op": "batch", "view": view, "start": 0, "count": "1", "slot": 0},
                {"op": "batch", "view": view, "start": 0, "count": 1.5, "slot": 0},
                {"op": "batch", "view": view, "start": 0, "count": 1, "slot": 0, "names": "yes"},
                {"op": "view", "epoch": 0, "world_size": 2, "rank": 2},
                {"op": "view", "epoch": 0, "world_size": 0, "rank": 0},
                {"op": "view", "epoch": 2 ** 40, "world_size": 1, "rank": 0}]:
        expect_error(w, json.dumps(req).encode(), "EINVAL", what=json.dumps(req))
    # Past the end: no sample, not an error.
    got, header = w.batch(view, count + 5, 10)
    if header["count"] != 0:
        fail(f"a batch past the view's end located {header['count']} samples")
    # A packet over 64 KiB.
    expect_error(w, b"{" + b" " * (70 << 10) + b"}", "EMSGSIZE")
    # Descriptors passed to the daemon are dropped, the request still answered.
    r, wr = os.pipe()
    w.sock.sendmsg([json.dumps({"op": "batch", "view": view, "start": 0, "count": 2, "slot": 1}).encode()],
                   [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("ii", r, wr))])
    header, _, _ = w.receive()
    if not header.get("ok"):
        fail(f"a request with descriptors attached: {header}")
    os.close(r)
    os.close(wr)
    # Random fuzz: random bytes and random JSON; every reply an error or a close.
    closed = 0
    for i in range(400):
        kind = rng.randrange(3)
        if kind == 0:
            packet = rng.randbytes(rng.randrange(1, 300))
        elif kind == 1:
            packet = json.dumps({rng.choice(["op", "view", "start", "x"]): rng.choice(
                [None, -1, 2 ** 70, "batch", "open", [], {}, 1e308, "\u00e9" * 5])
                for _ in range(rng.randrange(1, 5))}).encode()
        else:
            packet = json.dumps({"op": "batch", "view": rng.choice([view, 0, 99, -5, 2 ** 64]),
                                 "start": rng.choice([0, count, 2 ** 63, -1]), "count": rng.choice([0, 1, 10 ** 9]),
                                 "slot": rng.choice([0, 3, 4, -1])}).encode()
        try:
            header, _, fds = w.send_raw(packet)
            for fd in fds:
                os.close(fd)
            if "ok" not in header:
                fail(f"reply without 'ok' to {packet[:80]!r}")
        except (EOFError, ConnectionResetError, BrokenPipeError):
            closed += 1  # 16 bad requests in a row close the connection
            w = Wire(path)
            w.open(ds)
            view, count = w.view(0, 2, 1)
    # Sixteen bad requests in a row close the connection.
    w2 = Wire(path)
    try:
        for _ in range(16):
            expect_error(w2, b"nope")
        w2.send_raw(b"nope")
        fail("the connection stayed open after 16 bad requests in a row")
    except (EOFError, ConnectionResetError, BrokenPipeError):
        pass
    # A flood of idle connections: some may be refused (EBUSY), the daemon lives.
    flood = []
    busy = 0
    for _ in range(300):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            s.connect(path)
        except OSError:
            busy += 1
            s.close()
            continue
        flood.append(s)
    time.sleep(0.5)
    for s in flood:  # those past the daemon's limit were told so and closed
        s.setblocking(False)
        try:
            data = s.recv(1 << 16)
            if data and json.loads(data[4:4 + struct.unpack_from("<I", data)[0]]).get("code") == "EBUSY":
                busy += 1
        except OSError:  # nothing to read: served
            pass
        s.close()
    # Still serving the right bytes.
    w3 = Wire(path)
    w3.open(ds)
    view3, count3 = w3.view(0, 1, 0)
    got, _ = w3.batch(view3, 0, 50)
    lines, members = mount_view(a.mnt, a.name, 0, 1, 0)
    for (sample, parts, region), (mname, mdata) in zip(got, members):
        if parts[0] != mdata:
            fail(f"after the fuzzing, sample {sample} differs from the mount's")
    print(f"hostile: error replies for every bad request, {closed} connections closed by the daemon after 16 bad "
          f"requests in a row, {busy} of 300 idle connections refused; the daemon serves the right bytes after")


def check_hold(a):
    path, ds = find_socket(os.path.join(a.mnt, a.name))
    w = Wire(path)
    w.open(ds)
    view, count = w.view(0, 1, 0)
    header, payload, _ = w.call({"op": "batch", "view": view, "start": 0, "count": min(count, 200), "slot": 0})
    records = [struct.unpack_from("<QQIHH", payload, 24 * i) for i in range(header["count"])]
    copies = [bytes(w.regions[r[3]][r[0]:r[0] + r[2]]) for r in records]
    print("holding", flush=True)
    with open(a.fifo) as f:
        f.readline()  # the daemon has been stopped
    for r, c in zip(records, copies):
        if bytes(w.regions[r[3]][r[0]:r[0] + r[2]]) != c:
            fail(f"sample {r[1]}'s mapped bytes changed after the daemon stopped")
    try:
        w.call({"op": "batch", "view": view, "start": 0, "count": 1, "slot": 0})
        fail("a request to a stopped daemon was answered")
    except (EOFError, ConnectionResetError, BrokenPipeError):
        pass
    print(f"after the daemon stopped: the {len(records)} samples mapped still hold their bytes; the next request "
          f"finds the connection closed")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("formats")
    f.add_argument("mnt")
    f.add_argument("names", nargs="+")
    f.add_argument("--worlds", default="1,3")
    u = sub.add_parser("fuse")
    u.add_argument("ctl")
    u.add_argument("mnt")
    u.add_argument("name")
    r = sub.add_parser("refused")
    r.add_argument("socket")
    r.add_argument("name")
    h = sub.add_parser("hostile")
    h.add_argument("mnt")
    h.add_argument("name")
    d = sub.add_parser("hold")
    d.add_argument("mnt")
    d.add_argument("name")
    d.add_argument("fifo")
    a = ap.parse_args()
    {"formats": check_formats, "fuse": check_fuse, "refused": check_refused, "hostile": check_hostile,
     "hold": check_hold}[a.cmd](a)


if __name__ == "__main__":
    main()
