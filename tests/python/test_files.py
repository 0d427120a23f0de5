"""dlfs.read_file: the same bytes as open().read() for every size around
the read's edges, and errors as open() raises them (that it makes no
ioctl on a mount is checked by tests/integration/check_no_open.py)."""
import errno
import os
import tempfile
import unittest

from dlfs.files import read_file


class ReadFileTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_same_bytes_as_open_read(self):
        for size in (0, 1, 4095, 4096, 4097, 110 << 10, (1 << 20) + 3):
            data = os.urandom(size)
            path = self.write(f"f{size}", data)
            got = read_file(path)
            self.assertIsInstance(got, bytes)
            self.assertEqual(got, data, f"size {size}")
            self.assertEqual(read_file(os.fsencode(path)), data)

    def test_file_larger_than_its_fstat_size(self):
        # /proc files report size 0 but have content: read_file must read to the end.
        with open("/proc/self/status", "rb") as f:
            want_prefix = f.read().split(b"\n")[0]
        got = read_file("/proc/self/status")
        self.assertTrue(got.startswith(want_prefix), got[:40])
        self.assertIn(b"\nPid:", got)

    def test_errors_name_the_path(self):
        missing = os.path.join(self.dir, "missing")
        with self.assertRaises(FileNotFoundError) as cm:
            read_file(missing)
        self.assertEqual(cm.exception.filename, missing)
        with self.assertRaises(IsADirectoryError):
            read_file(self.dir)

    def test_no_fd_left_open(self):
        path = self.write("x", b"abc")
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(50):
            read_file(path)
        with self.assertRaises(OSError):
            read_file(self.dir)
        self.assertEqual(len(os.listdir("/proc/self/fd")), before)


if __name__ == "__main__":
    unittest.main()
