// The shuffle-quality metrics tell a full shuffle, rounds and a constant
// order apart, in the directions their definitions say.
#include <gtest/gtest.h>

#include "plan/round_plan.h"
#include "plan/shuffle_quality.h"

namespace dlfs::plan {
namespace {

constexpr uint64_t kN = 20000, kEpochs = 12;

TEST(ShuffleQuality, FullShuffleLooksUniform) {
  auto q = measure_shuffle(kN, kEpochs, [](uint64_t e) { return epoch_permutation(1, e, kN); });
  EXPECT_NEAR(q.position_spread, 1.0, 0.1);
  EXPECT_LT(q.neighbours_adjacent, 10.0 / kN);
  EXPECT_NEAR(q.neighbours_within_1pct, 0.02, 0.005);
  EXPECT_LT(q.rank_correlation_canonical, 0.05);
  EXPECT_LT(q.rank_correlation_next_epoch, 0.05);
}

TEST(ShuffleQuality, ConstantOrderIsCaught) {
  auto fixed = epoch_permutation(1, 0, kN);
  auto q = measure_shuffle(kN, kEpochs, [&](uint64_t) { return fixed; });
  EXPECT_GT(q.position_spread, 3.0);
  EXPECT_NEAR(q.rank_correlation_next_epoch, 1.0, 1e-9);
  std::vector<uint64_t> canonical(kN);
  for (uint64_t i = 0; i < kN; ++i) canonical[i] = i;
  auto c = measure_shuffle(kN, kEpochs, [&](uint64_t) { return canonical; });
  EXPECT_NEAR(c.rank_correlation_canonical, 1.0, 1e-9);
  EXPECT_NEAR(c.neighbours_adjacent, 1.0, 1e-9);
}

TEST(ShuffleQuality, RoundsKeepNeighboursCloserThanAFullShuffle) {
  PlanShape s = make_plan_shape(kN, 64 * 100, 0, [](uint64_t i) { return i * 100; }, [](uint64_t) { return 100; });
  s.round_bytes = s.total_bytes / 4;
  auto q = measure_shuffle(kN, kEpochs, [&](uint64_t e) { return build_epoch_order(s, 1, e)->order; });
  // Neighbours share a chunk, hence a round of N/4: within 1 % about 4x as often.
  EXPECT_GT(q.neighbours_within_1pct, 0.05);
  EXPECT_NEAR(q.position_spread, 1.0, 0.15);  // positions still uniform over epochs
  EXPECT_LT(q.rank_correlation_next_epoch, 0.05);
}

}  // namespace
}  // namespace dlfs::plan
