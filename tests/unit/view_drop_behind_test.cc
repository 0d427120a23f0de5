// ViewDropBehind: which ranges it asks the kernel to drop, for readers in
// order, readers that jump, and when it is off or the kernel refuses. The
// kernel's side (pages really leaving the page cache) is checked through a
// mount in tests/integration/34_view_drop_behind.sh.
#include "fs/kernel/drop_behind.h"

#include <cerrno>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>

namespace dlfs::fs {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

struct Dropped {
  uint64_t ino, off, len;
  bool operator==(const Dropped&) const = default;
};

// The kernel's stand-in: records every range, answers `answer`.
struct FakeKernel {
  std::mutex mu;
  std::vector<Dropped> calls;
  int answer = 0;
  ViewDropBehind::Invalidate fn() {
    return [this](uint64_t ino, uint64_t off, uint64_t len) {
      std::lock_guard lock(mu);
      calls.push_back({ino, off, len});
      return answer;
    };
  }
};

DropBehindOptions small_options() {
  DropBehindOptions o;
  o.keep_bytes = 4 * kMiB;
  o.step_bytes = 8 * kMiB;
  o.jump_bytes = 16 * kMiB;
  return o;
}

// Reads [from, to) of ino in requests of `request` bytes, in order.
void read_in_order(ViewDropBehind& d, uint64_t ino, uint64_t from, uint64_t to, uint64_t request = kMiB) {
  for (uint64_t off = from; off < to; off += request) d.served(ino, off, std::min(request, to - off));
}

TEST(ViewDropBehind, ReaderInOrderDropsAllButTheLastKeepBytesInSteps) {
  FakeKernel k;
  ViewDropBehind d(small_options(), k.fn());
  read_in_order(d, 7, 0, 40 * kMiB);
  d.drain();
  // Front 12 MiB: drop [0, 8); front 20: [8, 16); 28: [16, 24); 36: [24, 32).
  const std::vector<Dropped> want = {{7, 0, 8 * kMiB}, {7, 8 * kMiB, 8 * kMiB}, {7, 16 * kMiB, 8 * kMiB},
                                     {7, 24 * kMiB, 8 * kMiB}};
  EXPECT_EQ(k.calls, want);
  EXPECT_EQ(d.dropped_bytes(), 32 * kMiB);
  EXPECT_EQ(d.notifications(), 4u);
  EXPECT_EQ(d.failures(), 0u);
  // Never closer to the front than keep_bytes: the last 8 MiB stay cached.
  const Dropped& last = k.calls.back();
  EXPECT_LE(last.off + last.len, 40 * kMiB - 4 * kMiB);
}

TEST(ViewDropBehind, EachFileHasItsOwnFront) {
  FakeKernel k;
  ViewDropBehind d(small_options(), k.fn());
  // Two readers interleaved, as two DataLoader workers reading ranks 0 and 1.
  for (uint64_t off = 0; off < 13 * kMiB; off += kMiB) {
    d.served(1, off, kMiB);
    d.served(2, 100 * kMiB + off, kMiB);
  }
  d.drain();
  // File 2's run starts at its first read (100 MiB): nothing before it is dropped.
  const std::vector<Dropped> want = {{1, 0, 8 * kMiB}, {2, 100 * kMiB, 8 * kMiB}};
  EXPECT_EQ(k.calls, want);
}

TEST(ViewDropBehind, ReadAheadOutOfOrderWithinAJumpIsStillInOrder) {
  FakeKernel k;
  ViewDropBehind d(small_options(), k.fn());
  // Requests of a read-ahead window answered in a different order.
  for (uint64_t base = 0; base < 24 * kMiB; base += 4 * kMiB)
    for (uint64_t i : {2, 0, 3, 1}) d.served(3, base + i * kMiB, kMiB);
  d.drain();
  ASSERT_FALSE(k.calls.empty());
  EXPECT_EQ(k.calls.front(), (Dropped{3, 0, 8 * kMiB}));
}

TEST(ViewDropBehind, RandomReadsDropNothingTheyJumpedOver) {
  FakeKernel k;
  ViewDropBehind d(small_options(), k.fn());
  // Records far apart, forwards and backwards: each read starts a new run.
  for (uint64_t rec : {50, 3, 90, 20, 70, 5, 60})
    d.served(4, rec * 4 * kMiB, 64 << 10);
  d.drain();
  EXPECT_TRUE(k.calls.empty());
  // A run in order from a jump drops from the jump's start, not from 0.
  read_in_order(d, 4, 200 * kMiB, 213 * kMiB);
  d.drain();
  const std::vector<Dropped> want = {{4, 200 * kMiB, 8 * kMiB}};
  EXPECT_EQ(k.calls, want);
}

TEST(ViewDropBehind, ReadingAgainWhatWasDroppedStartsOver) {
  FakeKernel k;
  ViewDropBehind d(small_options(), k.fn());
  read_in_order(d, 5, 0, 13 * kMiB);  // drops [0, 8)
  read_in_order(d, 5, 0, 13 * kMiB);  // a second pass from the start
  d.drain();
  const std::vector<Dropped> want = {{5, 0, 8 * kMiB}, {5, 0, 8 * kMiB}};
  EXPECT_EQ(k.calls, want);
}

TEST(ViewDropBehind, OffDropsNothing) {
  FakeKernel k;
  DropBehindOptions o = small_options();
  o.keep_bytes = 0;
  ViewDropBehind d(o, k.fn());
  EXPECT_FALSE(d.enabled());
  read_in_order(d, 6, 0, 64 * kMiB);
  d.drain();
  EXPECT_TRUE(k.calls.empty());
  EXPECT_EQ(d.notifications(), 0u);
}

TEST(ViewDropBehind, TheKernelForgettingTheInodeIsNoFailureButARefusalIs) {
  FakeKernel k;
  k.answer = -ENOENT;
  ViewDropBehind d(small_options(), k.fn());
  read_in_order(d, 8, 0, 13 * kMiB);
  d.drain();
  EXPECT_EQ(d.notifications(), 1u);
  EXPECT_EQ(d.failures(), 0u);
  EXPECT_EQ(d.dropped_bytes(), 0u);
  k.answer = -ENOSYS;
  read_in_order(d, 8, 13 * kMiB, 21 * kMiB);
  d.drain();
  EXPECT_EQ(d.notifications(), 2u);
  EXPECT_EQ(d.failures(), 1u);
  EXPECT_EQ(d.dropped_bytes(), 0u);
}

TEST(ViewDropBehind, StopSendsWhatWasQueuedAndThenIgnoresReads) {
  FakeKernel k;
  ViewDropBehind d(small_options(), k.fn());
  read_in_order(d, 9, 0, 13 * kMiB);
  d.stop();
  EXPECT_EQ(k.calls.size(), 1u);
  read_in_order(d, 9, 13 * kMiB, 64 * kMiB);
  d.drain();
  EXPECT_EQ(k.calls.size(), 1u);
}

}  // namespace
}  // namespace dlfs::fs
