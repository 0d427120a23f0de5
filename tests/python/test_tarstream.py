"""dlfs.tarstream against tarfile-written streams: formats, sizes, damage."""
import io
import os
import pathlib
import tarfile
import tempfile
import unittest

from dlfs import tarstream
from dlfs.tarstream import TarFormatError, iter_members
from viewfixture import write_tar


def members_of(path, **kw):
    fd = os.open(path, os.O_RDONLY)
    try:
        return list(iter_members(fd, path, **kw))
    finally:
        os.close(fd)


def tarfile_members(path):
    with tarfile.open(path) as t:
        return [(m.name, t.extractfile(m).read()) for m in t if m.isfile()]


class TarStreamTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def check_same_as_tarfile(self, members, fmt, chunks=(8 << 20, 1024, 1536, 4096)):
        p = self.path("t.tar")
        write_tar(p, members, fmt)
        want = tarfile_members(p)
        self.assertEqual([n for n, _ in want], [n for n, _ in members])
        for chunk in chunks:  # small chunks: headers and data cut across reads, members bigger than the buffer
            self.assertEqual(members_of(p, chunk=chunk), want, f"chunk {chunk}")

    def test_ustar_names_with_prefix_and_empty_members(self):
        long_dir = "d" * 120
        members = [("a.txt", b"hello"), ("empty.bin", b""), (f"{long_dir}/f.jpg", os.urandom(5000)),
                   ("x/" * 40 + "deep.bin", os.urandom(512)), ("exact.bin", os.urandom(1024))]
        self.check_same_as_tarfile(members, tarfile.USTAR_FORMAT)

    def test_gnu_long_names(self):
        members = [("n" * 300 + ".jpg", os.urandom(3000)), ("short.cls", b"7"), ("é/" + "m" * 200, b"x" * 10)]
        self.check_same_as_tarfile(members, tarfile.GNU_FORMAT)

    def test_large_members_among_small_ones(self):
        # Members from DIRECT_MIN up are read straight into their bytes, the
        # headers after them alone; small members switch back to chunks.
        d = tarstream.DIRECT_MIN
        sizes = [300 << 10, d, d - 1, 10, 200 << 10, 0, 5000, 1 << 20, 3, d + 1, 2 * d]
        members = [(f"m{i}_" + "l" * (150 * (i % 2)) + ".bin", os.urandom(n)) for i, n in enumerate(sizes)]
        self.check_same_as_tarfile(members, tarfile.GNU_FORMAT)

    def test_pax_headers(self):
        members = [("ünïcode/naïve.jpg", os.urandom(2000)), ("p" * 400 + ".bin", os.urandom(700)), ("plain", b"")]
        self.check_same_as_tarfile(members, tarfile.PAX_FORMAT)

    def test_base256_size(self):
        # GNU tar writes sizes of 8 GiB and more in base-256; rewrite a small
        # member's size field that way (and its checksum) to test the parser.
        p = self.path("b.tar")
        data = os.urandom(1234)
        write_tar(p, [("big.bin", data), ("next.bin", b"after")], tarfile.GNU_FORMAT)
        raw = bytearray(pathlib.Path(p).read_bytes())
        raw[124:136] = b"\x80" + len(data).to_bytes(11, "big")
        raw[148:156] = b" " * 8
        raw[148:156] = b"%06o\0 " % sum(raw[:512])
        pathlib.Path(p).write_bytes(raw)
        self.assertEqual(tarfile_members(p)[0], ("big.bin", data))  # tarfile agrees the header is valid
        self.assertEqual(members_of(p), [("big.bin", data), ("next.bin", b"after")])

    def test_directories_and_links_are_skipped(self):
        p = self.path("l.tar")
        with tarfile.open(p, "w", format=tarfile.GNU_FORMAT) as t:
            d = tarfile.TarInfo("dir")
            d.type = tarfile.DIRTYPE
            t.addfile(d)
            s = tarfile.TarInfo("dir/link")
            s.type, s.linkname = tarfile.SYMTYPE, "f.bin"
            t.addfile(s)
            f = tarfile.TarInfo("dir/f.bin")
            f.size = 3
            t.addfile(f, io.BytesIO(b"abc"))
        self.assertEqual(members_of(p), [("dir/f.bin", b"abc")])

    def test_byte_range_of_a_stream(self):
        p = self.path("r.tar")
        members = [(f"m{i}.bin", os.urandom(600 + i)) for i in range(6)]
        layout = write_tar(p, members)
        begin = layout[2][1] - 512  # header of member 2
        end = layout[4][1] + ((layout[4][2] + 511) // 512) * 512  # end of member 4
        self.assertEqual(members_of(p, begin=begin, end=end), members[2:5])

    def test_truncated_data_names_the_member_offset(self):
        p = self.path("t.tar")
        layout = write_tar(p, [(f"m{i}.bin", os.urandom(3000)) for i in range(4)])
        header_of_2 = layout[2][1] - 512
        os.truncate(p, layout[2][1] + 100)
        for chunk in (8 << 20, 1024):
            with self.assertRaises(TarFormatError) as e:
                members_of(p, chunk=chunk)
            self.assertEqual(e.exception.offset, header_of_2)
            self.assertIn(f"byte {header_of_2}", str(e.exception))
            self.assertIn("truncated", str(e.exception))

    def test_truncated_header(self):
        p = self.path("h.tar")
        layout = write_tar(p, [("a.bin", b"x" * 10), ("b.bin", b"y" * 10)])
        os.truncate(p, layout[1][1] - 512 + 100)
        with self.assertRaises(TarFormatError) as e:
            members_of(p)
        self.assertEqual(e.exception.offset, layout[1][1] - 512)

    def test_damaged_header_is_refused(self):
        p = self.path("d.tar")
        layout = write_tar(p, [("a.bin", b"x" * 10), ("b.bin", b"y" * 10)])
        raw = bytearray(pathlib.Path(p).read_bytes())
        raw[layout[1][1] - 512 + 130] ^= 0x01  # a size digit of member 1
        pathlib.Path(p).write_bytes(raw)
        with self.assertRaises(TarFormatError) as e:
            members_of(p)
        self.assertIn("checksum", str(e.exception))
        self.assertEqual(e.exception.offset, layout[1][1] - 512)

    def test_not_a_tar_stream(self):
        p = self.path("n.tar")
        pathlib.Path(p).write_bytes(os.urandom(4096))
        with self.assertRaises(TarFormatError) as e:
            members_of(p)
        self.assertEqual(e.exception.offset, 0)


if __name__ == "__main__":
    unittest.main()
