"""Whole-file reads without Python's isatty() round trip.

`open(path, "rb").read()` with default buffering calls isatty() (an ioctl,
TCGETS) on every open in Python before 3.14. The kernel forwards every ioctl
on a FUSE file to the daemon, so on a DLFS raw/ tree that is one round trip
per file, and in a DataLoader it halved the samples/s of raw/ on the project's
machines (docs/benchmark-notes.md, "Python's open() and FUSE"). read_file makes
the same read with os.open/os.read: no ioctl, one read of the whole file."""
import os


def read_file(path):
    """The bytes of the file at `path` (str, bytes or os.PathLike), read whole.

    One open, one fstat and, for a file that does not grow, one read: the read
    asks for one byte more than the size, so a short answer is the end of the
    file. Raises OSError (with the path) as open() would."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size + 1)
        if len(data) <= size:
            return data
        parts = [data]  # the file is larger than fstat said (it grew): read to the end
        while True:
            more = os.read(fd, 1 << 20)
            if not more:
                return b"".join(parts)
            parts.append(more)
    finally:
        os.close(fd)
