"""A view's `<r>.index` (docs/views.md): one line per position with the
sample id, the member's data offset in `<r>.tar`, its length and its name;
in a grouped dataset (header field group_by) one line per sample group with
its key and the tar span of all its members. Names escape tab, newline, CR
and backslash."""
import os
import re

from .files import read_file
from .resume import world_dir
from .tarstream import padded

_HEAD = "# dlfs view "


class ViewIndexError(ValueError):
    """A `.index` file that does not parse."""


class ViewIndex:
    """Positions of one rank's epoch view: ids, data offsets, lengths, names."""

    def __init__(self, path):
        self.path = path
        # read_file: no isatty() ioctl, which would be a round trip to dlfsd (files.py)
        text = read_file(path).decode("utf-8", errors="surrogateescape")
        head, _, body = text.partition("\n")
        if not head.startswith(_HEAD):
            raise ViewIndexError(f"{path}: line 1 is not a '{_HEAD.strip()} ...' header: not a DLFS view index")
        try:
            self.meta = dict(kv.split("=", 1) for kv in head[len(_HEAD):].split())
        except ValueError:
            raise ViewIndexError(f"{path}: line 1: header fields are not key=value") from None
        try:  # column by column from one flat split: a million lines in about a second, not ten
            cols = _columns(body)
            positions, self.ids, self.offsets, self.lengths = (list(map(int, c)) for c in cols[:4])
            self.names = cols[4]
            if "\\" in body:
                self.names = [_unescape(n) for n in self.names]
        except ValueError:
            self._explain(body.split("\n"))
        if positions != list(range(len(positions))):
            self._explain(body.split("\n"))
        want = self.meta.get("samples")
        if want is not None and int(want) != len(self.ids):
            raise ViewIndexError(f"{path}: the header says samples={want}, the file lists {len(self.ids)}")
        self.grouped = "group_by" in self.meta
        if self.grouped:  # each line's span is the group's members, headers included
            self.begins = list(self.offsets)
            self.ends = [o + n for o, n in zip(self.offsets, self.lengths)]
        else:
            ends = [o + padded(n) for o, n in zip(self.offsets, self.lengths)]
            self.begins = [0] + ends[:-1]  # member k's header starts where member k-1 ends
            self.ends = ends

    def _explain(self, lines):
        """Raises the error naming the first line (of the body) that does not parse."""
        for lineno, line in enumerate(lines, start=2):
            if not line and lineno == len(lines) + 1:
                break
            parts = line.split("\t", 4)
            try:
                k = int(parts[0])
                for x in parts[1:4]:
                    int(x)
                parts[4]
            except (ValueError, IndexError):
                raise ViewIndexError(f"{self.path}: line {lineno}: want position, id, offset, length, name "
                                     f"separated by tabs, got {line[:200]!r}") from None
            if k != lineno - 2:
                raise ViewIndexError(f"{self.path}: line {lineno}: position {k}, want {lineno - 2}")
        raise ViewIndexError(f"{self.path}: does not parse")

    def __len__(self):
        return len(self.ids)

    @property
    def opportunistic(self):
        """The tar stream's member order is decided as it is read (docs/views.md):
        the offsets here describe the planned order, not the stream."""
        return self.meta.get("order") == "opportunistic"

    def member_begin(self, k):
        """Where member k's header starts in `<r>.tar` (the end of member k-1)."""
        return self.begins[k]

    def member_end(self, k):
        """The end of member k's data padding in `<r>.tar`."""
        return self.ends[k]


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}


def _unescape(name):
    """The name as the tar view has it: \\t, \\n, \\r and \\\\ undone."""
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), name)


def _columns(body):
    """The five tab-separated columns of the index lines, as lists; ValueError
    if a line does not have five fields."""
    lines = body.count("\n") + (0 if body.endswith("\n") or not body else 1)
    fields = body.replace("\n", "\t").split("\t")
    if body.endswith("\n") or not body:
        fields.pop()
    if len(fields) == 5 * lines:
        return [fields[i::5] for i in range(5)]
    # A name holding a tab (the name is the last field: it may), or a malformed line.
    rows = [line.split("\t", 4) for line in body.split("\n")[:lines]]
    if any(len(r) != 5 for r in rows):
        raise ValueError("a line without five fields")
    return [list(c) for c in zip(*rows)] if rows else [[] for _ in range(5)]


def view_path(dataset_dir, epoch, world_size, rank, seed=None, resume_from=None):
    """`<dataset>/epochs/<e>/<W>/<r>`, the common stem of a rank's view
    files; with `seed`, under `<dataset>/seeds/<seed>/`; with `resume_from`
    (the first run's (W, consumed counts)), the rest of the epoch
    `.../epochs/<e>/<W>/resume/<consumed>/<world_size>/<r>` (dlfs/resume.py)."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in [0, world_size={world_size})")
    return os.path.join(world_dir(dataset_dir, epoch, world_size, seed, resume_from), str(rank))
