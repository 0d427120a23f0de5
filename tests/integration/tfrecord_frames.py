"""TFRecord framing written and checked independently of dlfsd: each record is
<length u64 LE> <masked CRC32C of the length u32> <data> <masked CRC32C of the data u32>,
with CRC32C from python3-crcmod. Used by the scenarios that make or read TFRecord files."""
import struct
import sys

import crcmod.predefined

crc32c = crcmod.predefined.mkCrcFun("crc-32c")


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(data):
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked(length)) + data + struct.pack("<I", masked(data))


def parse(blob, what, fail=sys.exit):
    """The records of a TFRecord stream, both CRCs of each checked; a bad frame calls
    fail("<what>: <the problem> at byte N")."""
    out, at = [], 0
    while at < len(blob):
        if len(blob) - at < 16:
            fail(f"{what}: truncated record at byte {at}")
        (length,) = struct.unpack_from("<Q", blob, at)
        if struct.unpack_from("<I", blob, at + 8)[0] != masked(blob[at:at + 8]):
            fail(f"{what}: bad length CRC at byte {at}")
        if len(blob) < at + 16 + length:
            fail(f"{what}: record at byte {at} runs past the end")
        data = blob[at + 12:at + 12 + length]
        if struct.unpack_from("<I", blob, at + 12 + length)[0] != masked(data):
            fail(f"{what}: bad data CRC for the record at byte {at}")
        out.append(data)
        at += 16 + length
    return out
