"""The local client protocol (docs/client-protocol.md): read an epoch view's
samples straight from the memory dlfsd holds them in, over a Unix
SOCK_SEQPACKET socket, instead of through the mount.

    found = find_socket("/mnt/dlfs/imagenet")      # (socket path, dataset name) or None
    client = Client("/mnt/dlfs/imagenet")
    view = client.view(epoch=0, world_size=8, rank=3)
    for reply in view.locate(0, len(view)):        # Located: one batch reply each
        for sample in reply.memoryviews(): ...

Region 0 (the dataset memory) and region 1 (this connection's staging
memory) are mapped read-only; a sample is a slice of one of them. A sample
in region 0 stays valid while its memoryview (or the Client) lives. A staged
sample (region 1) sits in the slot its batch request named; the Client
rotates through the `slots` slots the daemon gives, one per request, so a
staged sample stays valid until `slots - 1` further batch requests have been
made on the same Client. Standard library only; nothing here imports numpy.
"""
import errno
import json
import mmap
import operator
import os
import socket
import struct
import sys
import time
from itertools import compress

from .resume import resume_spec

XATTR_SOCKET = "user.dlfs.client_socket"
XATTR_DATASET = "user.dlfs.dataset"
ENV_SOCKET = "DLFS_CLIENT_SOCKET"
VERSION = 1
REPLY_BYTES = 256 << 10  # the largest reply the protocol allows
RECV_BYTES = 512 << 10  # receive buffer: room above it, MSG_TRUNC catches anything larger
MAX_COUNT = 4096  # samples per batch request
RECORD = 24  # bytes per record of a batch reply
DEFAULT_RECONNECT_TIMEOUT = 30.0
_FDS = 8  # room for more descriptors than open sends: extra ones are received and closed, never leaked
_EMPTY = memoryview(b"")
_LITTLE = sys.byteorder == "little"
_RECORD_STRUCT = struct.Struct("<QQIHH")
# The daemon went away: the socket reads EOF, or a send/receive fails with one of these.
_GONE = (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.ECONNREFUSED, errno.ECONNABORTED, errno.EBADF)
# While reconnecting: worth another try (the daemon or the mount coming back up).
_TRANSIENT_CODES = ("EIO", "ENOENT", "EBUSY", "ECONNRESET")


class ClientError(Exception):
    """A request the daemon refused (`code` its errno name, `message` its
    sentence), a reply that does not parse, or a daemon that went away and
    did not come back within the Client's reconnect_timeout."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code, self.message = code, message


class ClientUnavailable(ClientError):
    """No client socket for this dataset (the daemon serves none, the files
    are not on a DLFS mount, or the socket cannot be connected): read
    through the mount."""

    def __init__(self, message, code="ENOENT"):
        super().__init__(code, message)


def _index_path(dataset_dir):
    return os.path.join(dataset_dir, "epochs", "0", "1", "0.index")


def find_socket(dataset_dir):
    """(socket path, dataset name) from the extended attributes of
    `<dataset_dir>/epochs/0/1/0.index`, or None when the daemon serves no
    client socket (ENODATA), the file system has no such attributes
    (ENOTSUP) or the file is missing. DLFS_CLIENT_SOCKET, when set,
    overrides the path; the dataset name still comes from the attribute."""
    path = _index_path(dataset_dir)
    try:
        dataset = os.getxattr(path, XATTR_DATASET)
        override = os.environ.get(ENV_SOCKET)
        sock = override.encode() if override else os.getxattr(path, XATTR_SOCKET)
    except OSError as e:
        if e.errno in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOENT, errno.ENOTDIR):
            return None
        raise
    return os.fsdecode(sock), dataset.decode("utf-8", errors="surrogateescape")


def _ctime(t):
    return time.strftime("%H:%M:%S", time.localtime(t))


class Client:
    """One connection to dlfsd's client socket, opened on one dataset.

    `Client(dataset_dir)` finds the socket (find_socket); `socket_path` and
    `dataset` skip the lookup. When the daemon exits or restarts, the next
    request reconnects (finding the socket again), opens again, re-creates
    this Client's views and is sent again, for up to `reconnect_timeout`
    seconds; then it raises ClientError saying the daemon went away. The
    old mappings are not unmapped: memoryviews handed out earlier stay
    readable. A Client belongs to the process that opened it (a DataLoader
    worker opens its own): used after fork, or pickled, it raises. One
    thread at a time."""

    def __init__(self, dataset_dir=None, *, socket_path=None, dataset=None,
                 reconnect_timeout=DEFAULT_RECONNECT_TIMEOUT):
        if socket_path is None or dataset is None:
            found = find_socket(dataset_dir) if dataset_dir is not None else None
            if found is None:
                raise ClientUnavailable(f"{dataset_dir}: no DLFS client socket (no {XATTR_SOCKET} attribute on "
                                        f"{_index_path(dataset_dir) if dataset_dir else 'the view index'}): "
                                        f"not a DLFS mount, or dlfsd serves no client socket")
            socket_path = socket_path if socket_path is not None else found[0]
            dataset = dataset if dataset is not None else found[1]
        self.dataset_dir, self.socket_path, self.dataset = dataset_dir, socket_path, dataset
        self.reconnect_timeout = reconnect_timeout
        self._pid = os.getpid()
        self._sock = None
        self._views = []
        self._buffer = bytearray(RECV_BYTES)
        self._next_slot = 0
        self.reconnects = 0
        self._open(socket_path, dataset)

    # -- connection --------------------------------------------------------

    def _fail(self, what):
        return ClientError("EPROTO", f"{self.socket_path}: {what}")

    def _open(self, socket_path, dataset):
        """Connects, opens the dataset and maps its regions (the attributes
        below describe the last open)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        try:
            sock.connect(socket_path)
        except OSError as e:
            sock.close()
            raise ClientUnavailable(f"{socket_path}: cannot connect to dlfsd's client socket: "
                                    f"{e.strerror or e}", errno.errorcode.get(e.errno, "ENOENT")) from None
        fds = []
        try:
            request = json.dumps({"op": "open", "version": VERSION, "dataset": dataset}).encode()
            sock.send(request, socket.MSG_NOSIGNAL)
            data, ancillary, flags, _ = sock.recvmsg(RECV_BYTES, socket.CMSG_SPACE(_FDS * 4),
                                                     socket.MSG_CMSG_CLOEXEC)
            for level, kind, cdata in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.extend(struct.unpack(f"{len(cdata) // 4}i", cdata[:len(cdata) - len(cdata) % 4]))
            if not data:
                raise ConnectionResetError(errno.ECONNRESET, "dlfsd closed the connection at open")
            if flags & socket.MSG_TRUNC:
                raise self._fail(f"the open reply is larger than {RECV_BYTES} bytes")
            head, _ = self._parse(memoryview(data), len(data), "open")
            if head.get("version") != VERSION:
                raise ClientError("EPROTO", f"{socket_path}: dlfsd answered protocol version "
                                  f"{head.get('version')!r}, this client speaks {VERSION}")
            regions = head.get("regions")
            if not isinstance(regions, list) or len(regions) < 2 or not all(isinstance(r, dict) for r in regions):
                raise self._fail(f"the open reply's regions are not two objects: {regions!r}")
            if len(fds) < len(regions):
                raise self._fail(f"the open reply came with {len(fds)} descriptors for {len(regions)} regions")
            maps = []
            for k, (region, fd) in enumerate(zip(regions, fds)):
                size = region.get("bytes")
                if region.get("region") != k or not isinstance(size, int) or size < 0:
                    raise self._fail(f"region {k} of the open reply is {region!r}")
                if size == 0:
                    maps.append(None)
                    continue
                try:
                    maps.append(mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ))
                except (OSError, ValueError) as e:
                    raise self._fail(f"cannot map region {k} ({size} bytes): {e}") from None
            slots, slot_bytes = regions[1].get("slots", 0), regions[1].get("slot_bytes", 0)
            if not (isinstance(slots, int) and isinstance(slot_bytes, int) and slots >= 1
                    and slots * slot_bytes <= regions[1]["bytes"]):
                raise self._fail(f"region 1 of the open reply has slots={slots!r} of slot_bytes={slot_bytes!r} "
                                 f"in {regions[1]['bytes']} bytes")
        except BaseException:
            sock.close()
            raise
        finally:
            for fd in fds:  # mmap keeps its own reference to the memory
                os.close(fd)
        if self._sock is not None:
            self._sock.close()
        self._sock = sock
        self.socket_path = socket_path
        self.header = head
        self.format = head.get("format")
        self.samples = head.get("samples")
        self.grouped = bool(head.get("grouped"))
        self.fixed_size = head.get("fixed_size", 0)
        self.region_bytes = (regions[0]["bytes"], regions[1]["bytes"])
        self.slots, self.slot_bytes = slots, slot_bytes
        self._next_slot %= slots  # the rotation goes on (a new daemon's staging memory is a new region)
        # The mmaps slice into bytes (copies), the memoryviews into memoryviews
        # (no copy). The previous connection's stay alive as long as anything
        # handed out still points into them.
        self._mmaps = tuple(m if m is not None else b"" for m in maps)
        self._views_of_regions = tuple(memoryview(m) if m is not None else _EMPTY for m in maps)

    def _parse(self, buf, n, op):
        """(header dict, payload memoryview) of a reply of n bytes in buf;
        ClientError with the daemon's code and sentence when ok is false."""
        if n < 4:
            raise self._fail(f"a reply to '{op}' of {n} bytes does not parse (no 4-byte header length)")
        length = int.from_bytes(buf[:4], "little")
        if length > n - 4:
            raise self._fail(f"a reply to '{op}' says its header is {length} bytes, the packet holds {n - 4}")
        try:
            head = json.loads(bytes(buf[4:4 + length]))
        except ValueError as e:
            raise self._fail(f"a reply to '{op}' does not parse: its header is not JSON ({e})") from None
        if not isinstance(head, dict) or not isinstance(head.get("ok"), bool):
            raise self._fail(f"a reply to '{op}' does not parse: its header has no \"ok\": "
                             f"{bytes(buf[4:4 + min(length, 200)])!r}")
        if not head["ok"]:
            code, message = head.get("code"), head.get("error")
            raise ClientError(code if isinstance(code, str) else "EIO",
                              message if isinstance(message, str) else f"{self.socket_path}: '{op}' failed: {head}")
        return head, buf[4 + length:n]

    def _check_process(self):
        if os.getpid() != self._pid:
            raise ClientError("EINVAL", f"{self.socket_path}: this Client was opened by process {self._pid}, not "
                              f"{os.getpid()}: a Client does not cross fork; each process (DataLoader worker) "
                              "opens its own")

    def _exchange(self, request, op):
        """Sends one request and receives its reply into the Client's buffer:
        (header, payload memoryview valid until the next request), or None
        if the daemon went away."""
        try:
            self._sock.send(request, socket.MSG_NOSIGNAL)
            n, _, flags, _ = self._sock.recvmsg_into([self._buffer])
        except OSError as e:
            if e.errno in _GONE:
                return None
            raise
        if n == 0:
            return None
        if flags & socket.MSG_TRUNC:
            raise self._fail(f"a reply to '{op}' is larger than the {len(self._buffer)}-byte buffer "
                             f"(the protocol allows {REPLY_BYTES})")
        return self._parse(memoryview(self._buffer), n, op)

    def _call(self, fields, view=None):
        """One request; reconnects and asks again if the daemon went away.
        `view` (a ClientView) puts its current id into the request."""
        self._check_process()
        if self._sock is None:
            raise ClientError("EBADF", f"{self.socket_path}: this Client is closed")
        while True:
            if view is not None:
                fields["view"] = view._id
            reply = self._exchange(json.dumps(fields).encode(), fields["op"])
            if reply is not None:
                return reply
            self._reconnect()

    def _reconnect(self):
        gone = time.time()
        deadline = time.monotonic() + self.reconnect_timeout
        delay, last = 0.02, "no answer"
        while True:
            try:
                path, dataset = self.socket_path, self.dataset
                if self.dataset_dir is not None:
                    found = find_socket(self.dataset_dir)
                    if found is None:
                        raise ClientUnavailable(f"no {XATTR_SOCKET} attribute on {_index_path(self.dataset_dir)}")
                    path, dataset = found
                self._open(path, dataset)
                for v in self._views:
                    v._id, samples = self._new_view(v.epoch, v.world_size, v.rank, v.seed, v.resume)
                    if samples != v.samples:
                        raise ClientError("EIO", f"{path}: view epoch {v.epoch}, rank {v.rank} of {v.world_size} "
                                          f"held {v.samples} samples before dlfsd restarted, {samples} after")
                self.reconnects += 1
                return
            except ClientError as e:
                if isinstance(e, ClientUnavailable) or e.code in _TRANSIENT_CODES:
                    last = str(e)
                else:
                    raise
            except OSError as e:  # the mount itself down (ENOTCONN) while dlfsd restarts
                last = str(e)
            if time.monotonic() >= deadline:
                raise ClientError("ECONNRESET", f"{self.socket_path}: dlfsd went away at {_ctime(gone)} "
                                  f"({time.time() - gone:.1f} s ago) and no daemon served dataset "
                                  f"{self.dataset!r} again within reconnect_timeout={self.reconnect_timeout} s "
                                  f"(last attempt: {last})")
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 0.5)

    def _new_view(self, epoch, world_size, rank, seed=None, resume=None):
        request = {"op": "view", "epoch": epoch, "world_size": world_size, "rank": rank}
        if seed is not None:
            request["seed"] = seed
        if resume is not None:
            request["resume"] = {"world_size": resume[0], "consumed": list(resume[1])}
        head, _ = self._call(request)
        view, samples = head.get("view"), head.get("samples")
        if not isinstance(view, int) or not isinstance(samples, int) or samples < 0:
            raise self._fail(f"the reply to 'view' has view={view!r}, samples={samples!r}")
        return view, samples

    # -- API ---------------------------------------------------------------

    def view(self, epoch, world_size, rank, seed=None, resume=None):
        """The view the mount serves as epochs/<epoch>/<world_size>/<rank>.*;
        with `seed`, seeds/<seed>/epochs/...; with `resume` = (W, consumed
        counts), .../epochs/<epoch>/<W>/resume/<consumed>/<world_size>/<rank>.*
        (docs/views.md)."""
        return ClientView(self, epoch, world_size, rank, seed, resume)

    def next_slot(self):
        """The slot the next batch request without an explicit slot uses."""
        return self._next_slot

    def close(self):
        """Closes the connection. Mappings stay until nothing points into them."""
        if self._sock is not None and os.getpid() == self._pid:
            self._sock.close()
        self._sock = None

    def __del__(self):
        sock = getattr(self, "_sock", None)
        if sock is not None:  # in a forked child this closes the child's copy only
            sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getstate__(self):
        raise TypeError("a dlfs Client (a socket and its mappings) cannot be pickled: open one in each process")

    def __repr__(self):
        return f"<dlfs.Client {self.socket_path} dataset={self.dataset!r}>"


class ClientView:
    """One epoch view on a Client (`len()` samples, the order of the mount's
    epochs/<epoch>/<world_size>/<rank>.*, or of its seeds/ or resume/ path)."""

    def __init__(self, client, epoch, world_size, rank, seed=None, resume=None):
        self.client, self.epoch, self.world_size, self.rank = client, epoch, world_size, rank
        self.seed = seed
        self.resume = resume_spec(resume) if resume is not None else None
        self._id, self.samples = client._new_view(epoch, world_size, rank, seed, self.resume)
        client._views.append(self)

    def __len__(self):
        return self.samples

    def batch(self, start, count, slot=None, names=False):
        """Locates positions [start, start + count) (count at most 4096): one
        request, one Located. The daemon may answer fewer (its staged
        samples must fit the slot, its reply 256 KiB): ask again from
        start + reply.count, or use locate(). Without `slot` the Client's
        next slot in rotation."""
        client = self.client
        if not 0 < count <= MAX_COUNT:
            raise ValueError(f"count {count} is not in [1, {MAX_COUNT}]")
        if slot is None:
            slot = client._next_slot
        elif not 0 <= slot < client.slots:
            raise ValueError(f"slot {slot} is not in [0, {client.slots})")
        client._next_slot = (slot + 1) % client.slots
        request = {"op": "batch", "view": self._id, "start": start, "count": count, "slot": slot, "names": bool(names)}
        head, payload = client._call(request, view=self)
        return Located(client, self, head, payload, start, count, slot, names)

    def locate(self, start, end, names=False, max_count=MAX_COUNT):
        """Positions [start, end) as Located replies, asking again after
        every short one; each request takes the Client's next slot."""
        while start < end:
            reply = self.batch(start, min(end - start, max_count), names=names)
            if reply.count == 0:
                raise self.client._fail(f"a batch of view epoch {self.epoch}, rank {self.rank} of "
                                        f"{self.world_size} answered 0 samples at position {start} of {self.samples}")
            yield reply
            start += reply.count

    def __repr__(self):
        return f"<dlfs.ClientView epoch={self.epoch} rank={self.rank}/{self.world_size} samples={self.samples}>"


class Located:
    """One batch reply, parsed: per sample `offsets`, `ids` (the `.index`
    ids), `lengths`, `regions` (0 dataset memory, 1 staging), `members`
    (1, or a grouped sample's member count); `member_offsets` and
    `member_lengths` (grouped datasets, else None: all samples' members in
    order, each member's first byte counted from its sample's offset, and
    its length; a grouped sample's bytes span its members, which need not be
    back to back) and `names` (when asked: a member name per sample, or a
    list of them for a grouped dataset)."""

    __slots__ = ("start", "count", "slot", "staged_bytes", "offsets", "ids", "lengths", "regions", "members",
                 "member_offsets", "member_lengths", "names", "_mmaps", "_views")

    def __init__(self, client, view, head, payload, start, asked, slot, names):
        count = head.get("count")
        if head.get("start") != start or not isinstance(count, int) or not 0 <= count <= asked:
            raise client._fail(f"a batch reply answers start={head.get('start')!r}, count={count!r} "
                               f"to start={start}, count={asked}")
        if count == 0 and start < view.samples:
            raise client._fail(f"a batch reply answered 0 samples at position {start} of {view.samples}")
        self.start, self.count, self.slot = start, count, slot
        self.staged_bytes = head.get("staged_bytes", 0)
        self._mmaps, self._views = client._mmaps, client._views_of_regions
        size = RECORD * count
        if len(payload) < size:
            raise client._fail(f"a batch reply of {count} samples carries {len(payload)} bytes of records, "
                               f"not {size}")
        if _LITTLE:  # columns straight out of the buffer: no Python step per sample
            q = payload[:size].cast("Q")
            h = payload[:size].cast("H")
            self.offsets, self.ids = q[0::3].tolist(), q[1::3].tolist()
            self.lengths = payload[:size].cast("I")[4::6].tolist()
            self.regions, self.members = h[10::12].tolist(), h[11::12].tolist()
        else:
            flat = struct.unpack_from("<" + "QQIHH" * count, payload)
            self.offsets, self.ids, self.lengths = list(flat[0::5]), list(flat[1::5]), list(flat[2::5])
            self.regions, self.members = list(flat[3::5]), list(flat[4::5])
        rest = len(payload) - size
        if client.grouped:
            m = sum(self.members)
            if rest != 8 * m:
                raise client._fail(f"a batch reply of {count} grouped samples with {m} members carries "
                                   f"{rest} bytes of members, not {8 * m}")
            pairs = struct.unpack_from(f"<{2 * m}I", payload, size)
            self.member_offsets, self.member_lengths = list(pairs[0::2]), list(pairs[1::2])
        else:
            if rest or (count and max(self.members) != 1) or (count and min(self.members) != 1):
                raise client._fail(f"a batch reply of a dataset that is not grouped has members "
                                   f"{sorted(set(self.members))} and {rest} bytes after its records")
            self.member_offsets = self.member_lengths = None
        if names:
            got = head.get("names")
            if not isinstance(got, list) or len(got) != count:
                raise client._fail(f"a batch reply asked for names has {type(got).__name__} "
                                   f"of {len(got) if isinstance(got, list) else 0} names for {count} samples")
            self.names = got
        else:
            self.names = None
        if count:
            self._check_bounds(client)

    def _check_bounds(self, client):
        """Every sample inside its region (and a staged one inside its slot):
        a slice past a mapping's end would come back short, never fail."""
        ends = list(map(operator.add, self.offsets, self.lengths))
        regions = self.regions
        if max(regions) > 1:
            raise client._fail(f"a batch reply names region {max(regions)}")
        if 1 in regions:
            lo = self.slot * client.slot_bytes
            staged_offsets = list(compress(self.offsets, regions))
            staged_ends = list(compress(ends, regions))
            if min(staged_offsets) < lo or max(staged_ends) > lo + client.slot_bytes:
                raise client._fail(f"a batch reply in slot {self.slot} ([{lo}, {lo + client.slot_bytes}) of "
                                   f"region 1) places samples in [{min(staged_offsets)}, {max(staged_ends)})")
            ends = list(compress(ends, map(operator.not_, regions)))
        if ends and max(ends) > client.region_bytes[0]:
            raise client._fail(f"a batch reply places a sample up to byte {max(ends)} of region 0, which holds "
                               f"{client.region_bytes[0]}")

    def _slices(self):
        return map(slice, self.offsets, map(operator.add, self.offsets, self.lengths))

    def memoryviews(self):
        """Each sample as a read-only memoryview of its region (no copy)."""
        views = self._views
        if 1 not in self.regions:
            return list(map(views[0].__getitem__, self._slices()))
        return list(map(operator.getitem, map(views.__getitem__, self.regions), self._slices()))

    def copies(self):
        """Each sample as bytes (one copy out of the mapping)."""
        maps = self._mmaps
        if 1 not in self.regions:
            return list(map(maps[0].__getitem__, self._slices()))
        return list(map(operator.getitem, map(maps.__getitem__, self.regions), self._slices()))

    def lasting(self):
        """Each sample as a buffer that outlives the staging slot: region 0
        samples as memoryviews (no copy), staged ones copied out as bytes."""
        if 1 not in self.regions:
            return self.memoryviews()
        sources = (self._views[0], self._mmaps[1])
        return list(map(operator.getitem, map(sources.__getitem__, self.regions), self._slices()))

    def iter_copies(self):
        """copies(), made as they are taken when every sample is in region 0
        (which never changes: one 3 KiB copy at a time stays in the CPU's
        cache), else all at once (now, before the staging slot is reused)."""
        if 1 not in self.regions:
            return map(self._mmaps[0].__getitem__, self._slices())
        return iter(self.copies())

    def __len__(self):
        return self.count
