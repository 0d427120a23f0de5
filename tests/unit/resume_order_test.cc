// The remainder of an epoch resumed on another world size
// (fs/views/resume_order.h), against the plan itself: for a grid of
// (N, W, W', consumed counts) under pad and drop, the W' ranks together read
// every sample the W ranks did not, exactly once (pad: plus the wrap of the
// remainder, and only that), in the order of the epoch, and no consumed one.
#include "fs/views/resume_order.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "plan/epoch_plan.h"

namespace dlfs::fs {
namespace {

using plan::Remainder;

TEST(ResumeOrder, ParsesOneCountOrOnePerRank) {
  EXPECT_EQ(*parse_consumed("7", 3), (std::vector<uint64_t>{7, 7, 7}));
  EXPECT_EQ(*parse_consumed("0", 2), (std::vector<uint64_t>{0, 0}));
  EXPECT_EQ(*parse_consumed("5,4,4", 3), (std::vector<uint64_t>{5, 4, 4}));
  EXPECT_EQ(*parse_consumed("5*2,4", 3), (std::vector<uint64_t>{5, 5, 4}));
  EXPECT_EQ(*parse_consumed("9*4", 4), (std::vector<uint64_t>{9, 9, 9, 9}));
  EXPECT_EQ(*parse_consumed("18446744073709551615", 1), (std::vector<uint64_t>{UINT64_MAX}));
}

TEST(ResumeOrder, RefusesWhatIsNotCountsForThisWorld) {
  for (const char* bad : {"", "-1", "+1", "07", "1.5", "a", "1,", ",1", "1,,2", "1*", "*2", "1*0", "1*02", "1 ",
                          "18446744073709551616"}) {
    auto r = parse_consumed(bad, 2);
    EXPECT_FALSE(r.is_ok()) << "'" << bad << "'";
    if (!r) EXPECT_EQ(r.status().err(), EINVAL);
  }
  auto short_list = parse_consumed("1,2", 3);
  ASSERT_FALSE(short_list.is_ok());
  EXPECT_NE(short_list.status().message().find("2 counts for world size 3"), std::string::npos)
      << short_list.status().message();
  EXPECT_FALSE(parse_consumed("1,2,3,4", 3).is_ok());
  EXPECT_FALSE(parse_consumed("1*4", 3).is_ok());
  EXPECT_FALSE(parse_consumed("1*2,2*2", 3).is_ok());
}

TEST(ResumeOrder, NamesRoundTrip) {
  EXPECT_EQ(consumed_name(std::vector<uint64_t>{4, 4, 4}), "4");
  EXPECT_EQ(consumed_name(std::vector<uint64_t>{5, 4, 4, 4}), "5,4*3");
  EXPECT_EQ(consumed_name(std::vector<uint64_t>{1, 2, 3}), "1,2,3");
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200; ++i) {
    std::vector<uint64_t> c(1 + rng() % 9);
    for (auto& x : c) x = rng() % 3;
    auto back = parse_consumed(consumed_name(c), static_cast<uint32_t>(c.size()));
    ASSERT_TRUE(back.is_ok()) << consumed_name(c);
    EXPECT_EQ(*back, c) << consumed_name(c);
  }
}

TEST(ResumeOrder, ACountAboveTheRanksViewIsRefusedNamingTheRank) {
  // 10 samples over 4 ranks: 3 each padded, 2 each dropped.
  EXPECT_TRUE(check_consumed(10, 4, std::vector<uint64_t>{3, 3, 3, 3}, Remainder::pad).is_ok());
  Status s = check_consumed(10, 4, std::vector<uint64_t>{2, 2, 3, 2}, Remainder::drop);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.err(), EINVAL);
  EXPECT_NE(s.message().find("rank 2 of 4 consumed 3 samples, but its view holds 2"), std::string::npos) << s.message();
  EXPECT_FALSE(check_consumed(10, 4, std::vector<uint64_t>{1, 1, 1}, Remainder::pad).is_ok());
  EXPECT_FALSE(remaining_positions(10, 4, std::vector<uint64_t>{4, 0, 0, 0}, Remainder::pad).is_ok());
}

// Every (N, W, W', counts) of a small grid, both policies.
TEST(ResumeOrder, RemainderIsReadExactlyOnceAcrossTheNewWorld) {
  std::mt19937_64 rng(11);
  int cases = 0;
  for (const Remainder rem : {Remainder::pad, Remainder::drop})
    for (uint64_t n : {1, 2, 7, 12, 13, 30})
      for (uint32_t w : {1u, 2u, 3u, 4u}) {
        const uint64_t per = per_rank(n, w, rem);
        const std::vector<uint64_t> order = plan::epoch_permutation(5, 3, n);
        // Uniform counts (DDP's lockstep) and uneven ones.
        std::vector<std::vector<uint64_t>> grid;
        for (uint64_t c = 0; c <= per; ++c) grid.push_back(std::vector<uint64_t>(w, c));
        for (int i = 0; i < 6; ++i) {
          std::vector<uint64_t> c(w);
          for (auto& x : c) x = per == 0 ? 0 : rng() % (per + 1);
          grid.push_back(c);
        }
        for (const auto& counts : grid) {
          // What the W ranks read: the first c_r samples of each rank's view.
          std::multiset<uint64_t> consumed;
          for (uint32_t r = 0; r < w; ++r) {
            auto view = plan::rank_order({5, 3, n, w, rem}, r);
            ASSERT_TRUE(view.is_ok());
            for (uint64_t k = 0; k < counts[r]; ++k) consumed.insert((*view)[k]);
          }
          auto rest = remaining_positions(n, w, counts, rem);
          ASSERT_TRUE(rest.is_ok()) << rest.status().message();
          const std::vector<uint64_t>& pos = (*rest)->positions;
          // The remainder: every sample not consumed, once, in epoch order.
          std::set<uint64_t> left;
          for (size_t q = 0; q < pos.size(); ++q) {
            ASSERT_LT(pos[q], n);
            if (q) ASSERT_LT(pos[q - 1], pos[q]) << "in the epoch's order";
            left.insert(order[pos[q]]);
          }
          for (uint64_t s = 0; s < n; ++s)
            EXPECT_NE(consumed.count(s) > 0, left.count(s) > 0) << "sample " << s << ": consumed or left, not both";
          const uint64_t m = pos.size();
          for (uint32_t w2 : {1u, 2u, 3u, 4u, 6u}) {
            ++cases;
            const uint64_t per2 = m == 0 ? 0 : resume_per_rank(m, w2, rem);
            std::map<uint64_t, int> seen;
            std::vector<uint64_t> global(per2 * w2);
            for (uint32_t r2 = 0; r2 < w2; ++r2)
              for (uint64_t k = 0; k < per2; ++k) {
                const uint64_t s = order[pos[resume_position(m, w2, r2, k)]];
                ++seen[s];
                global[r2 + k * w2] = s;
                EXPECT_EQ(consumed.count(s), 0u) << "a consumed sample read again";
              }
            if (rem == Remainder::drop) {
              EXPECT_EQ(per2, m / w2);
              for (auto [s, times] : seen) EXPECT_EQ(times, 1) << "sample " << s;
              EXPECT_EQ(seen.size(), m - m % w2) << "drop: the last M mod W' of the remainder left out";
              for (uint64_t q = 0; q < global.size(); ++q) EXPECT_EQ(global[q], order[pos[q]]);
            } else {
              EXPECT_EQ(per2, (m + w2 - 1) / w2);
              EXPECT_EQ(seen.size(), m) << "pad: every sample left is read";
              // The extras are the wrap of the remainder, and only that.
              for (uint64_t q = 0; q < global.size(); ++q) EXPECT_EQ(global[q], order[pos[q % m]]) << "position " << q;
            }
          }
        }
      }
  EXPECT_GT(cases, 1000);
}

// Resuming with W' = W and uniform counts is the rest of each rank's own
// view: the same samples as `start=` on the same world size, reordered.
TEST(ResumeOrder, SameWorldUniformCountsLeaveTheRestOfTheEpoch) {
  const uint64_t n = 40;
  auto rest = remaining_positions(n, 4, std::vector<uint64_t>{3, 3, 3, 3}, Remainder::pad);
  ASSERT_TRUE(rest.is_ok());
  ASSERT_EQ((*rest)->size(), 28u);
  for (uint64_t q = 0; q < 28; ++q) EXPECT_EQ((*rest)->positions[q], 12 + q);
}

}  // namespace
}  // namespace dlfs::fs
