"""A fake dlfsd client socket (docs/client-protocol.md) for the Python
client's tests: a thread serving SOCK_SEQPACKET in a temporary directory,
region 0 a sealed memfd holding the resident samples (with filler between
them, so a wrong offset reads wrong bytes), region 1 a memfd per connection
with `slots` slots, staging the other samples per batch request. Batches
come back short when the slot is full or `max_count` is reached; `fail`,
`garbage` and `restart` inject the faults the client must handle.

dataset_from_views() builds the dataset from views written with
viewfixture (the same files the mount path reads), so both paths can be
compared sample by sample."""
import fcntl
import json
import os
import socket
import struct
import tarfile
import threading

from dlfs.index import ViewIndex

F_SEAL_FUTURE_WRITE = 0x10
_servers = iter(range(1, 1 << 30))
FILLER = 0xEE


class FakeDataset:
    """samples: {id: [(member name, bytes)]} (one member unless grouped);
    views: {(epoch, world_size, rank): [ids in view order]}; resident: the
    ids in region 0 (the others are staged); spans: {id: bytes} a grouped
    sample's bytes as the daemon serves them, its members inside with
    anything between them (tar headers); without one, the members back to
    back."""

    def __init__(self, name, samples, views, resident, grouped=False, fixed_size=0, fmt="files",
                 opportunistic=(), spans=None):
        self.name, self.samples, self.views, self.resident = name, samples, views, set(resident)
        self.grouped, self.fixed_size, self.format = grouped, fixed_size, fmt
        self.opportunistic = set(opportunistic)
        self.spans = spans or {}

    def data(self, sid):
        span = self.spans.get(sid)
        return span[0] if span is not None else b"".join(d for _, d in self.samples[sid])

    def layout(self, sid):
        """[(offset in the sample, length)] of its members."""
        span = self.spans.get(sid)
        if span is not None:
            return span[1]
        out, at = [], 0
        for _, d in self.samples[sid]:
            out.append((at, len(d)))
            at += len(d)
        return out


def dataset_from_views(root, keys, name="t", resident=lambda sid: (sid * 7) % 5 >= 2, fixed_size=0, fmt="files"):
    """The dataset behind the views `keys` [(epoch, W, r)] under root, read
    from their .index and .tar. A grouped view's sample is served as a
    WebDataset shard's would be: from its first member's data to its last
    one's end, the tar headers between members inside."""
    samples, views, spans, grouped = {}, {}, {}, False
    for epoch, world, rank in keys:
        stem = os.path.join(root, "epochs", str(epoch), str(world), str(rank))
        index = ViewIndex(stem + ".index")
        grouped = index.grouped
        with open(stem + ".tar", "rb") as f:
            blob = f.read()
        if grouped:
            with tarfile.open(stem + ".tar") as t:
                infos = [m for m in t if m.isfile()]
        for k, sid in enumerate(index.ids):
            if grouped:
                inside = [m for m in infos if index.begins[k] <= m.offset < index.ends[k]]
                first = inside[0].offset_data
                members = [(m.name, blob[m.offset_data:m.offset_data + m.size]) for m in inside]
                span = (blob[first:inside[-1].offset_data + inside[-1].size],
                        [(m.offset_data - first, m.size) for m in inside])
                spans[sid] = span
            else:
                members = [(index.names[k], blob[index.offsets[k]:index.offsets[k] + index.lengths[k]])]
            if sid in samples and samples[sid] != members:
                raise ValueError(f"sample {sid} differs between views")
            samples[sid] = members
        views[epoch, world, rank] = list(index.ids)
    return FakeDataset(name, samples, views, [s for s in samples if resident(s)], grouped=grouped,
                       fixed_size=fixed_size, fmt=fmt, spans=spans)


def advertise(root, socket_path, dataset="t"):
    """The two attributes dlfsd answers on every view file, on epochs/0/1/0.index."""
    path = os.path.join(root, "epochs", "0", "1", "0.index")
    os.setxattr(path, "user.dlfs.client_socket", os.fsencode(socket_path))
    os.setxattr(path, "user.dlfs.dataset", dataset.encode())


def _memfd(name, data, size=None, seal=False):
    fd = os.memfd_create(name, os.MFD_CLOEXEC | (os.MFD_ALLOW_SEALING if seal else 0))
    os.ftruncate(fd, size if size is not None else len(data))
    if data:
        os.pwrite(fd, data, 0)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | F_SEAL_FUTURE_WRITE)
    return fd


def reply(head, payload=b""):
    h = json.dumps(head).encode()
    return struct.pack("<I", len(h)) + h + payload


class FakeServer:
    def __init__(self, directory, dataset, slots=3, slot_bytes=1 << 16, max_count=None, max_reply=256 << 10,
                 root=None):
        self.directory, self.dataset = directory, dataset
        self.slots, self.slot_bytes, self.max_count, self.max_reply = slots, slot_bytes, max_count, max_reply
        self.root = root  # where to advertise the socket (epochs/0/1/0.index), if given
        self.fail = []  # (code, message) for the next requests
        self.garbage = []  # raw packets sent instead of the next replies
        self.restart_at_batch = None  # (n, down seconds): the n-th batch request sees the daemon restart
        self.requests, self.batches, self.generation = [], 0, 0
        self._lock = threading.Lock()
        self._conns, self._listener, self._thread, self._region0 = [], None, None, None

    # -- lifecycle ---------------------------------------------------------

    def start(self):
        self.generation += 1
        self.path = os.path.join(self.directory, f"dlfsd-{next(_servers)}.client.sock")
        self._layout()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(self.path)
        listener.listen(16)
        listener.settimeout(0.02)
        self._listener, self._stopping = listener, False
        self._thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._thread.start()
        if self.root is not None:
            advertise(self.root, self.path, self.dataset.name)
        return self

    def stop(self):
        """The daemon exits: the listener goes, every connection reads EOF."""
        self._stopping = True
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            os.unlink(self.path)
        if self._region0 is not None:
            os.close(self._region0)
            self._region0 = None

    def restart(self, down=0.0):
        """Stops, then (after `down` seconds, in the background if > 0)
        serves again at a new path, advertised by the attribute."""
        self.stop()
        if down > 0:
            threading.Timer(down, self.start).start()
        else:
            self.start()

    def _layout(self):
        """Region 0: the resident samples in reverse id order, 64 bytes of filler before each."""
        ds, out, self.offset0 = self.dataset, bytearray(), {}
        for sid in sorted(ds.resident, reverse=True):
            out += bytes([FILLER]) * 64
            self.offset0[sid] = len(out)
            out += ds.data(sid)
        self.region0_bytes = len(out)
        self._region0 = _memfd("fake-dlfs-region0", bytes(out), seal=True)

    def _accept(self, listener):
        while not self._stopping:
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    # -- one connection ----------------------------------------------------

    def _serve(self, conn):
        # view ids differ between daemon generations: a client must use the ids of its new connection
        state = {"open": False, "views": {}, "next_view": 100 * self.generation + 1, "staging": None}
        try:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                if self._maybe_restart(data):
                    return
                self._answer(conn, data, state)
        finally:
            if state["staging"] is not None:
                os.close(state["staging"])
            conn.close()

    def _maybe_restart(self, data):
        """The n-th batch request: the daemon restarts before it answers."""
        if self.restart_at_batch is None or b'"batch"' not in data:
            return False
        self.batches += 1
        n, down = self.restart_at_batch
        if self.batches != n:
            return False
        self.restart_at_batch = None
        self.restart(down)  # gone before the client can see EOF and come back
        return True

    def _answer(self, conn, data, state):
        try:
            req = json.loads(data)
        except ValueError:
            conn.send(reply({"ok": False, "code": "EINVAL", "error": "the request is not JSON"}))
            return
        self.requests.append(req)
        if self.garbage:
            conn.send(self.garbage.pop(0))
            return
        if self.fail:
            code, message = self.fail.pop(0)
            conn.send(reply({"ok": False, "code": code, "error": message}))
            return
        op = req.get("op") if isinstance(req, dict) else None
        handler = {"open": self._open, "view": self._view, "batch": self._batch}.get(op)
        if handler is None:
            conn.send(reply({"ok": False, "code": "EINVAL", "error": f"unknown op {op!r}"}))
            return
        if op != "open" and not state["open"]:
            conn.send(reply({"ok": False, "code": "EINVAL", "error": f"'{op}' before 'open'"}))
            return
        handler(conn, req, state)

    def _open(self, conn, req, state):
        ds = self.dataset
        if state["open"]:
            return conn.send(reply({"ok": False, "code": "EBUSY", "error": "this connection has opened a dataset"}))
        if req.get("version") != 1:
            return conn.send(reply({"ok": False, "code": "EPROTO", "error": f"version {req.get('version')!r}: "
                                    "this daemon speaks version 1"}))
        if req.get("dataset") != ds.name:
            return conn.send(reply({"ok": False, "code": "ENOENT", "error": f"no dataset {req.get('dataset')!r}"}))
        state["open"] = True
        state["staging"] = _memfd("fake-dlfs-staging", b"", self.slots * self.slot_bytes)
        head = {"ok": True, "version": 1, "dataset": ds.name, "format": ds.format, "samples": len(ds.samples),
                "grouped": ds.grouped, "fixed_size": ds.fixed_size,
                "regions": [{"region": 0, "bytes": self.region0_bytes},
                            {"region": 1, "bytes": self.slots * self.slot_bytes, "slots": self.slots,
                             "slot_bytes": self.slot_bytes}]}
        conn.sendmsg([reply(head)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                      struct.pack("2i", self._region0, state["staging"]))])

    def _view(self, conn, req, state):
        key = (req.get("epoch"), req.get("world_size"), req.get("rank"))
        if key in self.dataset.opportunistic:
            return conn.send(reply({"ok": False, "code": "EINVAL", "error": f"view {key} is opportunistic: "
                                    "read it through the mount"}))
        if key not in self.dataset.views:
            return conn.send(reply({"ok": False, "code": "ENOENT", "error": f"no view epoch {key[0]}, "
                                    f"world size {key[1]}, rank {key[2]}"}))
        if len(state["views"]) >= 64:
            return conn.send(reply({"ok": False, "code": "EBUSY", "error": "64 views on this connection"}))
        vid = state["next_view"]
        state["next_view"] += 1
        state["views"][vid] = self.dataset.views[key]
        conn.send(reply({"ok": True, "view": vid, "samples": len(self.dataset.views[key]), "rounds": 1}))

    def _batch(self, conn, req, state):
        ids = state["views"].get(req.get("view"))
        start, count, slot = req.get("start"), req.get("count"), req.get("slot")
        if ids is None:
            return conn.send(reply({"ok": False, "code": "ENOENT", "error": f"no view {req.get('view')!r}"}))
        if not (isinstance(start, int) and isinstance(count, int) and isinstance(slot, int)
                and 0 <= start and 1 <= count <= 4096 and 0 <= slot < self.slots):
            return conn.send(reply({"ok": False, "code": "EINVAL", "error": f"bad batch request {req}"}))
        ds = self.dataset
        want = ids[start:start + min(count, self.max_count or count)]
        while True:
            records, member_pairs, names, staged = [], [], [], 0
            base = slot * self.slot_bytes
            for sid in want:
                data = ds.data(sid)
                if sid in self.offset0:
                    offset, region = self.offset0[sid], 0
                else:
                    if staged + len(data) > self.slot_bytes:
                        break
                    os.pwrite(state["staging"], data, base + staged)
                    offset, region = base + staged, 1
                    staged += len(data)
                members = ds.samples[sid]
                records.append(struct.pack("<QQIHH", offset, sid, len(data), region, len(members)))
                if ds.grouped:
                    for at, n in ds.layout(sid):
                        member_pairs.append(struct.pack("<II", at, n))
                    names.append([n for n, _ in members])
                else:
                    names.append(members[0][0])
            head = {"ok": True, "start": start, "count": len(records), "staged_bytes": staged}
            if req.get("names"):
                head["names"] = names
            packet = reply(head, b"".join(records) + b"".join(member_pairs))
            if len(packet) <= self.max_reply or len(want) <= 1:
                break
            want = want[:len(want) // 2]
        conn.send(packet)
