"""The client-socket path (dlfs/client.py, docs/client-protocol.md) against a
fake dlfsd (fake_client_server.py): exact bytes and order, the mount's
worker split, short batches, staging slots, names and grouped members,
fallback and ClientUnavailable, error replies, garbage, reconnect, fork,
SampleBatches."""
import os
import pickle
import tempfile
import time
import unittest
import warnings
from unittest import mock

import dlfs
from dlfs.client import Client, ClientError, ClientUnavailable, find_socket
from dlfs.samplebatches import SampleBatch, SampleBatches
from dlfs.view import BinView, TarView
from fake_client_server import FakeDataset, FakeServer, advertise, dataset_from_views, reply
from viewfixture import make_grouped_view, make_view, sample_members

try:
    import numpy
except ImportError:
    numpy = None
try:
    import torch
    import torch.utils.data
except ImportError:
    torch = None

W = 2


def as_list(batch):
    return batch


class Fixture(unittest.TestCase):
    """Views of W ranks (ids r * 1000 + position) and the world-size-1 view
    holding them all (every dataset has epochs/0/1/0, where the attributes are)."""
    GROUPS = True  # every other sample has a .cls member next to its .jpg (two positions, one sample)
    SERVER = {}

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.root = tmp.name
        self.members = {}
        for r in range(W):
            self.members[r] = sample_members(60 + 7 * r, seed=r, groups=self.GROUPS)
            make_view(self.root, 0, W, r, self.members[r], ids=[1000 * r + i for i in range(len(self.members[r]))])
        make_view(self.root, 0, 1, 0, self.members[0] + self.members[1],
                  ids=list(range(len(self.members[0]))) + [1000 + i for i in range(len(self.members[1]))])
        self.dataset = dataset_from_views(self.root, [(0, W, 0), (0, W, 1), (0, 1, 0)])
        self.server = self.serve()

    def serve(self, **kw):
        server = FakeServer(self.root, self.dataset, root=self.root, **{**self.SERVER, **kw}).start()
        self.addCleanup(server.stop)
        return server


class ProtocolTest(Fixture):
    SERVER = {"slot_bytes": 4096}

    def test_records_bytes_and_names_in_view_order(self):
        client = Client(self.root)
        view = client.view(0, W, 1)
        self.assertEqual(len(view), len(self.members[1]))
        self.assertEqual((client.dataset, client.format, client.grouped, client.slots), ("t", "files", False, 3))
        got, regions = [], set()
        for r in view.locate(0, len(view), names=True):
            self.assertEqual(r.ids, list(range(1000 + r.start, 1000 + r.start + r.count)))
            self.assertEqual(r.members, [1] * r.count)
            self.assertEqual(r.copies(), [bytes(m) for m in r.memoryviews()])
            regions.update(r.regions)
            got.extend(zip(r.names, r.copies()))
        self.assertEqual(got, self.members[1])
        self.assertEqual(regions, {0, 1})  # some samples resident, some staged

    def test_memoryviews_are_read_only(self):
        view = Client(self.root).view(0, W, 0)
        r = view.batch(0, 20)
        self.assertIn(1, r.regions)
        self.assertIn(0, r.regions)
        for mv in r.memoryviews():
            self.assertTrue(mv.readonly)
            with self.assertRaises(TypeError):
                mv[0] = 1

    def test_short_batches_are_asked_again(self):
        server = self.serve(max_count=7, slot_bytes=2048)
        view = Client(socket_path=server.path, dataset="t").view(0, W, 0)
        replies, got = [], []
        for r in view.locate(3, len(view), names=True):
            replies.append(r)
            got.extend(zip(r.names, r.copies()))  # before the slot is reused
        self.assertTrue(all(1 <= r.count <= 7 for r in replies))
        self.assertTrue(any(r.count < 7 and r.start + r.count < len(view) for r in replies))  # a slot filled up
        self.assertEqual(got, self.members[0][3:])
        self.assertEqual([q["slot"] for q in server.requests if q["op"] == "batch"][:4], [0, 1, 2, 0])

    def test_a_staged_sample_stays_valid_for_slots_minus_one_batches(self):
        view = Client(self.root).view(0, W, 0)
        first = view.batch(0, 10)
        k = first.regions.index(1)
        kept, want = first.memoryviews()[k], self.members[0][k][1]
        for start in range(10, 10 + 10 * (view.client.slots - 1), 10):  # slots - 1 more batches
            view.batch(start, 10)
        self.assertEqual(kept, want)
        self.assertEqual(view.client.next_slot(), first.slot)

    def test_find_socket(self):
        self.assertEqual(find_socket(self.root), (self.server.path, "t"))
        with mock.patch.dict(os.environ, {"DLFS_CLIENT_SOCKET": "/elsewhere.sock"}):
            self.assertEqual(find_socket(self.root), ("/elsewhere.sock", "t"))
        self.assertIsNone(find_socket(os.path.join(self.root, "nothing")))
        with tempfile.TemporaryDirectory() as other:
            make_view(other, 0, 1, 0, [("a.bin", b"x")])
            self.assertIsNone(find_socket(other))  # ENODATA: no client socket
            with self.assertRaisesRegex(ClientUnavailable, "no DLFS client socket"):
                Client(other)

    def test_error_replies_carry_the_daemons_code_and_sentence(self):
        view = Client(self.root).view(0, W, 0)
        self.server.fail.append(("EIO", "dataset t: the backend read failed"))
        with self.assertRaises(ClientError) as e:
            view.batch(0, 5)
        self.assertEqual((e.exception.code, str(e.exception)), ("EIO", "dataset t: the backend read failed"))
        with self.assertRaisesRegex(ClientError, "no view epoch 9") as e:
            view.client.view(9, 1, 0)
        self.assertEqual(e.exception.code, "ENOENT")
        with self.assertRaisesRegex(ClientError, "no dataset 'other'"):
            Client(socket_path=self.server.path, dataset="other")
        with self.assertRaisesRegex(ValueError, "count 5000"):
            view.batch(0, 5000)
        self.assertEqual(view.batch(0, 5).count, 5)  # the connection stays usable

    def test_garbage_replies_are_errors_naming_the_socket(self):
        view = Client(self.root).view(0, W, 0)
        packets = [b"\x01", (100).to_bytes(4, "little") + b"{}", (5).to_bytes(4, "little") + b"{nope",
                   (2).to_bytes(4, "little") + b"[]", reply({"ok": True, "start": 0, "count": 3}),
                   reply({"ok": True, "start": 0, "count": 1}, b"\0" * 23),
                   reply({"ok": True, "start": 0, "count": 1}, (10 ** 9).to_bytes(8, "little") + bytes(16)),
                   reply({"ok": True, "start": 7, "count": 1}, bytes(24))]
        for packet in packets:
            self.server.garbage.append(packet)
            with self.assertRaises(ClientError) as e:
                view.batch(0, 2)
            self.assertEqual(e.exception.code, "EPROTO", packet)
            self.assertIn(self.server.path, str(e.exception))
        view.client._buffer = bytearray(64)  # a reply larger than the buffer: MSG_TRUNC
        with self.assertRaisesRegex(ClientError, "larger than the 64-byte buffer"):
            view.batch(0, 2, names=True)

    def test_reconnect_after_a_restart_keeps_old_memoryviews(self):
        client = Client(self.root)
        view = client.view(0, W, 0)
        before = view.batch(0, 30)
        old = before.memoryviews()
        first_path = self.server.path
        self.server.restart()
        self.assertNotEqual(self.server.path, first_path)  # found again through the attribute
        after = view.batch(before.count, 10)
        self.assertEqual(after.copies(), [d for _, d in self.members[0][before.count:before.count + after.count]])
        self.assertEqual(client.reconnects, 1)
        self.assertEqual(client.socket_path, self.server.path)
        self.assertEqual([bytes(m) for m in old], [d for _, d in self.members[0][:before.count]])

    def test_reconnect_while_a_request_waits(self):
        self.server.restart_at_batch = (4, 0.3)  # the daemon restarts with a request outstanding, back 0.3 s later
        view = TarView(self.root, 0, 1, W, zero_copy=True, block_samples=5)
        mount = TarView(self.root, 0, 1, W, zero_copy=False, block_samples=5)
        self.assertEqual(list(view.samples()), list(mount.samples()))
        self.assertEqual(view._client[1].client.reconnects, 1)

    def test_a_daemon_gone_for_good_is_an_error_saying_so(self):
        client = Client(self.root, reconnect_timeout=0.3)
        view = client.view(0, W, 0)
        self.server.stop()
        t = time.monotonic()
        with self.assertRaisesRegex(ClientError, r"dlfsd went away at \d\d:\d\d:\d\d .*reconnect_timeout=0.3") as e:
            view.batch(0, 5)
        self.assertGreaterEqual(time.monotonic() - t, 0.3)
        self.assertEqual(e.exception.code, "ECONNRESET")

    def test_a_client_does_not_cross_fork_or_pickle(self):
        client = Client(self.root)
        view = client.view(0, W, 0)
        with mock.patch("os.getpid", return_value=os.getpid() + 1):
            with self.assertRaisesRegex(ClientError, "does not cross fork"):
                view.batch(0, 1)
        with self.assertRaisesRegex(TypeError, "cannot be pickled"):
            pickle.dumps(client)
        tv = TarView(self.root, 0, 0, W, zero_copy=True)
        want = list(tv.samples())
        first = tv._client[1].client
        with mock.patch("os.getpid", return_value=os.getpid() + 1):  # a forked worker opens its own
            self.assertEqual(list(tv.samples()), want)
            self.assertIsNot(tv._client[1].client, first)
        again = pickle.loads(pickle.dumps(tv))  # a spawned worker too
        self.assertIsNone(again._client)
        self.assertEqual(list(again.samples()), want)


class TarViewZeroCopyTest(Fixture):
    SERVER = {"slot_bytes": 3000, "max_count": 13}

    def test_same_samples_order_and_worker_split_as_the_mount(self):
        for kw in ({}, {"block_samples": 4}, {"block_bytes": 1}, {"block_bytes": 5000}, {"start": 11}):
            for workers in (1, 2, 3):
                for r in range(W):
                    zc = TarView(self.root, 0, r, W, zero_copy=True, **kw)
                    mount = TarView(self.root, 0, r, W, zero_copy=False, **kw)
                    self.assertIsNotNone(zc.client_socket)
                    self.assertEqual(len(zc), len(mount))
                    for w in range(workers):
                        got = list(zc.samples(w, workers))
                        self.assertEqual(got, list(mount.samples(w, workers)), (kw, workers, r, w))
                        self.assertTrue(all(type(d) is bytes for _, g in got for d in g.values()))
                        self.assertEqual(list(zc.batches(5, w, workers)), list(mount.batches(5, w, workers)))

    def test_auto_reads_the_socket_when_there_is_one(self):
        view = TarView(self.root, 0, 0, W)
        self.assertEqual(view.client_socket, (self.server.path, "t"))
        list(view.samples())
        self.assertIn("batch", [q["op"] for q in self.server.requests])

    def test_without_a_socket_auto_reads_the_mount_and_true_refuses(self):
        for name in ("user.dlfs.client_socket", "user.dlfs.dataset"):
            os.removexattr(os.path.join(self.root, "epochs/0/1/0.index"), name)
        view = TarView(self.root, 0, 0, W)
        self.assertIsNone(view.client_socket)
        self.assertEqual(list(view.samples()), list(TarView(self.root, 0, 0, W, zero_copy=False).samples()))
        with self.assertRaisesRegex(ClientUnavailable, "zero_copy=True, but there is no DLFS client socket"):
            TarView(self.root, 0, 0, W, zero_copy=True)
        with self.assertRaisesRegex(ValueError, "zero_copy must be"):
            TarView(self.root, 0, 0, W, zero_copy="yes")

    def test_a_socket_that_does_not_answer_means_the_mount_for_auto(self):
        self.server.stop()  # the attribute still names the socket, nobody listens
        view = TarView(self.root, 0, 0, W)
        self.assertEqual(list(view.samples()), list(TarView(self.root, 0, 0, W, zero_copy=False).samples()))
        self.assertIsNone(view.client_socket)
        with self.assertRaisesRegex(ClientUnavailable, "cannot connect"):
            list(TarView(self.root, 0, 0, W, zero_copy=True).samples())

    def test_opportunistic_views_read_the_mount(self):
        make_view(self.root, 1, 1, 0, self.members[0], order="opportunistic")
        view = TarView(self.root, 1, 0, 1)
        self.assertIsNone(view.client_socket)
        self.assertEqual(len(list(view.samples())), len(TarView(self.root, 0, 0, W, zero_copy=False)))
        with self.assertRaisesRegex(ClientUnavailable, "opportunistic"):
            TarView(self.root, 1, 0, 1, zero_copy=True)

    def test_a_view_that_disagrees_with_the_index_is_refused(self):
        n = len(self.dataset.views[0, W, 0])
        self.dataset.views[0, W, 0] = self.dataset.views[0, W, 0][::-1]
        with self.assertRaisesRegex(ClientError, f"position 0 of view epoch 0, rank 0 of 2 is sample {n - 1}, "
                                                 r".*0\.index has 0"):
            list(TarView(self.root, 0, 0, W, zero_copy=True).samples())
        self.dataset.views[0, W, 0] = self.dataset.views[0, W, 0][1:]
        with self.assertRaisesRegex(ClientError, f"holds {n - 1} samples, .*0.index lists {n}"):
            list(TarView(self.root, 0, 0, W, zero_copy=True).samples())


class GroupedZeroCopyTest(unittest.TestCase):
    """A dataset grouped by dlfsd (group_by): a sample's bytes are its
    members' back to back, its names and member lengths in the reply."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.root = tmp.name
        groups = []
        for i in range(40):
            key = f"n{i % 3}/s{i:03d}" + ("x" * 150 if i == 7 else "")
            ms = [(key + ".jpg", bytes([i]) * (300 + i * 37))]
            if i % 3:
                ms.append((key + ".cls", str(i).encode()))
            if i == 11:
                ms.append((key + ".seg.png", b""))
            groups.append((key, ms))
        make_grouped_view(self.root, 0, 1, 0, groups)
        self.dataset = dataset_from_views(self.root, [(0, 1, 0)])
        self.server = FakeServer(self.root, self.dataset, root=self.root, slot_bytes=4096, max_count=6).start()
        self.addCleanup(self.server.stop)

    def test_groups_as_the_mount_reads_them(self):
        for workers in (1, 2, 3):
            for kw in ({}, {"block_samples": 4}, {"start": 6}):
                zc, mount = TarView(self.root, 0, 0, 1, zero_copy=True, **kw), TarView(self.root, 0, 0, 1,
                                                                                       zero_copy=False, **kw)
                for w in range(workers):
                    self.assertEqual(list(zc.samples(w, workers)), list(mount.samples(w, workers)))
                    self.assertEqual(list(zc.batches(3, w, workers)), list(mount.batches(3, w, workers)))

    def test_sample_batches_carry_members(self):
        got = list(SampleBatches(self.root, 0, 0, 1, batch_size=16, names=True))
        self.assertEqual([len(b) for b in got], [16, 16, 8])
        b = got[0]
        self.assertEqual(b.names[1], ["n1/s001.jpg", "n1/s001.cls"])
        self.assertEqual(b.members[:3], [1, 2, 2])
        self.assertEqual(b.member_lengths[:5], [300, 337, 1, 374, 1])
        self.assertEqual(b.member_offsets[:5], [0, 0, 337 + 175 + 512, 0, 374 + 138 + 512])  # padding, header
        self.assertEqual([bytes(m) for m in b.member(1)], [bytes([1]) * 337, b"1"])
        self.assertEqual(len(b.samples[1]), 337 + 175 + 512 + 1)
        c = pickle.loads(pickle.dumps(b))
        self.assertEqual([bytes(m) for m in c.member(2)], [bytes(m) for m in b.member(2)])
        self.assertEqual(b.keys[:2], ["n0/s000", "n1/s001"])


class BinViewZeroCopyTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.root = tmp.name
        self.records = [bytes([i % 251]) * 16 + i.to_bytes(4, "little") for i in range(300)]
        stem = make_view(self.root, 0, 1, 0, [(f"f/{i:08d}.bin", r) for i, r in enumerate(self.records)],
                         ids=[(i * 7) % 300 for i in range(300)])
        with open(stem + ".bin", "wb") as f:
            f.write(b"".join(self.records))
        self.dataset = dataset_from_views(self.root, [(0, 1, 0)], fixed_size=20, fmt="fixed")
        self.server = FakeServer(self.root, self.dataset, root=self.root, slot_bytes=400).start()
        self.addCleanup(self.server.stop)

    def test_records_by_position(self):
        view = BinView(self.root, 0, 0, 1, zero_copy=True, block=64)
        self.assertIsNotNone(view.client_socket)
        order = list(range(300)) + [299, 0, 150, 151, 17, 230, -1]
        self.assertEqual([view.record(k) for k in order], [self.records[k] for k in order])
        self.assertTrue(all(type(view.record(k)) is bytes for k in (0, 1, 2)))
        self.assertEqual(view.sample_id(4), 28)
        with self.assertRaisesRegex(IndexError, "position 300"):
            view.record(300)
        again = pickle.loads(pickle.dumps(view))
        self.assertEqual(again.record(5), self.records[5])

    def test_auto_without_a_socket_reads_the_mount(self):
        self.server.stop()
        view = BinView(self.root, 0, 0, 1)
        self.assertEqual(view.record(3), self.records[3])
        self.assertIsNone(view.client_socket)


class SampleBatchesTest(Fixture):
    GROUPS = False
    SERVER = {"slot_bytes": 4096, "slots": 2}

    def test_same_batches_as_tarview(self):
        for kw in ({}, {"block_samples": 5}, {"block_bytes": 1}, {"start": 9}):
            for workers in (1, 3):
                for w in range(workers):
                    mount = TarView(self.root, 0, 1, W, zero_copy=False, **kw)
                    batches = SampleBatches(self.root, 0, 1, W, batch_size=8, worker=w, num_workers=workers, **kw)
                    want = list(mount.batches(8, w, workers))
                    self.assertEqual(len(batches), len(want))
                    for b, v in zip(batches, want):  # each batch used before the next is fetched (its slot reused)
                        self.assertEqual(b.keys, v.keys)
                        data, lengths = v.fields["jpg"]
                        self.assertEqual(b"".join(b.samples), data)
                        self.assertEqual(b.lengths, lengths)
                        self.assertTrue(all(isinstance(s, memoryview) and s.readonly for s in b.samples))

    def test_batches_longer_than_the_slots_stay_whole(self):
        # 2 slots of 4 KiB, 700-byte samples a third of them staged: a batch of 60 takes several requests
        names, samples, ids, count = [], [], [], 0
        for b in SampleBatches(self.root, 0, 0, W, batch_size=60, names=True):
            names += b.names
            samples += [bytes(s) for s in b.samples]  # copied before the next batch reuses the slots
            ids += b.ids
            count += 1
        self.assertEqual(names, [n for n, _ in self.members[0]])
        self.assertEqual(samples, [d for _, d in self.members[0]])
        self.assertEqual(ids, list(range(len(self.members[0]))))
        self.assertGreater(sum(q["op"] == "batch" for q in self.server.requests), 2 * count)

    @unittest.skipIf(numpy is None, "numpy is not installed")
    def test_packed_and_numpy(self):
        b = next(iter(SampleBatches(self.root, 0, 0, W, batch_size=10)))
        data, lengths = b.packed()
        self.assertEqual((data.dtype, lengths.dtype), (numpy.uint8, numpy.int64))
        self.assertEqual(data.tobytes(), b"".join(d for _, d in self.members[0][:10]))
        self.assertEqual(lengths.tolist(), [len(d) for _, d in self.members[0][:10]])
        self.assertTrue(data.flags.writeable)
        with self.assertRaisesRegex(ValueError, "one size"):
            b.numpy()
        fixed = SampleBatch([1, 2], ["a", "b"], [memoryview(b"abc"), memoryview(b"def")], [3, 3])
        self.assertEqual(fixed.numpy().tolist(), [[97, 98, 99], [100, 101, 102]])

    def test_a_batch_pickles_packed(self):
        b = next(iter(SampleBatches(self.root, 0, 0, W, batch_size=10, names=True)))
        c = pickle.loads(pickle.dumps(b))
        self.assertEqual(([bytes(s) for s in c.samples], c.keys, c.ids, c.names, c.lengths),
                         ([bytes(s) for s in b.samples], b.keys, b.ids, b.names, b.lengths))

    def test_without_a_socket(self):
        os.removexattr(os.path.join(self.root, "epochs/0/1/0.index"), "user.dlfs.client_socket")
        with self.assertRaisesRegex(ClientUnavailable, "read the views through dlfs.TarView instead"):
            SampleBatches(self.root, 0, 0, W)
        self.assertEqual(dlfs.SampleBatches, SampleBatches)


@unittest.skipIf(torch is None, "torch is not installed")
class TorchZeroCopyTest(Fixture):
    SERVER = {"slot_bytes": 4096}

    def setUp(self):
        super().setUp()
        warnings.filterwarnings("ignore", message="This DataLoader will create")

    def test_workers_open_their_own_connections(self):
        ds = dlfs.TarViewDataset(self.root, epoch=0, rank=1, world_size=W, block_samples=8, zero_copy=True)
        self.assertEqual(len(ds), len(TarView(self.root, 0, 1, W, zero_copy=False)))  # the parent's view, opened
        loader = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=2, collate_fn=as_list)
        want = list(TarView(self.root, 0, 1, W, zero_copy=False).samples())
        self.assertEqual([s for batch in loader for s in batch], want)
        self.assertGreaterEqual(sum(q["op"] == "open" for q in self.server.requests), 2)

    def test_sample_batch_dataset(self):
        ds = dlfs.SampleBatchDataset(self.root, epoch=0, rank=0, world_size=W, batch_size=8, block_samples=8)
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
        batches = list(loader)  # pickled across (packed)
        self.assertEqual([bytes(s) for b in batches for s in b.samples], [d for _, d in self.members[0]])
        ds = dlfs.SampleBatchDataset(self.root, epoch=0, rank=0, world_size=W, batch_size=8, block_samples=8,
                                     transform=lambda b: b.packed())
        got = list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2))
        self.assertEqual(b"".join(d.numpy().tobytes() for d, _ in got), b"".join(d for _, d in self.members[0]))
        os.removexattr(os.path.join(self.root, "epochs/0/1/0.index"), "user.dlfs.client_socket")
        with self.assertRaisesRegex(ClientUnavailable, "dlfs.TarView"):
            dlfs.SampleBatchDataset(self.root, rank=0, world_size=W)


if __name__ == "__main__":
    unittest.main()
