"""One rank's epoch view, without torch: the tar stream as sample groups for
one DataLoader worker's share, and the `.bin` records by position."""
import os

from .batches import RunReader, batch_runs, pack
from .grouping import group_members, group_starts
from .index import ViewIndex, view_path
from .split import DEFAULT_BLOCK_BYTES, plan_blocks, worker_blocks
from .tarstream import DEFAULT_CHUNK, TarFormatError, iter_members


class TarView:
    """`<dataset>/epochs/<epoch>/<world_size>/<rank>.tar` as (key, {ext: bytes}).

    `start` is the number of samples (groups) of this epoch already consumed:
    iteration resumes at that position of the planned order (the `.index`
    gives its byte offset). Samples [start, len) are cut into blocks
    (split.plan_blocks) dealt round-robin to `num_workers` readers."""

    def __init__(self, dataset_dir, epoch, rank, world_size, start=0, block_samples=None,
                 block_bytes=DEFAULT_BLOCK_BYTES, chunk=DEFAULT_CHUNK):
        self.stem = view_path(dataset_dir, epoch, world_size, rank)
        self.path = self.stem + ".tar"
        self.index = ViewIndex(self.stem + ".index")
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

    def __len__(self):
        """Samples (groups) left in this rank's epoch from `start`."""
        return len(self.group_first) - 1 - self.start

    def samples(self, worker=0, num_workers=1):
        """This worker's share, block after block, as (key, {ext: bytes})."""
        if self.index.opportunistic and (num_workers > 1 or self.start > 0):
            raise ValueError(f"{self.path}: an opportunistic view's order is decided as it is read "
                             "(docs/views.md): it can only be read whole, by one reader "
                             f"(here num_workers={num_workers}, start={self.start})")
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
        if not self.index.grouped and not self.index.opportunistic:
            ranges = _coalesced(worker_blocks(self.blocks, worker, num_workers))
            fd = os.open(self.path, os.O_RDONLY)
            try:
                reader = RunReader(fd, self.path, self.index, self.group_first)
                for runs in batch_runs(ranges, batch_size):
                    yield reader.read(runs)
            finally:
                os.close(fd)
            return
        # A grouped index lists group spans, not members, and an opportunistic
        # stream's order is only known as it is read: parse the stream.
        keys, groups = [], []
        for key, group in self.samples(worker, num_workers):
            keys.append(key)
            groups.append(group)
            if len(keys) == batch_size:
                yield pack(keys, groups)
                keys, groups = [], []
        if keys:
            yield pack(keys, groups)

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
    datasets): record k of the epoch is bytes [k x size, (k+1) x size)."""

    def __init__(self, dataset_dir, epoch, rank, world_size):
        self._fd = self._pid = None
        stem = view_path(dataset_dir, epoch, world_size, rank)
        self.path = stem + ".bin"
        self.index = ViewIndex(stem + ".index")
        n = len(self.index)
        size = os.stat(self.path).st_size
        self.record_size = size // n if n else 0
        if n and size != n * self.record_size:
            raise ValueError(f"{self.path}: {size} bytes is not {n} records of one size")

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
        if self._fd is None or self._pid != os.getpid():
            self._fd, self._pid = os.open(self.path, os.O_RDONLY), os.getpid()
        data = os.pread(self._fd, self.record_size, k * self.record_size)
        if len(data) != self.record_size:
            raise OSError(f"{self.path}: short read at position {k}: {len(data)} of {self.record_size} bytes")
        return data

    def __del__(self):
        if self._fd is not None and self._pid == os.getpid():
            os.close(self._fd)

    def __getstate__(self):  # a descriptor does not cross a pickle (spawned workers)
        state = dict(self.__dict__)
        state["_fd"] = state["_pid"] = None
        return state
