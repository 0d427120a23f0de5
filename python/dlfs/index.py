"""A view's `<r>.index` (docs/views.md): one line per position with the
sample id, the member's data offset in `<r>.tar`, its length and its name."""
import os

from .tarstream import padded

_HEAD = "# dlfs view "


class ViewIndexError(ValueError):
    """A `.index` file that does not parse."""


class ViewIndex:
    """Positions of one rank's epoch view: ids, data offsets, lengths, names."""

    def __init__(self, path):
        self.path = path
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            text = f.read()
        lines = text.split("\n")
        if not lines[0].startswith(_HEAD):
            raise ViewIndexError(f"{path}: line 1 is not a '{_HEAD.strip()} ...' header: not a DLFS view index")
        try:
            self.meta = dict(kv.split("=", 1) for kv in lines[0][len(_HEAD):].split())
        except ValueError:
            raise ViewIndexError(f"{path}: line 1: header fields are not key=value") from None
        if lines[-1] == "":
            lines.pop()
        self.ids, self.offsets, self.lengths, self.names = [], [], [], []
        for lineno, line in enumerate(lines[1:], start=2):
            parts = line.split("\t", 4)
            try:
                k, sid, off, length = (int(x) for x in parts[:4])
                name = parts[4]
            except (ValueError, IndexError):
                raise ViewIndexError(f"{path}: line {lineno}: want position, id, offset, length, name "
                                  f"separated by tabs, got {line[:200]!r}") from None
            if k != lineno - 2:
                raise ViewIndexError(f"{path}: line {lineno}: position {k}, want {lineno - 2}")
            self.ids.append(sid)
            self.offsets.append(off)
            self.lengths.append(length)
            self.names.append(name)
        want = self.meta.get("samples")
        if want is not None and int(want) != len(self.ids):
            raise ViewIndexError(f"{path}: the header says samples={want}, the file lists {len(self.ids)}")

    def __len__(self):
        return len(self.ids)

    @property
    def opportunistic(self):
        """The tar stream's member order is decided as it is read (docs/views.md):
        the offsets here describe the planned order, not the stream."""
        return self.meta.get("order") == "opportunistic"

    def member_begin(self, k):
        """Where member k's header starts in `<r>.tar` (the end of member k-1)."""
        return 0 if k == 0 else self.member_end(k - 1)

    def member_end(self, k):
        """The end of member k's data padding in `<r>.tar`."""
        return self.offsets[k] + padded(self.lengths[k])


def view_path(dataset_dir, epoch, world_size, rank):
    """`<dataset>/epochs/<e>/<W>/<r>`, the common stem of a rank's view files."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in [0, world_size={world_size})")
    return os.path.join(dataset_dir, "epochs", str(epoch), str(world_size), str(rank))
