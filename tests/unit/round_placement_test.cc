// Rounds over the job's memory (plan/round_placement.h): every chunk of every
// round of many epochs placed once, no slot overrun, shares in proportion
// to the slots, contiguous runs in load order, the same answer every time,
// and a round too large refused rather than overrunning.
#include <algorithm>
#include <numeric>

#include <gtest/gtest.h>

#include "plan/round_placement.h"

namespace dlfs::plan {
namespace {

// Samples of 100..700 bytes back to back, chunks of at most chunk_bytes.
PlanShape shape_for(uint64_t n, uint64_t chunk_bytes) {
  std::vector<uint64_t> begin(n + 1, 0);
  for (uint64_t i = 0; i < n; ++i) begin[i + 1] = begin[i] + 100 * (1 + (i * 7919) % 7);
  return make_plan_shape(
      n, chunk_bytes, 0, [&](uint64_t i) { return begin[i]; }, [&](uint64_t i) { return begin[i + 1] - begin[i]; });
}

void expect_valid(const PlanShape& shape, const Round& round, const std::vector<uint64_t>& slots,
                  const RoundPlacement& p) {
  ASSERT_EQ(p.member.size(), round.chunks.size());
  ASSERT_EQ(p.member_bytes.size(), slots.size());
  std::vector<uint64_t> filled(slots.size(), 0);
  for (size_t k = 0; k < round.chunks.size(); ++k) {
    const uint32_t m = p.member[k];
    ASSERT_LT(m, slots.size());
    EXPECT_EQ(p.offset[k], filled[m]) << "chunks of a member lie back to back in load order";
    filled[m] += shape.chunk_bytes[round.chunks[k]];
    if (k > 0) EXPECT_LE(p.member[k - 1], m) << "each member holds one contiguous run of the round";
  }
  for (size_t m = 0; m < slots.size(); ++m) {
    EXPECT_EQ(filled[m], p.member_bytes[m]);
    EXPECT_LE(filled[m], slots[m]) << "member " << m << " overruns its slot";
  }
  EXPECT_EQ(std::accumulate(filled.begin(), filled.end(), uint64_t{0}), round.bytes);
}

TEST(RoundPlacement, EveryRoundOfManyEpochsFitsAndCoversItsChunks) {
  PlanShape shape = shape_for(5000, 4000);
  const uint64_t most = largest_chunk(shape);
  for (std::vector<uint64_t> slots : {std::vector<uint64_t>{50000, 50000, 50000},
                                      std::vector<uint64_t>{20000, 90000, 35000, 60000},
                                      std::vector<uint64_t>{3000, 80000, 80000}}) {  // one too small for a chunk
    shape.round_bytes = aggregate_round_bytes(slots, most);
    ASSERT_GT(shape.round_bytes, 0u);
    for (uint64_t epoch = 0; epoch < 5; ++epoch) {
      for (const Round& r : epoch_rounds(shape, 11, epoch)) {
        auto p = place_round(shape, r, slots);
        ASSERT_TRUE(p.is_ok()) << p.status().message();
        expect_valid(shape, r, slots, *p);
        if (slots[0] <= most) EXPECT_EQ(p->member_bytes[0], 0u) << "a slot that holds no chunk gets nothing";
      }
    }
  }
}

TEST(RoundPlacement, SharesFollowTheSlots) {
  PlanShape shape = shape_for(20000, 2000);
  const std::vector<uint64_t> slots{100000, 300000};
  shape.round_bytes = aggregate_round_bytes(slots, largest_chunk(shape));
  const auto rounds = epoch_rounds(shape, 3, 0);
  ASSERT_GT(rounds.size(), 2u);
  const Round& full = rounds[0];  // a full round: the shares show
  auto p = place_round(shape, full, slots);
  ASSERT_TRUE(p.is_ok());
  const double share = static_cast<double>(p->member_bytes[1]) / static_cast<double>(full.bytes);
  EXPECT_NEAR(share, 0.75, 0.02) << "member 1 has 3x member 0's slot";
}

TEST(RoundPlacement, IsAPureFunction) {
  PlanShape shape = shape_for(3000, 3000);
  const std::vector<uint64_t> slots{40000, 40000, 40000, 40000};
  shape.round_bytes = aggregate_round_bytes(slots, largest_chunk(shape));
  for (const Round& r : epoch_rounds(shape, 5, 2)) {
    auto a = place_round(shape, r, slots), b = place_round(shape, r, slots);
    ASSERT_TRUE(a.is_ok() && b.is_ok());
    EXPECT_EQ(a->member, b->member);
    EXPECT_EQ(a->offset, b->offset);
  }
}

TEST(RoundPlacement, ARoundTooLargeIsRefused) {
  PlanShape shape = shape_for(3000, 3000);
  const std::vector<uint64_t> slots{20000, 20000};
  shape.round_bytes = aggregate_round_bytes(slots, largest_chunk(shape)) * 2;
  const auto rounds = epoch_rounds(shape, 5, 0);
  auto p = place_round(shape, rounds[0], slots);
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("does not fit the members' slots"), std::string::npos) << p.status().message();
  EXPECT_FALSE(place_round(shape, rounds[0], std::vector<uint64_t>{}).is_ok()) << "no member";
}

}  // namespace
}  // namespace dlfs::plan
