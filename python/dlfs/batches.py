"""Whole batches of an epoch view, column by column.

Reading a view sample by sample costs a Python iteration, a tar header parse
and a DataLoader fetch per sample; at a few KiB per sample that, not I/O,
limits a DataLoader worker (docs/benchmark-notes.md, "PyTorch pipeline"). A batch
here is one `pread` per run of consecutive samples, with the member offsets
taken from the view's `.index`, and each extension's bytes packed back to back:
a worker hands the DataLoader one object per batch.

ViewBatch.fields maps an extension ("jpg", "cls", "" for names without a dot)
to (data, lengths): `data` the bytes of that member of every sample of the
batch back to back, `lengths[i]` the length of sample i's member, or -1 if
sample i has no member with that extension (sample i's bytes are
data[sum of the non-negative lengths before i:][:lengths[i]])."""
import os
from collections import namedtuple

from .grouping import split_key
from .tarstream import BLOCK, TarFormatError

ViewBatch = namedtuple("ViewBatch", "keys fields")
ViewBatch.__doc__ = "keys: the samples' keys in order; fields: {ext: (bytes, [length or -1])} (dlfs/batches.py)"

ABSENT = -1

_USTAR = b"ustar"


def batch_runs(ranges, batch_size):
    """Cuts sample ranges [(first, end)] into batches of batch_size samples
    (the last may be short); a batch is a list of runs (first, end) of
    consecutive samples, several where it spans two ranges."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    runs, have = [], 0
    for first, end in ranges:
        while first < end:
            take = min(end - first, batch_size - have)
            runs.append((first, first + take))
            have += take
            first += take
            if have == batch_size:
                yield runs
                runs, have = [], 0
    if runs:
        yield runs


def pack(keys, samples):
    """A ViewBatch from the samples' keys and their {ext: bytes-like} groups."""
    exts = sorted({ext for group in samples for ext in group})
    fields = {}
    for ext in exts:
        parts = [group.get(ext) for group in samples]
        fields[ext] = (b"".join(p for p in parts if p is not None), [ABSENT if p is None else len(p) for p in parts])
    return ViewBatch(keys, fields)


class RunReader:
    """Reads runs of consecutive samples of a one-member-per-line `.index`
    with one pread each and cuts the members out of the buffer, checking each
    member's own tar header (magic, size and name) against the index: a view
    and index that disagree are an error, never wrong bytes or keys."""

    def __init__(self, fd, path, index, group_first):
        self.fd, self.path, self.index, self.group_first = fd, path, index, group_first
        self.buffer = bytearray()
        self.split = [split_key(n) for n in index.names]
        self.encoded = [n.encode("utf-8", "surrogateescape") for n in index.names]

    def read(self, runs):
        index, gf = self.index, self.group_first
        spans = [(index.begins[gf[first]], index.ends[gf[end] - 1]) for first, end in runs]
        total = sum(stop - at for at, stop in spans)
        if len(self.buffer) < total:
            self.buffer = bytearray(total)  # grows to the largest batch, then is reused
        keys, samples, into = [], [], 0
        for (first, end), (at, stop) in zip(runs, spans):
            mv = memoryview(self.buffer)[into:into + stop - at]  # runs side by side: all alive until pack
            self._read_run(first, end, at, mv, keys, samples)
            into += stop - at
        return pack(keys, samples)

    def _read_run(self, first, end, at, mv, keys, samples):
        """Samples [first, end), whose bytes are [at, at + len(mv)) of the view, into mv."""
        index, gf = self.index, self.group_first
        got = os.preadv(self.fd, [mv], at)
        while got < len(mv):  # FUSE may return less than asked near the end of a region
            n = os.preadv(self.fd, [mv[got:]], at + got)
            if n == 0:
                raise TarFormatError(self.path, at + got, f"truncated: the index says the run of samples "
                                     f"[{first}, {end}) ends at byte {at + len(mv)}")
            got += n
        offsets, lengths, split, encoded = index.offsets, index.lengths, self.split, self.encoded
        for g in range(first, end):
            group = {}
            for m in range(gf[g], gf[g + 1]):
                o, n = offsets[m] - at, lengths[m]
                header = mv[o - BLOCK:o]
                if o < BLOCK or header[257:262] != _USTAR or _size(header) != n or not _named(header, encoded[m]):
                    raise TarFormatError(self.path, offsets[m] - BLOCK, f"the member the index lists at position "
                                         f"{m} ({index.names[m]!r}, {n} bytes) has no matching tar header here")
                group[split[m][1]] = mv[o:o + n]
            keys.append(split[gf[g]][0])
            samples.append(group)


def _named(header, name):
    """Whether the header's name field fits the index's name: equal when the
    name fits in 100 bytes; for a longer one the field holds its start (GNU
    long-name record before it) or its end (ustar prefix + name)."""
    field = bytes(header[:100]).split(b"\0", 1)[0]
    if len(name) <= 100:
        return field == name
    return bool(field) and (name.startswith(field) or name.endswith(field))


def _size(header):
    """The size field of a ustar header, or None if it is not octal (base-256
    sizes, over 8 GiB, are not samples a batch would hold)."""
    try:
        return int(bytes(header[124:136]).rstrip(b"\0 "), 8)
    except ValueError:
        return None
