// Rounds (R < 1) and the randomization level: exactly once per epoch across
// ranks for many (N, W, R), rounds that are contiguous and hold their chunks,
// determinism, and RL against a hand computation and the paper's figures.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "plan/randomization.h"
#include "plan/round_plan.h"

namespace dlfs::plan {
namespace {

// Samples of varying size (1..7 units of 100 bytes) laid out back to back.
PlanShape shape_for(uint64_t n, uint64_t chunk_bytes, double ratio) {
  std::vector<uint64_t> begin(n + 1, 0);
  for (uint64_t i = 0; i < n; ++i) begin[i + 1] = begin[i] + 100 * (1 + (i * 7919) % 7);
  PlanShape s = make_plan_shape(
      n, chunk_bytes, 0, [&](uint64_t i) { return begin[i]; }, [&](uint64_t i) { return begin[i + 1] - begin[i]; });
  s.round_bytes = ratio >= 1 ? 0 : static_cast<uint64_t>(ratio * s.total_bytes);
  return s;
}

TEST(RoundPlan, ChunksCoverEverySampleInOrder) {
  PlanShape s = shape_for(1000, 2000, 1);
  ASSERT_EQ(s.chunk_first.front(), 0u);
  ASSERT_EQ(s.chunk_first.back(), 1000u);
  for (uint64_t c = 0; c < s.chunk_count(); ++c) {
    EXPECT_LT(s.chunk_first[c], s.chunk_first[c + 1]);
    EXPECT_LE(s.chunk_bytes[c], 2000u);
  }
  for (uint64_t i : {0ull, 1ull, 500ull, 999ull}) {
    uint64_t c = s.chunk_of(i);
    EXPECT_LE(s.chunk_first[c], i);
    EXPECT_LT(i, s.chunk_first[c + 1]);
  }
  // A sample larger than the chunk size is a chunk alone.
  PlanShape big = make_plan_shape(3, 10, 0, [](uint64_t i) { return i * 50; }, [](uint64_t) { return 50; });
  EXPECT_EQ(big.chunk_count(), 3u);
}

TEST(RoundPlan, ExactlyOncePerEpochAcrossRanksForManyShapes) {
  for (uint64_t n : {1ull, 2ull, 5ull, 13ull, 97ull, 1000ull, 4099ull})
    for (double ratio : {1.0, 0.5, 0.25, 0.1})
      for (uint32_t w : {1u, 2u, 3u, 7u, 16u}) {
        PlanShape s = shape_for(n, 1500, ratio);
        auto order = build_epoch_order(s, 5, 2);
        ASSERT_EQ(order->order.size(), n);
        std::vector<uint64_t> sorted = order->order;
        std::sort(sorted.begin(), sorted.end());
        for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i) << "n=" << n << " R=" << ratio;
        for (Remainder rem : {Remainder::drop, Remainder::pad}) {
          PlanKey k{5, 2, n, w, rem};
          std::map<uint64_t, int> seen;
          for (uint32_t r = 0; r < w; ++r)
            for (uint64_t j = 0; j < samples_per_rank(k); ++j) ++seen[order->order[global_position(k, r, j)]];
          const uint64_t served = samples_per_rank(k) * w;
          if (rem == Remainder::drop) {
            EXPECT_EQ(seen.size(), served) << "drop: duplicates, n=" << n << " w=" << w << " R=" << ratio;
            EXPECT_EQ(served, n - n % w);
          } else {
            EXPECT_EQ(seen.size(), n) << "pad: a sample is missing, n=" << n << " w=" << w << " R=" << ratio;
            for (auto& [id, count] : seen) EXPECT_LE(count, 1 + static_cast<int>((w - 1) / n + 1));
          }
        }
      }
}

TEST(RoundPlan, RoundsAreContiguousAndHoldTheirChunks) {
  PlanShape s = shape_for(5000, 3000, 0.25);
  auto order = build_epoch_order(s, 9, 4);
  ASSERT_GT(order->rounds.size(), 3u);
  uint64_t pos = 0;
  for (size_t j = 0; j < order->rounds.size(); ++j) {
    const Round& r = order->rounds[j];
    EXPECT_EQ(r.first_position, pos);
    EXPECT_LE(r.bytes, s.round_bytes);
    std::set<uint64_t> expected, got;
    for (uint32_t c : r.chunks)
      for (uint64_t i = s.chunk_first[c]; i < s.chunk_first[c + 1]; ++i) expected.insert(i);
    for (uint64_t p = r.first_position; p < r.first_position + r.samples; ++p) {
      got.insert(order->order[p]);
      EXPECT_EQ(order->round_of(p), j);
    }
    EXPECT_EQ(got, expected) << "round " << j;
    pos += r.samples;
  }
  EXPECT_EQ(pos, 5000u);
  EXPECT_LE(round_slot_bytes(s), s.round_bytes);
}

TEST(RoundPlan, DeterministicAndOneRoundIsTheFullShuffle) {
  PlanShape s = shape_for(3000, 2000, 0.5);
  EXPECT_EQ(build_epoch_order(s, 1, 7)->order, build_epoch_order(s, 1, 7)->order);
  EXPECT_NE(build_epoch_order(s, 1, 7)->order, build_epoch_order(s, 1, 8)->order);
  EXPECT_NE(build_epoch_order(s, 1, 7)->order, build_epoch_order(s, 2, 7)->order);
  PlanShape full = shape_for(3000, 2000, 1);
  EXPECT_EQ(build_epoch_order(full, 1, 7)->order, epoch_permutation(1, 7, 3000));
  EXPECT_EQ(build_epoch_order(full, 1, 7)->rounds.size(), 1u);
}

TEST(RoundPlan, ChunkChoiceVariesBetweenEpochs) {
  PlanShape s = shape_for(4000, 2000, 0.25);
  auto a = build_epoch_order(s, 3, 0), b = build_epoch_order(s, 3, 1);
  EXPECT_NE(a->rounds[0].chunks, b->rounds[0].chunks);
}

// Two chunks of two samples, one chunk per round (N = 4), computed by hand:
//   i=0: P = 1/2*1/2, Q = 1/4    i=1: P = 1/2*1, Q = 1/3
//   i=2: P = 1*1/2,   Q = 1/2    i=3: P = 1,     Q = 1
//   H = 1/4*2 + 1/3*1 + 1/2*1 + 0 = 4/3
//   H_fully = 1/4*2 + 1/3*log2(3) + 1/2*1 = 1 + log2(3)/3
TEST(Randomization, SmallConfigurationMatchesHandComputation) {
  PlanShape s = make_plan_shape(4, 2, 1, [](uint64_t i) { return i; }, [](uint64_t) { return 1; });
  ASSERT_EQ(s.chunk_count(), 2u);
  s.round_bytes = 2;
  auto rounds = epoch_rounds(s, 0, 0);
  ASSERT_EQ(rounds.size(), 2u);
  const double expected = (4.0 / 3.0) / (1.0 + std::log2(3.0) / 3.0);
  EXPECT_NEAR(randomization_level(rounds, 2), expected, 1e-12);
}

TEST(Randomization, OneRoundIsFullyRandom) {
  PlanShape s = shape_for(1000, 2000, 1);
  EXPECT_DOUBLE_EQ(randomization_level(epoch_rounds(s, 0, 0), s.chunk_count()), 1.0);
}

// DeepIO Fig. 8: AlexNet on Caltech-101 (85 % of 9,144 images for training),
// R = 0.5 -> RL 98.54 %, R = 0.25 -> 96.96 %. Four equal chunks of equal samples.
TEST(Randomization, ReproducesThePapersFigures) {
  const uint64_t n = 7772;
  PlanShape s = make_plan_shape(n, n / 4, 0, [](uint64_t i) { return i; }, [](uint64_t) { return 1; });
  ASSERT_EQ(s.chunk_count(), 4u);
  s.round_bytes = n / 2;
  EXPECT_NEAR(randomization_level(epoch_rounds(s, 0, 0), 4), 0.9854, 0.0005);
  s.round_bytes = n / 4;
  EXPECT_NEAR(randomization_level(epoch_rounds(s, 0, 0), 4), 0.9696, 0.0005);
}

TEST(Randomization, GrowsWithMemoryAndFindsTheMemoryForATarget) {
  PlanShape s = shape_for(20000, 4000, 1);
  double prev = 0;
  for (double ratio : {0.05, 0.1, 0.25, 0.5, 1.0}) {
    PlanShape t = s;
    t.round_bytes = ratio >= 1 ? 0 : static_cast<uint64_t>(ratio * s.total_bytes);
    double rl = randomization_level(epoch_rounds(t, 0, 0), t.chunk_count());
    EXPECT_GT(rl, prev) << "R=" << ratio;
    EXPECT_LE(rl, 1.0);
    prev = rl;
  }
  uint64_t need = round_bytes_for_level(s, 0, 0.98);
  PlanShape t = s;
  t.round_bytes = need;
  EXPECT_GE(randomization_level(epoch_rounds(t, 0, 0), t.chunk_count()), 0.98);
  EXPECT_LT(need, s.total_bytes);
}

}  // namespace
}  // namespace dlfs::plan
