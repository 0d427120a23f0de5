"""TarView and BinView over views laid out as dlfsd lays them out: every
sample exactly once across ranks x workers, resume, damage."""
import os
import pathlib
import tempfile
import unittest

from dlfs.grouping import group_members
from dlfs.index import ViewIndex, ViewIndexError
from dlfs.tarstream import TarFormatError
from dlfs.view import BinView, TarView
from viewfixture import make_grouped_view, make_view, sample_members

W = 2


class TarViewTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.root = tmp.name
        self.ranks = [sample_members(60 + r, seed=r, groups=True) for r in range(W)]
        for r, members in enumerate(self.ranks):
            make_view(self.root, 0, W, r, members)
        self.want = [list(group_members(iter(m))) for m in self.ranks]

    def test_every_sample_once_across_ranks_and_workers(self):
        for workers in (1, 2, 3):
            for kw in ({"block_samples": 4}, {"block_bytes": 1}, {"block_bytes": 5000}, {}):
                got = []
                for r in range(W):
                    view = TarView(self.root, 0, r, W, **kw)
                    self.assertEqual(len(view), len(self.want[r]))
                    for w in range(workers):
                        got.extend((r, key, tuple(sorted(g.items()))) for key, g in view.samples(w, workers))
                want = [(r, key, tuple(sorted(g.items()))) for r in range(W) for key, g in self.want[r]]
                self.assertEqual(sorted(got), sorted(want), (workers, kw))
                self.assertEqual(len(got), len(set(got)))

    def test_one_worker_reads_the_planned_order(self):
        self.assertEqual(list(TarView(self.root, 0, 1, W).samples()), self.want[1])

    def test_block_samples_deals_blocks_round_robin(self):
        view = TarView(self.root, 0, 0, W, block_samples=5)
        shares = [list(view.samples(w, 3)) for w in range(3)]
        merged = []
        for b in range(0, len(self.want[0]), 5):  # block b // 5 belongs to worker (b // 5) % 3
            share = shares[(b // 5) % 3]
            merged.extend(share[:5])
            del share[:5]
        self.assertEqual(merged, self.want[0])

    def test_resume_mid_epoch(self):
        for start in (0, 1, 17, len(self.want[0]) - 1, len(self.want[0])):
            for workers in (1, 2):
                view = TarView(self.root, 0, 0, W, start=start, block_bytes=3000)
                got = [s for w in range(workers) for s in view.samples(w, workers)]
                self.assertEqual(sorted(k for k, _ in got), sorted(k for k, _ in self.want[0][start:]))
                self.assertEqual(len(view), len(self.want[0]) - start)
        with self.assertRaisesRegex(ValueError, "start"):
            TarView(self.root, 0, 0, W, start=len(self.want[0]) + 1)

    def test_index_that_disagrees_with_the_stream_is_refused(self):
        idx = pathlib.Path(self.root, "epochs/0/2/0.index")
        lines = idx.read_text().split("\n")
        k, sid, off, length, name = lines[5].split("\t")
        lines[5] = "\t".join([k, sid, off, length, name.replace("s0_", "zz_")])
        idx.write_text("\n".join(lines))
        with self.assertRaisesRegex(TarFormatError, "where the index has position 4"):
            list(TarView(self.root, 0, 0, W).samples())

    def test_bad_index_is_refused_clearly(self):
        idx = pathlib.Path(self.root, "epochs/0/2/1.index")
        idx.write_text(idx.read_text().replace("\t", " ", 1))
        with self.assertRaisesRegex(ValueError, r"1\.index: line 2: want position"):
            TarView(self.root, 0, 1, W)
        with self.assertRaises(FileNotFoundError):
            TarView(self.root, 5, 0, W)

    def test_truncated_view_is_refused(self):
        tar = os.path.join(self.root, "epochs/0/2/0.tar")
        os.truncate(tar, os.path.getsize(tar) // 2)
        with self.assertRaisesRegex(TarFormatError, "truncated"):
            for w in range(2):
                list(TarView(self.root, 0, 0, W, block_bytes=1000).samples(w, 2))

    def test_opportunistic_view_is_read_whole(self):
        make_view(self.root, 1, 1, 0, self.ranks[0], order="opportunistic")
        view = TarView(self.root, 1, 0, 1)
        self.assertEqual(list(view.samples()), self.want[0])
        with self.assertRaisesRegex(ValueError, "opportunistic"):
            list(view.samples(0, 2))


class ViewIndexTest(unittest.TestCase):
    HEAD = "# dlfs view dataset=t epoch=0 world_size=1 rank=0 samples=3 order=ordered\n"

    def parse(self, body):
        with tempfile.TemporaryDirectory() as d:
            p = pathlib.Path(d, "0.index")
            p.write_text(self.HEAD + body)
            return ViewIndex(str(p))

    def test_columns_and_member_bounds(self):
        idx = self.parse("0\t7\t512\t10\ta.bin\n1\t3\t1536\t512\tb\tc.bin\n2\t0\t2560\t0\td.bin\n")
        self.assertEqual(idx.ids, [7, 3, 0])
        self.assertEqual(idx.names, ["a.bin", "b\tc.bin", "d.bin"])  # a tab in a name is the name's
        self.assertEqual([idx.member_begin(k) for k in range(3)], [0, 1024, 2048])
        self.assertEqual(idx.member_end(2), 2560)

    def test_damage_names_the_line(self):
        with self.assertRaisesRegex(ViewIndexError, "line 3: want position"):
            self.parse("0\t7\t512\t10\ta.bin\n1\t3\tx\t512\tb.bin\n2\t0\t2560\t0\td.bin\n")
        with self.assertRaisesRegex(ViewIndexError, "line 4: position 5, want 2"):
            self.parse("0\t7\t512\t10\ta.bin\n1\t3\t1536\t512\tb.bin\n5\t0\t2560\t0\td.bin\n")
        with self.assertRaisesRegex(ViewIndexError, "samples=3, the file lists 2"):
            self.parse("0\t7\t512\t10\ta.bin\n1\t3\t1536\t512\tb.bin")
        with self.assertRaisesRegex(ViewIndexError, "line 3: want position"):
            self.parse("0\t7\t512\t10\ta.bin\n1\t3\t1536\n2\t0\t2560\t0\td.bin\n")


class BinViewTest(unittest.TestCase):
    def test_records_by_position(self):
        with tempfile.TemporaryDirectory() as root:
            records = [bytes([i]) * 16 for i in range(10)]
            stem = make_view(root, 3, 1, 0, [(f"f/{i:08d}.bin", r) for i, r in enumerate(records)],
                             ids=list(range(100, 110)))
            pathlib.Path(stem + ".bin").write_bytes(b"".join(records))
            view = BinView(root, 3, 0, 1)
            self.assertEqual(len(view), 10)
            self.assertEqual(view.record_size, 16)
            self.assertEqual([view.record(k) for k in range(10)], records)
            self.assertEqual(view.sample_id(4), 104)
            with self.assertRaisesRegex(IndexError, "position 10"):
                view.record(10)
            pathlib.Path(stem + ".bin").write_bytes(b"".join(records) + b"x")
            with self.assertRaisesRegex(ValueError, "not 10 records"):
                BinView(root, 3, 0, 1)



class GroupedViewTest(unittest.TestCase):
    """A dataset grouped by dlfsd (group_by): the .index lists groups and their
    tar spans; two adjacent groups may share a key, names may need escapes."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.root = tmp.name
        self.groups = []
        for i in range(40):
            key = f"n{i % 3}/s{i:03d}" + ("x" * 150 if i == 7 else "")
            ms = [(key + ".jpg", bytes([i]) * (300 + i * 37))]
            if i % 3:
                ms.append((key + ".cls", str(i).encode()))
            if i == 11:
                ms.append((key + ".seg.png", b""))
            self.groups.append((key, ms))
        self.groups.insert(5, ("n2/s004", [("n2/s004.txt", b"same key as the group before, apart")]))
        self.groups.append(("odd\tname\\with\nbreaks", [("odd\tname\\with\nbreaks.bin", b"escaped in .index")]))
        make_grouped_view(self.root, 0, 1, 0, self.groups)
        self.want = [(k, dict((n[len(k) + 1:], d) for n, d in ms)) for k, ms in self.groups]

    def test_groups_come_whole_in_order(self):
        view = TarView(self.root, 0, 0, 1)
        self.assertEqual(len(view), len(self.groups))
        self.assertEqual(list(view.samples()), self.want)

    def test_workers_and_resume_keep_groups_whole(self):
        for workers in (2, 3):
            for start in (0, 6, 39):
                view = TarView(self.root, 0, 0, 1, start=start, block_samples=4)
                got = [s for w in range(workers) for s in view.samples(w, workers)]
                self.assertEqual(sorted(got, key=lambda x: (x[0], sorted(x[1]))),
                                 sorted(self.want[start:], key=lambda x: (x[0], sorted(x[1]))))

    def test_the_index_unescapes_names(self):
        index = ViewIndex(os.path.join(self.root, "epochs", "0", "1", "0.index"))
        self.assertTrue(index.grouped)
        self.assertEqual(index.names[-1], "odd\tname\\with\nbreaks")

if __name__ == "__main__":
    unittest.main()
