"""TarView.batches: the same samples as samples(), in the same order, packed
per extension; runs cut at batch boundaries; damage refused, never wrong bytes."""
import os
import pathlib
import tempfile
import unittest

from dlfs.batches import ABSENT, ViewBatch, batch_runs
from dlfs.grouping import group_members
from dlfs.tarstream import TarFormatError
from dlfs.view import TarView
from viewfixture import make_grouped_view, make_view, sample_members

W = 2


def unpack(batch):
    """[(key, {ext: bytes})] back from a ViewBatch."""
    self_check = {ext: sum(n for n in lengths if n != ABSENT) == len(data)
                  for ext, (data, lengths) in batch.fields.items()}
    assert all(self_check.values()), self_check
    out = [(key, {}) for key in batch.keys]
    for ext, (data, lengths) in batch.fields.items():
        assert len(lengths) == len(batch.keys)
        at = 0
        for i, n in enumerate(lengths):
            if n != ABSENT:
                out[i][1][ext] = bytes(data[at:at + n])
                at += n
    return out


class BatchRunsTest(unittest.TestCase):
    def test_runs_cut_at_batch_size_across_ranges(self):
        got = list(batch_runs([(0, 5), (10, 13), (20, 21)], 4))
        self.assertEqual(got, [[(0, 4)], [(4, 5), (10, 13)], [(20, 21)]])
        self.assertEqual(list(batch_runs([], 3)), [])
        self.assertEqual(list(batch_runs([(3, 9)], 2)), [[(3, 5)], [(5, 7)], [(7, 9)]])
        with self.assertRaisesRegex(ValueError, "batch_size must be at least 1, got 0"):
            list(batch_runs([(0, 1)], 0))


class TarViewBatchesTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.root = tmp.name
        # every other sample has a .cls besides its .jpg; some names need GNU long-name records
        self.members = [sample_members(61 + r, seed=r, groups=True) for r in range(W)]
        for r, members in enumerate(self.members):
            make_view(self.root, 0, W, r, members)

    def test_batches_hold_the_samples_of_samples_in_order(self):
        for workers in (1, 2, 3):
            for batch_size in (1, 7, 16, 1000):
                for kw in ({"block_samples": 5}, {"block_bytes": 3000}, {}):
                    for r in range(W):
                        view = TarView(self.root, 0, r, W, **kw)
                        for w in range(workers):
                            want = list(view.samples(w, workers))
                            batches = list(view.batches(batch_size, w, workers))
                            self.assertTrue(all(isinstance(b, ViewBatch) for b in batches))
                            got = [s for b in batches for s in unpack(b)]
                            self.assertEqual(got, want, (workers, batch_size, kw, r, w))
                            sizes = [len(b.keys) for b in batches]
                            self.assertTrue(all(n == batch_size for n in sizes[:-1]), sizes)
                            if sizes:
                                self.assertTrue(1 <= sizes[-1] <= batch_size)

    def test_a_sample_without_an_extension_has_length_absent(self):
        batch = next(TarView(self.root, 0, 0, W).batches(4))
        self.assertEqual(sorted(batch.fields), ["cls", "jpg"])
        self.assertEqual([n == ABSENT for n in batch.fields["cls"][1]], [True, False, True, False])
        self.assertNotIn(ABSENT, batch.fields["jpg"][1])

    def test_grouped_and_opportunistic_views_batch_through_the_stream(self):
        groups = [(k, [(k + "." + e, d) for e, d in g.items()]) for k, g in group_members(iter(self.members[0]))]
        make_grouped_view(self.root, 1, 1, 0, groups)
        view = TarView(self.root, 1, 0, 1)
        self.assertEqual([s for b in view.batches(5) for s in unpack(b)], list(view.samples()))
        make_view(self.root, 2, 1, 0, self.members[1], order="opportunistic")
        view = TarView(self.root, 2, 0, 1)
        self.assertEqual([s for b in view.batches(9) for s in unpack(b)], list(view.samples()))

    def test_an_index_offset_that_misses_the_member_is_refused(self):
        idx = pathlib.Path(self.root, "epochs/0/2/0.index")
        lines = idx.read_text().split("\n")
        k, sid, off, length, name = lines[6].split("\t")
        lines[6] = "\t".join([k, sid, str(int(off) + 512), length, name])
        idx.write_text("\n".join(lines))
        with self.assertRaisesRegex(TarFormatError, r"0\.tar.*position 5 .*no matching tar header"):
            list(TarView(self.root, 0, 0, W).batches(8))

    def test_an_index_length_that_disagrees_is_refused(self):
        idx = pathlib.Path(self.root, "epochs/0/2/1.index")
        lines = idx.read_text().split("\n")
        k, sid, off, length, name = lines[3].split("\t")
        lines[3] = "\t".join([k, sid, off, str(int(length) - 1), name])
        idx.write_text("\n".join(lines))
        with self.assertRaisesRegex(TarFormatError, "position 2 .*no matching tar header"):
            list(TarView(self.root, 0, 1, W).batches(8))

    def test_an_index_name_that_disagrees_is_refused(self):
        idx = pathlib.Path(self.root, "epochs/0/2/0.index")
        lines = idx.read_text().split("\n")
        k, sid, off, length, name = lines[3].split("\t")
        lines[3] = "\t".join([k, sid, off, length, name.replace("s0_", "zz_")])
        idx.write_text("\n".join(lines))
        with self.assertRaisesRegex(TarFormatError, "position 2 .*no matching tar header"):
            list(TarView(self.root, 0, 0, W).batches(8))

    def test_truncated_view_is_refused(self):
        tar = os.path.join(self.root, "epochs/0/2/0.tar")
        os.truncate(tar, os.path.getsize(tar) // 2)
        with self.assertRaisesRegex(TarFormatError, "truncated"):
            list(TarView(self.root, 0, 0, W).batches(8))

    def test_bad_batch_size_is_refused(self):
        with self.assertRaisesRegex(ValueError, "batch_size must be at least 1, got 0"):
            next(TarView(self.root, 0, 0, W).batches(0))


if __name__ == "__main__":
    unittest.main()
