"""tools/bench/benchlib/shuffle_quality.py, the one set of measures
loaders_bench.py applies to every loader's delivered order: a uniform
permutation scores as uniform, the storage order and the orders of shard- and
buffer-based shuffles are told apart from it, repeats and bad ids are counted
or refused. Skips without numpy."""
import os
import random
import sys
import unittest

try:
    import numpy
except ImportError:  # python3-numpy comes with python3-torch (tools/install-deps.sh)
    numpy = None

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench"))
if numpy is not None:
    from benchlib import shuffle_quality as sq  # noqa: E402

N, S = 20000, 100


def buffer_shuffle(order, size, seed):
    """A streaming shuffle buffer of `size` (WebDataset's, DALI's readers')."""
    rng = random.Random(seed)
    buf, out = [], []
    for x in order:
        buf.append(x)
        if len(buf) >= size:
            out.append(buf.pop(rng.randrange(len(buf))))
    while buf:
        out.append(buf.pop(rng.randrange(len(buf))))
    return numpy.array(out)


@unittest.skipIf(numpy is None, "needs numpy (python3-numpy)")
class ShuffleQualityTest(unittest.TestCase):
    def test_uniform_permutation_scores_uniform(self):
        rng = numpy.random.default_rng(7)
        for trial in range(5):
            order = rng.permutation(N)
            prev = rng.permutation(N)
            q = sq.measure(order, N, S, previous=prev)
            self.assertAlmostEqual(q["shard_adjacency"], 1.0, delta=0.25, msg=q)
            self.assertLess(abs(q["rho"]), 4 / (N - 1) ** 0.5, q)
            self.assertLess(abs(q["rho_prev"]), 4 / (N - 1) ** 0.5, q)
            self.assertAlmostEqual(q["displacement"], 1 / 3, delta=0.01, msg=q)
            self.assertLess(q["max_z"], 5, q)
            self.assertEqual((q["delivered"], q["distinct"], q["duplicates"], q["missing"]), (N, N, 0, 0))

    def test_storage_order_is_far_from_uniform(self):
        order = numpy.arange(N)
        q = sq.measure(order, N, S, previous=order)
        # every neighbour but one per shard boundary shares its shard
        p = (S - 1) / (N - 1)
        self.assertAlmostEqual(q["shard_adjacency"], (N - N // S) / (N - 1) / p, places=6)
        self.assertAlmostEqual(q["rho"], 1.0)
        self.assertAlmostEqual(q["rho_prev"], 1.0)
        self.assertEqual(q["displacement"], 0.0)
        self.assertGreater(q["max_z"], 100)

    def test_reversed_order_correlates_negatively(self):
        q = sq.measure(numpy.arange(N)[::-1], N, S)
        self.assertAlmostEqual(q["rho"], -1.0)
        self.assertIsNone(q["rho_prev"])
        self.assertNotIn("rho_prev", q["z"])

    def test_shards_shuffled_but_read_in_order_keep_shard_adjacency(self):
        rng = numpy.random.default_rng(3)
        order = numpy.concatenate([numpy.arange(k * S, (k + 1) * S) for k in rng.permutation(N // S)])
        q = sq.measure(order, N, S)
        self.assertGreater(q["shard_adjacency"], 50)
        self.assertLess(abs(q["rho"]), 0.3)  # 200 shards in random order: rho is near 0 (sd 0.07)
        self.assertGreater(q["max_z"], 100)

    def test_a_small_shuffle_buffer_is_told_from_a_large_one(self):
        rng = numpy.random.default_rng(5)
        shards = numpy.concatenate([numpy.arange(k * S, (k + 1) * S) for k in rng.permutation(N // S)])
        small = sq.measure(buffer_shuffle(shards, 10, 1), N, S)
        large = sq.measure(buffer_shuffle(shards, 2000, 1), N, S)
        self.assertGreater(small["shard_adjacency"], large["shard_adjacency"])
        self.assertGreater(large["shard_adjacency"], 2)  # 2,000 of 20,000 still far from uniform
        self.assertGreater(large["max_z"], 10)

    def test_the_same_order_twice_is_seen_by_rho_prev(self):
        rng = numpy.random.default_rng(11)
        order = rng.permutation(N)
        q = sq.measure(order, N, S, previous=order)
        self.assertAlmostEqual(q["rho_prev"], 1.0)
        self.assertLess(abs(q["rho"]), 4 / (N - 1) ** 0.5)
        self.assertGreater(q["max_z"], 100)

    def test_repeats_and_gaps_are_counted_and_measured_on_first_occurrences(self):
        rng = numpy.random.default_rng(13)
        order = rng.permutation(N)[: N - 50]
        padded = numpy.concatenate([order, order[:20]])  # a loader that pads with repeats
        q = sq.measure(padded, N, S)
        self.assertEqual((q["delivered"], q["distinct"], q["duplicates"], q["missing"]), (N - 30, N - 50, 20, 50))
        self.assertEqual(q["rho"], sq.measure(order, N, S)["rho"])

    def test_first_occurrences_keep_the_order(self):
        got = sq.first_occurrences(numpy.array([5, 3, 5, 1, 3, 0]))
        self.assertEqual(got.tolist(), [5, 3, 1, 0])

    def test_bad_ids_and_shard_size_are_refused(self):
        with self.assertRaisesRegex(ValueError, "delivered id 10 is outside the dataset's 0..9"):
            sq.measure([0, 10, 2], 10, 5)
        with self.assertRaisesRegex(ValueError, "delivered id -1"):
            sq.measure([0, -1], 10, 5)
        with self.assertRaisesRegex(ValueError, "shard_size must be at least 1, got 0"):
            sq.measure([0, 1], 10, 0)

    def test_tiny_orders_give_none_not_nan(self):
        q = sq.measure([3], 10, 5)
        self.assertIsNone(q["shard_adjacency"])
        self.assertIsNone(q["rho"])
        self.assertEqual(q["max_z"], 0.0)


if __name__ == "__main__":
    unittest.main()
