"""One rank's epoch view, without torch: the tar stream as sample groups for
one DataLoader worker's share, and the `.bin` records by position; through
dlfsd's client socket (dlfs/client.py) when it serves one, else through the
mount."""
import os

from .batches import RunReader, ViewBatch, batch_runs, pack
from .client import DEFAULT_RECONNECT_TIMEOUT, MAX_COUNT, Client, ClientError, ClientUnavailable, find_socket
from .grouping import group_members, group_starts, split_key
from .index import ViewIndex, view_path
from .resume import check_seed, explain_missing, resume_spec
from .split import DEFAULT_BLOCK_BYTES, plan_blocks, worker_blocks
from .tarstream import DEFAULT_CHUNK, TarFormatError, iter_members


class TarView:
    """`<dataset>/epochs/<epoch>/<world_size>/<rank>.tar` as (key, {ext: bytes}).

    `start` is the number of samples (groups) of this epoch already consumed:
    iteration resumes at that position of the planned order (the `.index`
    gives its byte offset). Samples [start, len) are cut into blocks
    (split.plan_blocks) dealt round-robin to `num_workers` readers.

    `zero_copy`: "auto" reads the samples from dlfsd's memory through its
    client socket when find_socket finds one (else through the mount),
    True requires the socket (ClientUnavailable without it), False always
    reads the mount. Either way the same samples in the same order, the
    same worker split; `client_socket` is (socket path, dataset name) when
    the socket is used. Opportunistic views are read through the mount
    (the daemon decides their order as the `.tar` is read).

    `seed`: the view of another job's seed (`<dataset>/seeds/<seed>/...`),
    sharing dlfsd's one copy of the dataset. `resume_from`: the rest of the
    epoch after a run of another world size read part of it, as its
    checkpoint says: (W, consumed), consumed one count (every rank of W read
    that many) or W counts; `rank` and `world_size` are this run's
    (`.../epochs/<e>/<W>/resume/<consumed>/<world_size>/<rank>.tar`,
    docs/views.md). `start` then counts samples of that view."""

    def __init__(self, dataset_dir, epoch, rank, world_size, start=0, block_samples=None,
                 block_bytes=DEFAULT_BLOCK_BYTES, chunk=DEFAULT_CHUNK, zero_copy="auto",
                 reconnect_timeout=DEFAULT_RECONNECT_TIMEOUT, seed=None, resume_from=None):
        self.seed = None if seed is None else check_seed(seed)
        self.resume_from = None if resume_from is None else resume_spec(resume_from)
        self.stem = view_path(dataset_dir, epoch, world_size, rank, self.seed, self.resume_from)
        self.path = self.stem + ".tar"
        self.index = _open_index(self.stem + ".index", dataset_dir, epoch, self.seed, self.resume_from)
        self.dataset_dir, self.epoch, self.rank, self.world_size = dataset_dir, epoch, rank, world_size
        self.start, self.chunk = start, chunk
        names = self.index.names
        # A grouped dataset's index lists groups (one line each); otherwise
        # consecutive members with one key are grouped here, as WebDataset does.
        starts = list(range(len(names))) if self.index.grouped else group_starts(names)
        self.group_first = starts + [len(names)]  # index position of sample g's first member
        begins = self.index.begins
        self.group_begin = [begins[k] for k in starts]
        self.group_begin.append(self.index.ends[-1] if names else 0)
        if self.index.opportunistic:
            self.blocks = [(start, len(starts))] if start < len(starts) else []
        else:
            self.blocks = plan_blocks(self.group_begin, start, block_samples, block_bytes)
        self.zero_copy, self.reconnect_timeout = zero_copy, reconnect_timeout
        self.client_socket = _choose_socket(dataset_dir, zero_copy, self.index.opportunistic, self.path)
        self._client = None  # (pid, ClientView): each process opens its own
        self._keys_exts = None

    def __len__(self):
        """Samples (groups) left in this rank's epoch from `start`."""
        return len(self.group_first) - 1 - self.start

    def __getstate__(self):  # a socket and mappings do not cross a pickle (spawned workers open their own)
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    def _client_view(self):
        """This process's ClientView of the view, or None: read the mount."""
        return _client_view(self, len(self.index))

    def samples(self, worker=0, num_workers=1):
        """This worker's share, block after block, as (key, {ext: bytes})."""
        if self.index.opportunistic and (num_workers > 1 or self.start > 0):
            raise ValueError(f"{self.path}: an opportunistic view's order is decided as it is read "
                             "(docs/views.md): it can only be read whole, by one reader "
                             f"(here num_workers={num_workers}, start={self.start})")
        view = self._client_view()
        if view is not None:
            yield from self._client_samples(view, worker, num_workers)
            return
        fd = os.open(self.path, os.O_RDONLY)
        buffer = memoryview(bytearray(self.chunk))  # one for all blocks: a fresh one costs its zeroing
        try:
            for first, end in _coalesced(worker_blocks(self.blocks, worker, num_workers)):
                if self.index.grouped and not self.index.opportunistic:
                    yield from self._block_groups(fd, buffer, first, end)
                else:
                    yield from group_members(self._block_members(fd, buffer, first, end))
        finally:
            os.close(fd)

    def batches(self, batch_size, worker=0, num_workers=1):
        """This worker's share (the same samples, in the same order, as
        samples()) as ViewBatch objects of batch_size samples, the last one
        possibly short: one pread per run of samples, each extension's bytes
        packed back to back (dlfs/batches.py). For a DataLoader, yield these
        from the dataset and pass batch_size=None."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        view = self._client_view()
        if view is None and not self.index.grouped and not self.index.opportunistic:
            ranges = _coalesced(worker_blocks(self.blocks, worker, num_workers))
            fd = os.open(self.path, os.O_RDONLY)
            try:
                reader = RunReader(fd, self.path, self.index, self.group_first)
                for runs in batch_runs(ranges, batch_size):
                    yield reader.read(runs)
            finally:
                os.close(fd)
            return
        if view is not None and not self.index.grouped and len(self.group_first) - 1 == len(self.index):
            yield from self._client_batches(view, batch_size, worker, num_workers)
            return
        # A grouped index lists group spans, not members, and an opportunistic
        # stream's order is only known as it is read: parse the stream. From
        # the client socket: region 0 samples as memoryviews (no copy until
        # pack), staged ones copied out before their slot is reused.
        if view is not None:
            stream = self._client_samples(view, worker, num_workers, lasting=True)
        else:
            stream = self.samples(worker, num_workers)
        keys, groups = [], []
        for key, group in stream:
            keys.append(key)
            groups.append(group)
            if len(keys) == batch_size:
                yield pack(keys, groups)
                keys, groups = [], []
        if keys:
            yield pack(keys, groups)

    def _client_batches(self, view, batch_size, worker, num_workers):
        """batches() from the client socket for a view of one member per
        sample: per batch the keys, and the samples joined straight from
        dlfsd's memory (staged ones copied out of their slot first)."""
        keys, exts = self._split_names()
        for runs in batch_runs(_coalesced(worker_blocks(self.blocks, worker, num_workers)), batch_size):
            batch_keys, batch_exts, datas, lengths = [], [], [], []
            for first, end in runs:
                for reply in view.locate(first, end):
                    _check_ids(view, reply, self.index)
                    s, e = reply.start, reply.start + reply.count
                    batch_keys += keys[s:e]
                    batch_exts += exts[s:e]
                    datas += reply.lasting()
                    lengths += reply.lengths
            if batch_exts.count(batch_exts[0]) == len(batch_exts):  # one extension: pack's result, without a dict per sample
                yield ViewBatch(batch_keys, {batch_exts[0]: (b"".join(datas), lengths)})
            else:
                yield pack(batch_keys, [{x: d} for x, d in zip(batch_exts, datas)])

    def _split_names(self):
        """Each index position's (key, extension) lists (not grouped views)."""
        if self._keys_exts is None:
            # split_key inline: one call per name is a third of a warm epoch's time at 3 KiB.
            names = self.index.names
            dots = [n.find(".", n.rfind("/") + 1) for n in names]
            keys = [n[:d] if d >= 0 else n for n, d in zip(names, dots)]
            exts = [n[d + 1:] if d >= 0 else "" for n, d in zip(names, dots)]
            self._keys_exts = (keys, exts)
        return self._keys_exts

    def _client_samples(self, view, worker, num_workers, lasting=False):
        """samples() from the client socket: the same blocks, the same keys.
        lasting: region-0 data as memoryviews (valid while the mapping
        lives), staged data copied out; else every sample as bytes."""
        ranges = _coalesced(worker_blocks(self.blocks, worker, num_workers))
        if self.index.grouped:
            for first, end in ranges:
                for reply in view.locate(first, end, names=True):
                    _check_ids(view, reply, self.index)
                    yield from self._client_groups(reply, lasting)
            return
        gf, (keys, exts) = self.group_first, self._split_names()
        single = len(gf) - 1 == len(keys)  # every sample one member: no grouping to do
        for first, end in ranges:
            if single:
                for reply in view.locate(first, end):
                    _check_ids(view, reply, self.index)
                    s, e = reply.start, reply.start + reply.count
                    for key, ext, data in zip(keys[s:e], exts[s:e], reply.lasting() if lasting else reply.iter_copies()):
                        yield key, {ext: data}
            else:
                yield from group_members(self._client_members(view, gf[first], gf[end], lasting))

    def _client_members(self, view, lo, hi, lasting):
        names = self.index.names
        for reply in view.locate(lo, hi):
            _check_ids(view, reply, self.index)
            yield from zip(names[reply.start:reply.start + reply.count],
                           reply.lasting() if lasting else reply.iter_copies())

    def _client_groups(self, reply, lasting):
        """A grouped view's samples of one reply: each member is at its
        offset within its sample's bytes, in the order of its names."""
        keys, offsets, lengths = self.index.names, reply.member_offsets, reply.member_lengths
        sources = (reply._views[0] if lasting else reply._mmaps[0], reply._mmaps[1])
        m = 0
        for g, o, n, region, count, names in zip(range(reply.start, reply.start + reply.count), reply.offsets,
                                                  reply.lengths, reply.regions, reply.members, reply.names):
            key, src, group = keys[g], sources[region], {}
            if not isinstance(names, list) or len(names) != count or \
                    any(a + b > n for a, b in zip(offsets[m:m + count], lengths[m:m + count])):
                raise ClientError("EPROTO", f"{self.client_socket[0]}: position {g} of {self.path} ({key!r}): "
                                  f"{count} members in {n} bytes, names {names!r}, members (offset, length) "
                                  f"{list(zip(offsets[m:m + count], lengths[m:m + count]))}")
            for name in names:
                if not name.startswith(key) or name[len(key):len(key) + 1] not in ("", "."):
                    raise ClientError("EPROTO", f"{self.client_socket[0]}: member {name!r} in group {key!r} "
                                      f"(position {g} of {self.path})")
                at = o + offsets[m]
                group[name[len(key) + 1:]] = src[at:at + lengths[m]]
                m += 1
            yield key, group

    def _block_members(self, fd, buffer, first, end):
        """The members of samples [first, end), checked against the index."""
        lo, hi = self.group_first[first], self.group_first[end]
        if self.index.opportunistic:  # the stream's own order: only the count can be checked
            members = iter_members(fd, self.path, 0, None, buffer=buffer)
            expected = None
        else:
            members = iter_members(fd, self.path, self.group_begin[first], self.group_begin[end], buffer=buffer)
            expected = iter(self.index.names[lo:hi])
        n = 0
        for name, data in members:
            if expected is not None:
                want = next(expected, None)
                if name != want:
                    raise TarFormatError(self.path, self.index.member_begin(lo + n),
                                         f"member '{name}' where the index has position {lo + n} as {want!r}")
            n += 1
            yield name, data
        if n != hi - lo:
            raise TarFormatError(self.path, self.group_begin[end],
                                 f"the stream held {n} members where the index lists {hi - lo}")


    def _block_groups(self, fd, buffer, first, end):
        """Samples [first, end) of a grouped view, cut at the group spans the
        index gives: a group's members are the names that extend its key."""
        names, bounds = self.index.names, self.group_begin
        g, group = first, {}
        for name, data, member_end in iter_members(fd, self.path, bounds[first], bounds[end], buffer=buffer, ends=True):
            key = names[g]
            if not name.startswith(key) or name[len(key):len(key) + 1] not in ("", "."):
                raise TarFormatError(self.path, bounds[g], f"member '{name}' in the span of group {key!r}")
            group[name[len(key) + 1:]] = data
            if member_end >= bounds[g + 1]:
                yield key, group
                g, group = g + 1, {}
        if g != end:
            raise TarFormatError(self.path, bounds[g], f"the stream held {g - first} groups where the index lists "
                                 f"{end - first}")


def _choose_socket(dataset_dir, zero_copy, opportunistic, path):
    """(socket path, dataset name) to read through, or None for the mount."""
    if zero_copy not in (True, False, "auto"):
        raise ValueError(f"zero_copy must be True, False or 'auto', got {zero_copy!r}")
    if zero_copy is False:
        return None
    if opportunistic:
        if zero_copy is True:
            raise ClientUnavailable(f"{path}: an opportunistic view's order is decided as it is read: dlfsd serves "
                                    "it through the mount only (zero_copy=False or 'auto')", "EINVAL")
        return None
    try:
        found = find_socket(dataset_dir)
    except OSError:
        if zero_copy is True:
            raise
        found = None  # "auto": whatever is wrong with the attributes, the mount reads
    if found is None and zero_copy is True:
        raise ClientUnavailable(f"{dataset_dir}: zero_copy=True, but there is no DLFS client socket for it (no "
                                f"user.dlfs.client_socket attribute on epochs/0/1/0.index: not a DLFS mount, or "
                                "dlfsd runs with client_socket = \"off\")")
    return found


def _client_view(owner, positions):
    """owner's ClientView in this process (opened on first use), or None when
    it reads the mount; with zero_copy="auto" a socket that cannot be
    connected means the mount from then on."""
    if owner.client_socket is None:
        return None
    pid = os.getpid()
    if owner._client is not None and owner._client[0] == pid:
        return owner._client[1]
    path, dataset = owner.client_socket
    try:
        client = Client(owner.dataset_dir, socket_path=path, dataset=dataset,
                        reconnect_timeout=owner.reconnect_timeout)
    except ClientUnavailable:
        if owner.zero_copy is True:
            raise
        owner.client_socket = None
        return None
    view = client.view(owner.epoch, owner.world_size, owner.rank, owner.seed, owner.resume_from)
    if len(view) != positions:
        client.close()
        raise ClientError("EIO", f"{path}: view epoch {owner.epoch}, rank {owner.rank} of {owner.world_size} holds "
                          f"{len(view)} samples, {owner.path[:-4]}.index lists {positions}")
    owner._client = (pid, view)
    return view


def _open_index(path, dataset_dir, epoch, seed, resume_from):
    """The view's `.index`; a resume view that does not exist says why."""
    try:
        return ViewIndex(path)
    except FileNotFoundError:
        if resume_from is None:
            raise
        raise explain_missing(dataset_dir, epoch, seed, resume_from, path) from None


def _check_ids(view, reply, index):
    """The samples the socket located are the ones the `.index` lists there."""
    s, e = reply.start, reply.start + reply.count
    if reply.ids != index.ids[s:e]:
        k = next(i for i, (a, b) in enumerate(zip(reply.ids, index.ids[s:e])) if a != b)
        raise ClientError("EIO", f"{view.client.socket_path}: position {s + k} of view epoch {view.epoch}, rank "
                          f"{view.rank} of {view.world_size} is sample {reply.ids[k]}, {index.path} has "
                          f"{index.ids[s + k]}")


def _coalesced(blocks):
    """Adjacent blocks as one range (all of them with one worker): fewer,
    longer ranges keep the reads large."""
    out = []
    for first, end in blocks:
        if out and out[-1][1] == first:
            out[-1] = (out[-1][0], end)
        else:
            out.append((first, end))
    return out


class BinView:
    """`<dataset>/epochs/<epoch>/<world_size>/<rank>.bin` (fixed-record
    datasets): record k of the epoch is bytes [k x size, (k+1) x size).

    `zero_copy` as for TarView: with the client socket, the records'
    locations are asked for in blocks of `block` positions and each record
    is copied out of dlfsd's memory (sequential access is the fast path).
    `seed` and `resume_from` as for TarView."""

    CACHED_BLOCKS = 8

    def __init__(self, dataset_dir, epoch, rank, world_size, zero_copy="auto",
                 reconnect_timeout=DEFAULT_RECONNECT_TIMEOUT, block=MAX_COUNT, seed=None, resume_from=None):
        self._fd = self._pid = None
        self.seed = None if seed is None else check_seed(seed)
        self.resume_from = None if resume_from is None else resume_spec(resume_from)
        stem = view_path(dataset_dir, epoch, world_size, rank, self.seed, self.resume_from)
        self.path = stem + ".bin"
        self.index = _open_index(stem + ".index", dataset_dir, epoch, self.seed, self.resume_from)
        n = len(self.index)
        size = os.stat(self.path).st_size
        self.record_size = size // n if n else 0
        if n and size != n * self.record_size:
            raise ValueError(f"{self.path}: {size} bytes is not {n} records of one size")
        if not 1 <= block <= MAX_COUNT:
            raise ValueError(f"block must be in [1, {MAX_COUNT}], got {block}")
        self.dataset_dir, self.epoch, self.rank, self.world_size = dataset_dir, epoch, rank, world_size
        self.zero_copy, self.reconnect_timeout, self.block = zero_copy, reconnect_timeout, block
        self.client_socket = _choose_socket(dataset_dir, zero_copy, False, self.path)
        self._client, self._chunks = None, []

    def __len__(self):
        return len(self.index)

    def sample_id(self, k):
        return self.index.ids[k]

    def record(self, k):
        """The bytes of position k (one pread; one descriptor per process, so
        forked DataLoader workers never share a file offset or descriptor)."""
        if not -len(self) <= k < len(self):
            raise IndexError(f"{self.path}: position {k} is not in [0, {len(self)})")
        k %= len(self)
        view = _client_view(self, len(self))
        if view is not None:
            return self._client_record(view, k)
        if self._fd is None or self._pid != os.getpid():
            self._fd, self._pid = os.open(self.path, os.O_RDONLY), os.getpid()
        data = os.pread(self._fd, self.record_size, k * self.record_size)
        if len(data) != self.record_size:
            raise OSError(f"{self.path}: short read at position {k}: {len(data)} of {self.record_size} bytes")
        return data

    def __del__(self):
        if self._fd is not None and self._pid == os.getpid():
            os.close(self._fd)

    def _client_record(self, view, k):
        for chunk in self._chunks:
            if chunk.start <= k < chunk.end:
                return chunk.record(k)
        first = k - k % self.block
        end = min(first + self.block, len(self))
        reply = view.batch(first, end - first)
        if reply.start + reply.count <= k:  # short (the slot filled up): ask again from k
            self._remember(view, reply)
            reply = view.batch(k, end - k)
        return self._remember(view, reply).record(k)

    def _remember(self, view, reply):
        _check_ids(view, reply, self.index)
        if reply.count and (min(reply.lengths) != self.record_size or max(reply.lengths) != self.record_size):
            raise ClientError("EIO", f"{view.client.socket_path}: positions [{reply.start}, "
                              f"{reply.start + reply.count}) of {self.path} have lengths {min(reply.lengths)} to "
                              f"{max(reply.lengths)}, the view's records are {self.record_size} bytes")
        chunk = _Chunk(reply)
        self._chunks.insert(0, chunk)
        del self._chunks[self.CACHED_BLOCKS:]
        return chunk

    def __getstate__(self):  # a descriptor, a socket, mappings do not cross a pickle (spawned workers)
        state = dict(self.__dict__)
        state["_fd"] = state["_pid"] = state["_client"] = None
        state["_chunks"] = []
        return state


class _Chunk:
    """Located records of a BinView: region 0 ones are copied when asked
    for, staged ones right away (their slot is reused by later requests)."""

    __slots__ = ("start", "end", "reply", "staged")

    def __init__(self, reply):
        self.start, self.end, self.reply = reply.start, reply.start + reply.count, reply
        self.staged = None
        if 1 in reply.regions:
            at = [i for i, r in enumerate(reply.regions) if r]
            region1, offsets, lengths = reply._mmaps[1], reply.offsets, reply.lengths
            self.staged = {i: region1[offsets[i]:offsets[i] + lengths[i]] for i in at}

    def record(self, k):
        i = k - self.start
        reply = self.reply
        if reply.regions[i]:
            return self.staged[i]
        o = reply.offsets[i]
        return reply._mmaps[0][o:o + reply.lengths[i]]
