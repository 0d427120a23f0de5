"""How close an order a loader delivered is to a uniform random permutation,
one set of measures for every loader (loaders_bench.py). Needs numpy.

Input: the storage indices (ids) of the samples in the order the training
loop received them, 0 <= id < count; the storage order is the dataset's
(sample i of it is id i), and shard = id // shard_size for every loader alike,
whatever its own file layout. A loader that repeats or drops samples is
measured on the first occurrence of each id it delivered (`duplicates` and
`missing` say how many).

Measures, each with what a uniform random permutation of the m delivered ids
gives and its z-score (how many of that permutation's standard deviations the
order is away from it; |z| < 3 is what a uniform shuffle shows):

  shard_adjacency  the share of neighbouring delivered samples that come from
                   the same shard, over that share's expectation
                   p = sum_k s_k (s_k - 1) / (m (m - 1)) (shards of s_k
                   delivered samples; (S-1)/(N-1) for equal shards of S):
                   1.0 uniform, up to 1/p when shards are read one after the
                   other. z from the count's approximate binomial spread.
  rho              Spearman's rank correlation between delivered position and
                   storage index: 0 uniform (sd 1/sqrt(m-1)), 1 storage order.
                   plan/shuffle_quality.h's rank_correlation_canonical, signed.
  rho_prev         the same between a sample's positions in this epoch and in
                   the previous one (samples in both): 0 uniform, 1 the same
                   order again (rank_correlation_next_epoch there).
  displacement     the mean |position - storage rank| over m - 1 (Spearman's
                   footrule, normalised): 1/3 uniform, 0 storage order; z from
                   the footrule's variance under a uniform permutation,
                   (m + 1)(2 m^2 + 7) / 45 (Diaconis and Graham 1977).

`max_z` is the largest |z| of them: one figure of how far from uniform the
order is (below about 3-4 for any uniform shuffle at these sizes)."""
import math

import numpy

MEASURES = ("shard_adjacency", "rho", "rho_prev", "displacement")
UNIFORM = {"shard_adjacency": 1.0, "rho": 0.0, "rho_prev": 0.0, "displacement": 1.0 / 3.0}


def first_occurrences(order):
    """The ids of `order` with every repeat after the first left out, in order."""
    _ids, first = numpy.unique(order, return_index=True)
    return order[numpy.sort(first)]


def _ranks(values):
    """Rank (0..m-1) of each of m distinct values."""
    r = numpy.empty(len(values), dtype=numpy.int64)
    r[numpy.argsort(values, kind="stable")] = numpy.arange(len(values))
    return r


def spearman(rank_a, rank_b):
    """Spearman's rho of two rankings (0..m-1, no ties) of the same m items."""
    m = len(rank_a)
    if m < 2:
        return 0.0
    d = rank_a.astype(numpy.float64) - rank_b.astype(numpy.float64)
    return float(1.0 - 6.0 * numpy.dot(d, d) / (m * (m * m - 1.0)))


def shard_adjacency(seq, shard_size):
    """(ratio to uniform, z) of same-shard neighbours in `seq` (distinct ids)."""
    m = len(seq)
    if m < 2:
        return math.nan, 0.0
    shards = seq // shard_size
    same = int(numpy.count_nonzero(shards[1:] == shards[:-1]))
    sizes = numpy.bincount(shards).astype(numpy.float64)
    p = float(numpy.dot(sizes, sizes - 1.0)) / (m * (m - 1.0))
    expected = (m - 1) * p
    if expected <= 0:  # every delivered sample in its own shard
        return math.nan, 0.0
    sd = math.sqrt(expected * (1.0 - p)) or 1.0
    return same / expected, (same - expected) / sd


def displacement(seq):
    """(mean |position - storage rank| / (m - 1), z) of `seq` (distinct ids)."""
    m = len(seq)
    if m < 2:
        return math.nan, 0.0
    footrule = float(numpy.abs(numpy.arange(m) - _ranks(seq)).sum())
    mean = (m * m - 1.0) / 3.0
    sd = math.sqrt((m + 1.0) * (2.0 * m * m + 7.0) / 45.0)
    return footrule / (m * (m - 1.0)), (footrule - mean) / sd


def rho_between(seq, prev):
    """(rho, z) of the positions the ids both orders hold, in one against the other."""
    common = numpy.intersect1d(seq, prev, assume_unique=True)
    k = len(common)
    if k < 2:
        return math.nan, 0.0
    pos = numpy.empty(int(max(seq.max(), prev.max())) + 1, dtype=numpy.int64)
    pos[seq] = numpy.arange(len(seq))
    a = pos[common]
    pos[prev] = numpy.arange(len(prev))
    b = pos[common]
    rho = spearman(_ranks(a), _ranks(b))
    return rho, rho * math.sqrt(k - 1)


def measure(order, count, shard_size, previous=None):
    """The measures (module docstring) of one epoch's delivered `order` of ids
    out of `count` samples; `previous`: the epoch before's order, for rho_prev.
    Raises ValueError naming an id outside [0, count)."""
    order = numpy.asarray(order, dtype=numpy.int64)
    if shard_size < 1:
        raise ValueError(f"shard_size must be at least 1, got {shard_size}")
    if len(order) and (order.min() < 0 or order.max() >= count):
        bad = order[(order < 0) | (order >= count)][0]
        raise ValueError(f"delivered id {int(bad)} is outside the dataset's 0..{count - 1}")
    seq = first_occurrences(order)
    m = len(seq)
    out = {"delivered": int(len(order)), "distinct": int(m), "duplicates": int(len(order) - m),
           "missing": int(count - m)}
    z = {}
    out["shard_adjacency"], z["shard_adjacency"] = shard_adjacency(seq, shard_size)
    out["rho"] = spearman(numpy.arange(m), _ranks(seq)) if m >= 2 else math.nan
    z["rho"] = out["rho"] * math.sqrt(m - 1) if m >= 2 else 0.0
    out["displacement"], z["displacement"] = displacement(seq)
    if previous is not None:
        out["rho_prev"], z["rho_prev"] = rho_between(seq, first_occurrences(numpy.asarray(previous, numpy.int64)))
    else:
        out["rho_prev"] = None
    out["z"] = {k: float(v) for k, v in z.items()}
    out["max_z"] = float(max(abs(v) for v in z.values()))
    # NaN (too few samples to say) as None: JSON has no NaN
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}
