"""Sample grouping (WebDataset keys) and the rank x worker split."""
import os
import random
import subprocess
import sys
import unittest
from unittest import mock

from dlfs.grouping import group_members, group_starts, split_key
from dlfs.split import plan_blocks, resolve_rank, worker_blocks


class GroupingTest(unittest.TestCase):
    def test_split_key(self):
        self.assertEqual(split_key("n01/img_17.jpg"), ("n01/img_17", "jpg"))
        self.assertEqual(split_key("a.b/c.seg.png"), ("a.b/c", "seg.png"))  # dots in directories are not keys
        self.assertEqual(split_key("dir/noext"), ("dir/noext", ""))
        self.assertEqual(split_key("rec/00000012.bin"), ("rec/00000012", "bin"))

    def test_group_members(self):
        members = [("a/1.jpg", b"J1"), ("a/1.cls", b"C1"), ("a/2.jpg", b"J2"), ("b/1.jpg", b"K1"),
                   ("b/1.jpg", b"K1again"), ("c", b"bare")]
        want = [("a/1", {"jpg": b"J1", "cls": b"C1"}), ("a/2", {"jpg": b"J2"}), ("b/1", {"jpg": b"K1"}),
                ("b/1", {"jpg": b"K1again"}), ("c", {"": b"bare"})]
        self.assertEqual(list(group_members(iter(members))), want)
        # group_starts cuts a list of names where group_members does.
        self.assertEqual(group_starts([n for n, _ in members]), [0, 2, 3, 4, 5])
        self.assertEqual(list(group_members(iter([]))), [])

    def test_group_starts_agrees_with_group_members(self):
        rng = random.Random(5)
        for _ in range(200):
            names = [f"d/{rng.choice('ab')}.{rng.choice(['jpg', 'cls', 'x.png'])}" for _ in range(rng.randrange(12))]
            sizes = [len(g) for _, g in group_members((n, b"") for n in names)]
            want = [sum(sizes[:i]) for i in range(len(sizes))]
            self.assertEqual(group_starts(names), want, names)


class SplitTest(unittest.TestCase):
    def test_blocks_cover_every_sample_once(self):
        begin = [0]
        for i in range(1000):
            begin.append(begin[-1] + 512 * (1 + i % 9))
        for start in (0, 1, 377, 999, 1000):
            for kw in ({"block_bytes": 1}, {"block_bytes": 20000}, {"block_bytes": 1 << 30}, {"block_samples": 7}):
                blocks = plan_blocks(begin, start, **kw)
                for workers in (1, 2, 3, 8):
                    seen = []
                    for w in range(workers):
                        for first, end in worker_blocks(blocks, w, workers):
                            self.assertLess(first, end)
                            seen.extend(range(first, end))
                    self.assertEqual(sorted(seen), list(range(start, 1000)), (start, kw, workers))
                if "block_bytes" in kw:  # every block but the last reaches block_bytes, and is the fewest that do
                    for first, end in blocks[:-1]:
                        self.assertGreaterEqual(begin[end] - begin[first], kw["block_bytes"])
                        self.assertLess(begin[end - 1] - begin[first], max(kw["block_bytes"], 1))
        with self.assertRaises(ValueError):
            plan_blocks(begin, 1001)
        with self.assertRaises(ValueError):
            worker_blocks([], 2, 2)

    def test_resolve_rank(self):
        with mock.patch.dict(os.environ, {}, clear=True):
            self.assertEqual(resolve_rank(), (0, 1))
            self.assertEqual(resolve_rank(3, 4), (3, 4))
            with self.assertRaises(ValueError):
                resolve_rank(4, 4)
            with self.assertRaises(ValueError):
                resolve_rank(rank=1)
        with mock.patch.dict(os.environ, {"RANK": "2", "WORLD_SIZE": "3"}, clear=True):
            self.assertEqual(resolve_rank(), (2, 3))
            self.assertEqual(resolve_rank(0, 1), (0, 1))  # explicit arguments win
        with mock.patch.dict(os.environ, {"RANK": "2"}, clear=True):
            with self.assertRaisesRegex(ValueError, "WORLD_SIZE"):
                resolve_rank()


class ImportTest(unittest.TestCase):
    def test_the_parsing_layer_does_not_import_torch(self):
        code = ("import sys, dlfs; list(dlfs.group_members(iter([])));"
                "sys.exit(1 if 'torch' in sys.modules else 0)")
        self.assertEqual(subprocess.run([sys.executable, "-c", code]).returncode, 0,
                         "import dlfs imported torch")


if __name__ == "__main__":
    unittest.main()
