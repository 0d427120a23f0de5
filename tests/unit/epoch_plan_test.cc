// EpochPlan: exactly once per epoch across ranks, drop/pad, determinism,
// stability across builds, and a rough uniformity check of the shuffle.
#include <algorithm>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "plan/epoch_plan.h"

namespace dlfs::plan {
namespace {

std::vector<uint64_t> all_ranks(const PlanKey& k) {
  std::vector<uint64_t> all;
  for (uint32_t r = 0; r < k.world_size; ++r) {
    auto o = rank_order(k, r);
    EXPECT_TRUE(o.is_ok());
    EXPECT_EQ(o->size(), samples_per_rank(k));
    all.insert(all.end(), o->begin(), o->end());
  }
  return all;
}

TEST(EpochPlan, PermutationIsAPermutation) {
  for (uint64_t n : {0ull, 1ull, 2ull, 7ull, 1000ull, 65537ull}) {
    auto p = epoch_permutation(42, 3, n);
    std::vector<uint64_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i) << "n=" << n;
  }
}

TEST(EpochPlan, DropServesEachSampleAtMostOnceAndLosesOnlyTheRemainder) {
  for (uint64_t n : {1ull, 2ull, 3ull, 10ull, 97ull, 1000ull, 1009ull})
    for (uint32_t w : {1u, 2u, 3u, 7u, 8u, 13u, 64u}) {
      PlanKey k{7, 1, n, w, Remainder::drop};
      auto all = all_ranks(k);
      std::set<uint64_t> distinct(all.begin(), all.end());
      EXPECT_EQ(distinct.size(), all.size()) << "duplicates with n=" << n << " w=" << w;
      EXPECT_EQ(all.size(), n / w * w) << "n=" << n << " w=" << w;
    }
}

TEST(EpochPlan, PadServesEverySampleAndRepeatsOnlyThePadding) {
  for (uint64_t n : {1ull, 2ull, 3ull, 10ull, 97ull, 1000ull, 1009ull})
    for (uint32_t w : {1u, 2u, 3u, 7u, 8u, 13u, 64u}) {
      PlanKey k{7, 1, n, w, Remainder::pad};
      auto all = all_ranks(k);
      std::map<uint64_t, int> count;
      for (auto s : all) ++count[s];
      EXPECT_EQ(count.size(), n) << "every sample served, n=" << n << " w=" << w;
      uint64_t total = (n + w - 1) / w * w;
      EXPECT_EQ(all.size(), total);
      uint64_t repeats = 0;
      for (auto& [s, c] : count) repeats += static_cast<uint64_t>(c - 1);
      EXPECT_EQ(repeats, total - n) << "only the padding repeats";
    }
}

TEST(EpochPlan, MoreRanksThanSamples) {
  PlanKey drop{1, 0, 3, 8, Remainder::drop};
  EXPECT_EQ(samples_per_rank(drop), 0u);
  EXPECT_TRUE(rank_order(drop, 7)->empty());
  PlanKey pad{1, 0, 3, 8, Remainder::pad};
  EXPECT_EQ(samples_per_rank(pad), 1u);
  EXPECT_EQ(all_ranks(pad).size(), 8u);
}

TEST(EpochPlan, DeterministicAndEpochDependent) {
  PlanKey k{123, 5, 10000, 4, Remainder::pad};
  EXPECT_EQ(*rank_order(k, 2), *rank_order(k, 2));
  PlanKey next = k;
  next.epoch = 6;
  EXPECT_NE(*rank_order(k, 2), *rank_order(next, 2));
  PlanKey other_seed = k;
  other_seed.seed = 124;
  EXPECT_NE(*rank_order(k, 2), *rank_order(other_seed, 2));
}

TEST(EpochPlan, OrderIsStableAcrossBuilds) {
  // Pinned: the order is part of the product's contract (a job resumed after
  // an upgrade must see the same epoch). Changing the shuffle breaks this on
  // purpose and needs a note in the release.
  EXPECT_EQ(epoch_permutation(42, 0, 10), (std::vector<uint64_t>{3, 6, 9, 5, 8, 4, 0, 2, 1, 7}));
}

TEST(EpochPlan, PositionsAreRoughlyUniform) {
  // Where sample 0 lands over 20,000 epochs of 10 samples: each position
  // about 2,000 times (chi-square with 9 dof; 40 is far beyond p = 0.001).
  std::vector<int> hits(10, 0);
  for (uint64_t e = 0; e < 20000; ++e) {
    auto p = epoch_permutation(9, e, 10);
    ++hits[std::find(p.begin(), p.end(), 0) - p.begin()];
  }
  double chi2 = 0;
  for (int h : hits) chi2 += (h - 2000.0) * (h - 2000.0) / 2000.0;
  EXPECT_LT(chi2, 40.0);
}

TEST(EpochPlan, BadParametersAreNamed) {
  PlanKey k{1, 0, 10, 4, Remainder::pad};
  auto r = rank_order(k, 4);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("rank 4"), std::string::npos);
  k.world_size = 0;
  EXPECT_FALSE(rank_order(k, 0).is_ok());
  EXPECT_TRUE(enum_named<Remainder>("drop") == Remainder::drop);
  EXPECT_FALSE(enum_named<Remainder>("wrap"));
}

}  // namespace
}  // namespace dlfs::plan
