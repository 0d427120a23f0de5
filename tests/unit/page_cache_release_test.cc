// PageCacheReleaser: ranges are dropped after the delay (not before), merged
// when a file is read on in order, dropped early above the byte bound, and
// nothing is dropped after stop(). The drop is a recording fake here; the
// real one (the kernel's FUSE notify) runs in tests/integration/33_reads_while_loading.sh.
#include "fs/page_cache_release.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace dlfs::fs {
namespace {

using namespace std::chrono_literals;

struct Dropped {
  uint64_t ino, offset, length;
  std::chrono::steady_clock::time_point at;
};

// Records every drop; answers `rc` for inode `bad_ino`.
class Recorder {
 public:
  PageCacheReleaser::Invalidate fn(int rc_for_bad = -ENOENT, uint64_t bad_ino = 0) {
    return [this, rc_for_bad, bad_ino](uint64_t ino, uint64_t off, uint64_t len) {
      std::lock_guard lk(mu_);
      got_.push_back({ino, off, len, std::chrono::steady_clock::now()});
      return ino == bad_ino ? rc_for_bad : 0;
    };
  }
  std::vector<Dropped> got() {
    std::lock_guard lk(mu_);
    return got_;
  }
  // Waits until at least n drops were recorded (or 5 s).
  bool wait_for(size_t n) {
    for (int i = 0; i < 500; ++i) {
      if (got().size() >= n) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

 private:
  std::mutex mu_;
  std::vector<Dropped> got_;
};

TEST(PageCacheReleaser, DropsEachRangeAfterTheDelayNotBefore) {
  Recorder rec;
  PageCacheReleaser r(rec.fn(), {.delay = 200ms});
  const auto t0 = std::chrono::steady_clock::now();
  r.add(7, 0, 4096);
  r.add(9, 8192, 4096);
  std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(rec.got().empty()) << "dropped before the delay";
  EXPECT_EQ(r.pending(), 2u);
  ASSERT_TRUE(rec.wait_for(2));
  auto got = rec.got();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].ino, 7u);
  EXPECT_EQ(got[0].offset, 0u);
  EXPECT_EQ(got[0].length, 4096u);
  EXPECT_EQ(got[1].ino, 9u);
  EXPECT_EQ(got[1].offset, 8192u);
  EXPECT_GE(got[0].at - t0, 200ms);
  EXPECT_EQ(r.counters().ranges.load(), 2u);
  EXPECT_EQ(r.counters().bytes.load(), 8192u);
  EXPECT_EQ(r.pending(), 0u);
}

TEST(PageCacheReleaser, MergesAFileReadOnInOrderButNotOtherRanges) {
  Recorder rec;
  PageCacheReleaser r(rec.fn(), {.delay = 100ms});
  r.add(5, 0, 131072);
  r.add(5, 131072, 131072);  // the next readahead request: merged
  r.add(5, 524288, 4096);    // a gap: its own range
  r.add(6, 528384, 4096);    // another inode: its own range
  EXPECT_EQ(r.pending(), 3u);
  ASSERT_TRUE(rec.wait_for(3));
  auto got = rec.got();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].ino, 5u);
  EXPECT_EQ(got[0].offset, 0u);
  EXPECT_EQ(got[0].length, 262144u);
  EXPECT_EQ(got[1].offset, 524288u);
  EXPECT_EQ(got[2].ino, 6u);
}

TEST(PageCacheReleaser, AMergedRangeStopsGrowingAt4MiB) {
  Recorder rec;
  PageCacheReleaser r(rec.fn(), {.delay = 100ms});
  for (uint64_t i = 0; i < 8; ++i) r.add(3, i << 20, 1u << 20);  // 8 MiB read on in order
  EXPECT_EQ(r.pending(), 2u);
  ASSERT_TRUE(rec.wait_for(2));
  auto got = rec.got();
  EXPECT_EQ(got[0].length, 4u << 20);
  EXPECT_EQ(got[1].offset, 4u << 20);
  EXPECT_EQ(got[1].length, 4u << 20);
}

TEST(PageCacheReleaser, DropsEarlyAboveTheByteBoundOldestFirst) {
  Recorder rec;
  PageCacheReleaser r(rec.fn(), {.delay = std::chrono::milliseconds(60000), .max_pending_bytes = 1u << 20});
  for (uint64_t ino = 1; ino <= 5; ++ino) r.add(ino, 0, 512u << 10);  // 2.5 MiB, bound 1 MiB
  ASSERT_TRUE(rec.wait_for(3)) << "nothing dropped although the bound was passed";
  std::this_thread::sleep_for(50ms);
  auto got = rec.got();
  ASSERT_EQ(got.size(), 3u) << "dropped more than needed to get under the bound";
  EXPECT_EQ(got[0].ino, 1u);
  EXPECT_EQ(got[1].ino, 2u);
  EXPECT_EQ(got[2].ino, 3u);
  EXPECT_EQ(r.pending(), 2u);  // 1 MiB left: at the bound, not above it
}

TEST(PageCacheReleaser, TooManyRangesLeavesNewOnesCachedAndCountsThem) {
  Recorder rec;
  PageCacheReleaser r(rec.fn(), {.delay = std::chrono::milliseconds(60000), .max_pending_ranges = 4});
  for (uint64_t ino = 1; ino <= 6; ++ino) r.add(ino, 0, 4096);
  EXPECT_EQ(r.pending(), 4u);
  EXPECT_EQ(r.counters().overflowed.load(), 2u);
}

TEST(PageCacheReleaser, CountsInodesTheKernelForgotAndOtherErrorsApart) {
  Recorder rec;
  PageCacheReleaser forgot(rec.fn(-ENOENT, 2), {.delay = 10ms});
  forgot.add(1, 0, 4096);
  forgot.add(2, 0, 4096);
  ASSERT_TRUE(rec.wait_for(2));
  forgot.stop();
  EXPECT_EQ(forgot.counters().ranges.load(), 1u);
  EXPECT_EQ(forgot.counters().not_cached.load(), 1u);
  EXPECT_EQ(forgot.counters().errors.load(), 0u);

  Recorder rec2;
  PageCacheReleaser broken(rec2.fn(-ENOTCONN, 4), {.delay = 10ms});
  broken.add(4, 0, 4096);
  ASSERT_TRUE(rec2.wait_for(1));
  broken.stop();
  EXPECT_EQ(broken.counters().errors.load(), 1u);
  EXPECT_EQ(broken.counters().ranges.load(), 0u);
}

TEST(PageCacheReleaser, StopDropsNothingMoreAndIgnoresLaterRanges) {
  Recorder rec;
  PageCacheReleaser r(rec.fn(), {.delay = 100ms});
  r.add(1, 0, 4096);
  r.stop();
  r.stop();  // idempotent
  r.add(2, 0, 4096);
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(rec.got().empty());
  EXPECT_EQ(r.pending(), 1u);  // what was pending stays cached
}

TEST(PageCacheReleaser, StopWaitsForADropUnderWay) {
  std::atomic<bool> in_drop{false}, finished{false};
  PageCacheReleaser r(
      [&](uint64_t, uint64_t, uint64_t) {
        in_drop = true;
        std::this_thread::sleep_for(200ms);  // the kernel waiting for a page being read
        finished = true;
        return 0;
      },
      {.delay = 1ms});
  r.add(1, 0, 4096);
  while (!in_drop) std::this_thread::sleep_for(1ms);
  r.stop();
  EXPECT_TRUE(finished) << "stop() returned while a drop was still under way";
}

}  // namespace
}  // namespace dlfs::fs
