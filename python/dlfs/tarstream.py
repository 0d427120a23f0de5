"""A tar stream parser for the hot path of a data loader.

Python's tarfile reads a stream through a small internal buffer and builds a
TarInfo per member; on 3 KiB samples that costs more than the I/O. This
parser reads a byte range of a file with large preads (8 MiB) into one
reused buffer, parses the 512-byte headers itself and slices each member's
data out of the buffer as `bytes` (one copy); members of 32 KiB and more are
read by the kernel straight into their `bytes`.

What it understands (what DLFS writes, fs/views/tar_format.cc, and what other
writers commonly use): ustar headers (name + prefix), sizes in octal or GNU
base-256, GNU long names ('L'), pax extended headers ('x': path, size) and
global headers ('g', skipped). Directories, links and other non-regular
members are skipped. Damage is reported as TarFormatError naming the file
and the byte offset, never as wrong bytes.
"""
import os
import zlib

BLOCK = 512
DEFAULT_CHUNK = 8 << 20  # bytes per pread: large reads keep FUSE and the disk streaming
# Members this large are read straight into their bytes (one copy, not two).
# At 110 KiB members through a view, 128 KiB here cost the client ~60 us of
# CPU per member, 32 KiB ~40 (medians of 3 epochs, 2-core machine); below
# ~8 KiB the pread per member costs more than the copy it saves.
DIRECT_MIN = 32 << 10
_ZERO_BLOCK = bytes(BLOCK)
_REGULAR = (48, 0, 55)  # '0', NUL (old tars), '7' (contiguous file): regular files to every reader
_EXTENDED = (120, 76, 103)  # 'x' (pax), 'L' (GNU long name), 'g' (pax global)


class TarFormatError(ValueError):
    """The stream is not a valid tar stream at `offset` of `path`."""

    def __init__(self, path, offset, what):
        super().__init__(f"{path}: byte {offset}: {what}")
        self.path, self.offset = path, offset


def padded(n):
    """n rounded up to a whole number of 512-byte blocks."""
    return (n + BLOCK - 1) & ~(BLOCK - 1)


def _number(field, path, offset, what):
    """A numeric header field: octal text, or GNU base-256 (first byte 0x80)."""
    if field[0] == 0x80:
        return int.from_bytes(field[1:], "big")
    if field[0] == 0xFF:
        raise TarFormatError(path, offset, f"negative base-256 {what}")
    text = field.split(b"\0", 1)[0].strip(b" ")
    try:
        return int(text, 8) if text else 0
    except ValueError:
        raise TarFormatError(path, offset, f"{what} field {bytes(field)!r} is not an octal number") from None


def _check_header(h, path, offset):
    """The header checksum (the sum of its bytes, the checksum field counted as
    spaces): a misaligned or damaged stream fails here instead of yielding
    garbage. sum() over 512 bytes costs microseconds per member; Adler-32's low
    half is 1 + that sum modulo 65521, computed in C."""
    stored = h[148:156]
    want = _number(stored, path, offset, "checksum")
    if ((zlib.adler32(h) & 0xFFFF) - 1 - sum(stored) + 8 * 32 - want) % 65521:
        raise TarFormatError(path, offset, "header checksum mismatch (damaged stream, or not a tar stream)")


def _pax_records(data, path, offset):
    """The key -> value records of a pax extended header ("len key=value\\n")."""
    out, i = {}, 0
    while i < len(data) and data[i] != 0:
        sp = data.find(b" ", i)
        try:
            length = int(data[i:sp])
        except ValueError:
            raise TarFormatError(path, offset, "malformed pax record length") from None
        if sp < 0 or length <= 0 or i + length > len(data):
            raise TarFormatError(path, offset, "malformed pax record")
        key, eq, value = data[sp + 1:i + length - 1].partition(b"=")
        if not eq:
            raise TarFormatError(path, offset, "pax record without '='")
        out[key.decode("utf-8", "replace")] = value
        i += length
    return out


def _fill(fd, mv, pos, fill, base, end, need, greedy=True):
    """Moves the unconsumed buf[pos:fill] to the front and reads after it,
    as much as the buffer holds, until it has `need` bytes or the range
    ends (greedy=False: only up to `need`, when the next member's data will be
    read directly). Returns (fill, base) with pos now 0 (base: the file
    offset of buf[0]).

    One buffer for the whole range: on this kind of machine a fresh 8 MiB
    allocation per chunk costs more in page faults than reading it."""
    tail = fill - pos
    if tail and pos:
        mv[:tail] = mv[pos:fill]
    base, fill = base + pos, tail
    while fill < need:
        want = min((len(mv) if greedy else need) - fill, end - base - fill)
        if want <= 0:
            break
        got = os.preadv(fd, [mv[fill:fill + want]], base + fill)
        if not got:
            break
        fill += got
    return fill, base


def _read_direct(fd, path, at, size, end):
    """The data of the member whose header is at `at`, read by the kernel
    straight into the bytes object returned: for large members the copy out
    of the buffer would cost as much as the read itself."""
    data_off = at + BLOCK
    if data_off + padded(size) > end:
        raise TarFormatError(path, at, f"truncated: the member at this offset has {size} bytes of data, "
                             f"the stream ends after {max(0, end - data_off)}")
    data = os.pread(fd, size, data_off)
    if len(data) < size:  # a short read (EOF, or a huge read split): the rest, then one join
        parts = [data]
        have = len(data)
        while have < size:
            more = os.pread(fd, size - have, data_off + have)
            if not more:
                raise TarFormatError(path, at, f"truncated: the member at this offset has {size} bytes of data, "
                                     f"the stream ends after {have}")
            parts.append(more)
            have += len(more)
        data = b"".join(parts)
    return data


def iter_members(fd, path, begin=0, end=None, chunk=DEFAULT_CHUNK, buffer=None, ends=False):
    """Yields (name, data) for each regular member of the tar stream in bytes
    [begin, end) of the open file `fd` (`path` names it in errors). `begin`
    must be a member boundary; the range may stop at any member boundary
    (a worker's block) or run to the end-of-archive blocks. `buffer` (a
    writable memoryview) replaces the chunk-sized buffer this would allocate
    (and zero): pass one when parsing many ranges. With `ends`, yields
    (name, data, end) where end is the file offset after the member's padding
    (a sample group's boundary in a grouped view's .index).

    One loop with local variables: on 3 KiB members the per-member work is
    what limits the rate, so nothing here is a call it need not be."""
    if end is None:
        end = os.fstat(fd).st_size
    mv = buffer if buffer is not None else memoryview(bytearray(max(BLOCK, min(chunk, end - begin))))
    pos = fill = 0
    base = begin  # the file offset of mv[0]
    long_name = pax = None
    direct = False  # the last member was large: read headers alone, data straight into its bytes
    while True:
        if fill - pos < BLOCK:
            fill, base = _fill(fd, mv, pos, fill, base, end, BLOCK, not direct)
            pos = 0
            if fill == 0:
                if base < end:
                    raise TarFormatError(path, base, f"truncated: the file ends here, before byte {end}")
                return  # the range ends at a member boundary
            if fill < BLOCK:
                raise TarFormatError(path, base, f"truncated: a header needs 512 bytes, the stream ends after {fill}")
        h = mv[pos:pos + BLOCK].tobytes()
        at = base + pos
        if h == _ZERO_BLOCK:
            return  # end of archive (a second zero block follows)
        _check_header(h, path, at)
        try:
            size = int(h[124:136].rstrip(b"\0 "), 8)
        except ValueError:  # base-256, empty or damaged
            size = _number(h[124:136], path, at, "size")
        kind = h[156]
        if pax is not None and kind not in _EXTENDED:
            size, long_name = _apply_pax(pax, path, at, size, long_name)
            pax = None
        need = BLOCK + ((size + BLOCK - 1) & ~(BLOCK - 1))
        if fill - pos < need:
            direct = size >= DIRECT_MIN or need > len(mv)
            if not direct:
                fill, base = _fill(fd, mv, pos, fill, base, end, need)
                pos = 0
                if fill < need:
                    raise TarFormatError(path, at, f"truncated: the member at this offset needs {need} bytes "
                                         f"(header, {size} bytes of data, padding), the stream ends after {fill}")
        if fill - pos >= need:
            body = mv[pos + BLOCK:pos + BLOCK + size].tobytes()
            pos += need
        else:
            body = _read_direct(fd, path, at, size, end)
            pos, fill, base = 0, 0, at + need
        if kind in _EXTENDED:  # pax 'x', GNU 'L': they name the next member; pax 'g': ignored
            if kind == 76:
                long_name = body.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            elif kind == 120:
                pax = _pax_records(body, path, at)
            continue
        if kind not in _REGULAR:  # links, devices, FIFOs, directories
            long_name = None
            continue
        if long_name is not None:
            name, long_name = long_name, None
        else:
            name = h[:100].split(b"\0", 1)[0]
            if h[345] and h[257:262] == b"ustar":
                name = h[345:500].split(b"\0", 1)[0] + b"/" + name
            name = name.decode("utf-8", "surrogateescape")
        if ends:
            yield name, body, at + need
        else:
            yield name, body


def _apply_pax(pax, path, at, size, long_name):
    """(size, name) of the member after a pax header: its records override
    the ustar fields (a size past 8 GiB, a long or non-ASCII path)."""
    if "path" in pax:
        long_name = pax["path"].decode("utf-8", "surrogateescape")
    if "size" in pax:
        try:
            size = int(pax["size"])
        except ValueError:
            raise TarFormatError(path, at, f"pax size {pax['size']!r} is not a number") from None
    return size, long_name
