"""TarViewDataset and BinViewDataset through PyTorch's DataLoader with
worker processes (skipped without torch)."""
import os
import pathlib
import tempfile
import unittest
import warnings
from unittest import mock

from dlfs.grouping import group_members
from viewfixture import make_view, sample_members

try:
    import torch
    import torch.utils.data
except ImportError:
    torch = None

W = 2


def as_list(batch):
    return batch


@unittest.skipIf(torch is None, "torch is not installed")
class TorchDatasetsTest(unittest.TestCase):
    def setUp(self):
        warnings.filterwarnings("ignore", message="This DataLoader will create")  # 3 workers on 2 cores: on purpose
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.root = tmp.name
        self.want = {}
        for epoch in (0, 1):
            for r in range(W):
                members = sample_members(50 + r, seed=10 * epoch + r, groups=True)
                make_view(self.root, epoch, W, r, members)
                self.want[epoch, r] = list(group_members(iter(members)))

    def test_dataloader_workers_read_the_planned_order_once(self):
        import dlfs
        for r in range(W):
            ds = dlfs.TarViewDataset(self.root, epoch=0, rank=r, world_size=W, block_samples=8)
            loader = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=2, collate_fn=as_list)
            got = [s for batch in loader for s in batch]
            self.assertEqual(got, self.want[0, r])  # blocks of one batch, dealt as DataLoader collects them
            ds.set_epoch(1)
            got = [s for batch in loader for s in batch]
            self.assertEqual(got, self.want[1, r])

    def test_byte_blocks_and_resume(self):
        import dlfs
        ds = dlfs.TarViewDataset(self.root, epoch=1, rank=1, world_size=W, block_bytes=4000, start=9,
                                 transform=lambda s: s[0])
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=3)
        keys = list(loader)
        self.assertEqual(sorted(keys), sorted(k for k, _ in self.want[1, 1][9:]))
        self.assertEqual(len(ds), len(self.want[1, 1]) - 9)

    def test_whole_batches_through_workers(self):
        import dlfs
        from test_batches import unpack
        ds = dlfs.TarViewDataset(self.root, epoch=0, rank=0, world_size=W, block_samples=6, batch_size=6)
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, collate_fn=as_list)
        batches = list(loader)
        self.assertTrue(all(isinstance(b, dlfs.ViewBatch) for b in batches))
        self.assertTrue(all(len(b.keys) <= 6 for b in batches))
        # blocks of one batch, taken in turn by the workers: the planned order
        self.assertEqual([s for b in batches for s in unpack(b)], self.want[0, 0])
        with self.assertRaisesRegex(TypeError, "no len"):
            len(ds)
        with self.assertRaisesRegex(ValueError, "batch_size must be at least 1"):
            dlfs.TarViewDataset(self.root, rank=0, world_size=W, batch_size=0)

    def test_rank_from_the_environment(self):
        import dlfs
        with mock.patch.dict(os.environ, {"RANK": "1", "WORLD_SIZE": "2"}):
            ds = dlfs.TarViewDataset(self.root)
        self.assertEqual((ds.rank, ds.world_size), (1, 2))
        self.assertEqual(list(ds), self.want[0, 1])

    def test_bin_view_dataset(self):
        import dlfs
        records = [os.urandom(32) for _ in range(20)]
        stem = make_view(self.root, 7, 1, 0, [(f"f/{i:08d}.bin", r) for i, r in enumerate(records)],
                         ids=[(i * 7) % 20 for i in range(20)])
        pathlib.Path(stem + ".bin").write_bytes(b"".join(records))
        ds = dlfs.BinViewDataset(self.root, epoch=7, rank=0, world_size=1)
        loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2, collate_fn=as_list)
        got = [item for batch in loader for item in batch]
        self.assertEqual(got, [((i * 7) % 20, records[i]) for i in range(20)])


if __name__ == "__main__":
    unittest.main()
