"""Zero-copy batches from dlfsd's client socket (docs/client-protocol.md):
each SampleBatch's samples are read-only memoryviews of dlfsd's memory, no
copy, no system call per sample. Same samples, order and worker split as
TarView.batches (docs/python.md, "Zero-copy reads")."""
from .batches import batch_runs
from .client import DEFAULT_RECONNECT_TIMEOUT, MAX_COUNT, Client, ClientError, ClientUnavailable, find_socket
from .split import DEFAULT_BLOCK_BYTES, resolve_rank, worker_blocks
from .view import TarView, _check_ids, _coalesced


class SampleBatch:
    """batch_size samples (groups) of a rank's view, in its planned order.

    Per sample (per view position: a one-member-per-sample view has one
    position per sample): `ids` (the `.index` ids), `keys`, `samples`
    (read-only memoryviews), `lengths`; `names` when asked (the member
    name, or for a grouped dataset the list of its members' names); for a
    grouped dataset `members` (member counts), `member_offsets` and
    `member_lengths` (all members in order, each counted from the start of
    its sample's bytes, which span its members: a WebDataset shard's tar
    headers lie between them; member(i) cuts them out).

    Samples in dlfsd's dataset memory stay valid while the memoryview
    lives; staged ones until `slots - 1` further batch requests of the same
    SampleBatches (one per SampleBatch unless its staged bytes overflow a
    slot). packed() and numpy() copy: call them to keep a batch longer. A
    pickled SampleBatch (a DataLoader worker's result) is sent packed."""

    __slots__ = ("ids", "keys", "samples", "lengths", "names", "members", "member_offsets", "member_lengths",
                 "_first")

    def __init__(self, ids, keys, samples, lengths, names=None, members=None, member_offsets=None,
                 member_lengths=None):
        self.ids, self.keys, self.samples, self.lengths = ids, keys, samples, lengths
        self.names, self.members = names, members
        self.member_offsets, self.member_lengths = member_offsets, member_lengths
        self._first = None

    def __len__(self):
        return len(self.samples)

    def member(self, i):
        """Sample i's members as memoryviews, in the order of its names (a
        grouped dataset; otherwise [the sample])."""
        if self.members is None:
            return [self.samples[i]]
        if self._first is None:  # index of each sample's first member
            self._first, at = [], 0
            for n in self.members:
                self._first.append(at)
                at += n
        m, mv = self._first[i], self.samples[i]
        return [mv[o:o + n] for o, n in zip(self.member_offsets[m:m + self.members[i]],
                                             self.member_lengths[m:m + self.members[i]])]

    def packed(self):
        """(numpy uint8 array of the samples back to back, numpy int64 lengths):
        one copy, no Python step per sample."""
        import numpy as np
        return np.frombuffer(bytearray().join(self.samples), np.uint8), np.array(self.lengths, np.int64)

    def numpy(self):
        """Fixed-size samples as a (count, size) uint8 array (one copy)."""
        import numpy as np
        if not self.lengths:
            return np.empty((0, 0), np.uint8)
        size = self.lengths[0]
        if min(self.lengths) != size or max(self.lengths) != size:
            raise ValueError(f"numpy() wants samples of one size; these are {min(self.lengths)} to "
                             f"{max(self.lengths)} bytes: use packed()")
        return np.frombuffer(bytearray().join(self.samples), np.uint8).reshape(len(self.samples), size)

    def __reduce__(self):  # memoryviews do not pickle: the bytes back to back, cut again on arrival
        return (_unpack, (self.ids, self.keys, b"".join(self.samples), self.lengths, self.names, self.members,
                          self.member_offsets, self.member_lengths))

    def __repr__(self):
        return f"<dlfs.SampleBatch {len(self)} samples, {sum(self.lengths)} bytes>"


def _unpack(ids, keys, data, lengths, names, members, member_offsets, member_lengths):
    mv, at, samples = memoryview(data), 0, []
    for n in lengths:
        samples.append(mv[at:at + n])
        at += n
    return SampleBatch(ids, keys, samples, lengths, names, members, member_offsets, member_lengths)


class SampleBatches:
    """One DataLoader worker's share of a rank's epoch view as SampleBatch
    objects of `batch_size` samples (the last possibly short), read through
    dlfsd's client socket: the samples, order and worker split of
    TarView(...).batches(batch_size, worker, num_workers). The `.index` is
    read through the mount (keys, the block plan). Iterable (each iteration
    reads the share again); one Client per SampleBatches and process.

    Requires the socket: without it, ClientUnavailable. `seed` and
    `resume_from` as for TarView."""

    def __init__(self, dataset_dir, epoch=0, rank=None, world_size=None, batch_size=256, worker=0, num_workers=1,
                 start=0, block_samples=None, block_bytes=DEFAULT_BLOCK_BYTES, names=False,
                 reconnect_timeout=DEFAULT_RECONNECT_TIMEOUT, seed=None, resume_from=None):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if not 0 <= worker < num_workers:
            raise ValueError(f"worker {worker} is not in [0, {num_workers})")
        rank, world_size = resolve_rank(rank, world_size)
        self.dataset_dir, self.epoch, self.rank, self.world_size = dataset_dir, epoch, rank, world_size
        self.batch_size, self.worker, self.num_workers, self.names = batch_size, worker, num_workers, names
        self.reconnect_timeout = reconnect_timeout
        self.client_socket = require_socket(dataset_dir)
        self.view = TarView(dataset_dir, epoch, rank, world_size, start, block_samples, block_bytes,
                            zero_copy=False, seed=seed, resume_from=resume_from)
        if self.view.index.opportunistic:
            raise ClientUnavailable(f"{self.view.path}: an opportunistic view's order is decided as it is read: "
                                    "dlfsd serves it through the mount only; read the views through dlfs.TarView "
                                    "instead", "EINVAL")
        self._client = None  # (pid, ClientView)

    def __len__(self):
        """Batches in this worker's share."""
        return sum(1 for _ in batch_runs(self._ranges(), self.batch_size))

    def _ranges(self):
        return _coalesced(worker_blocks(self.view.blocks, self.worker, self.num_workers))

    def client_view(self):
        """This process's ClientView (opened on first use)."""
        import os
        if self._client is None or self._client[0] != os.getpid():
            path, dataset = self.client_socket
            client = Client(self.dataset_dir, socket_path=path, dataset=dataset,
                            reconnect_timeout=self.reconnect_timeout)
            view = client.view(self.epoch, self.world_size, self.rank, self.view.seed, self.view.resume_from)
            if len(view) != len(self.view.index):
                raise ClientError("EIO", f"{path}: view epoch {self.epoch}, rank {self.rank} of {self.world_size} "
                                  f"holds {len(view)} samples, {self.view.index.path} lists {len(self.view.index)}")
            self._client = (os.getpid(), view)
        return self._client[1]

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    def __iter__(self):
        view = self.client_view()
        client, tv, index = view.client, self.view, self.view.index
        grouped, gf = index.grouped, tv.group_first
        ask_names = grouped and self.names
        if grouped:
            keys_of, names_of = index.names, None
        else:
            keys_of = tv._split_names()[0]
            names_of = index.names if self.names else None
        for runs in batch_runs(self._ranges(), self.batch_size):
            parts = []  # [reply, its samples, its slot still to be copied out of] for this batch
            for first, end in runs:
                lo, hi = (first, end) if grouped else (gf[first], gf[end])
                while lo < hi:
                    slot = client.next_slot()
                    for part in parts:  # the next request reuses a slot of this batch: copy that part out first
                        if part[2] == slot:
                            part[1], part[2] = list(map(memoryview, part[0].lasting())), None
                    reply = view.batch(lo, min(hi - lo, MAX_COUNT), names=ask_names)
                    if reply.count == 0:
                        raise client._fail(f"a batch answered 0 samples at position {lo} of {len(view)}")
                    _check_ids(view, reply, index)
                    parts.append([reply, reply.memoryviews(), reply.slot if 1 in reply.regions else None])
                    lo += reply.count
            yield self._batch(parts, keys_of, names_of, grouped)

    @staticmethod
    def _batch(parts, keys_of, names_of, grouped):
        if len(parts) == 1:
            reply, samples = parts[0][0], parts[0][1]
            s, e = reply.start, reply.start + reply.count
            names = reply.names if grouped else (names_of[s:e] if names_of is not None else None)
            return SampleBatch(reply.ids, keys_of[s:e], samples, reply.lengths, names,
                               reply.members if grouped else None, reply.member_offsets, reply.member_lengths)
        ids, keys, samples, lengths = [], [], [], []
        names = [] if (parts[0][0].names is not None or names_of is not None) else None
        members, member_offsets, member_lengths = ([], [], []) if grouped else (None, None, None)
        for reply, views, _ in parts:
            s, e = reply.start, reply.start + reply.count
            ids += reply.ids
            keys += keys_of[s:e]
            samples += views
            lengths += reply.lengths
            if names is not None:
                names += reply.names if grouped else names_of[s:e]
            if grouped:
                members += reply.members
                member_offsets += reply.member_offsets
                member_lengths += reply.member_lengths
        return SampleBatch(ids, keys, samples, lengths, names, members, member_offsets, member_lengths)


def require_socket(dataset_dir):
    """find_socket(dataset_dir), or ClientUnavailable saying what to do instead."""
    found = find_socket(dataset_dir)
    if found is None:
        raise ClientUnavailable(f"{dataset_dir}: dlfsd serves no client socket for this dataset (no "
                                "user.dlfs.client_socket attribute on epochs/0/1/0.index: not a DLFS mount, or "
                                "client_socket = \"off\"); zero-copy batches need it: read the views through "
                                "dlfs.TarView instead (it reads the mount)")
    return found
