// ReadRing and Prefetcher: samples fetched ahead in order, right bytes, slots
// reused once the reader moves on, resident positions skipped, failures left
// to the reader, and several streams served together.
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "cache/read_ring.h"

namespace dlfs::cache {
namespace {

// Sample k is 100 + k % 50 bytes of value k % 251.
size_t len_of(uint64_t k) { return 100 + k % 50; }

std::shared_ptr<ReadRing> ring_of(uint64_t count, std::atomic<int>* fetches, uint64_t fail_at = ~0ull,
                                  uint64_t resident_every = 0) {
  return std::make_shared<ReadRing>(
      8, 256, count,
      [=](uint64_t k, std::byte* dst, size_t cap, size_t& len) -> Status {
        fetches->fetch_add(1);
        if (k == fail_at) return Status(EIO, "backend error");
        len = len_of(k);
        if (len > cap) return Status(EFBIG, "too big");
        std::memset(dst, static_cast<int>(k % 251), len);
        return Status::ok();
      },
      [=](uint64_t k) { return resident_every == 0 || k % resident_every != 0; });
}

bool wait_for(const std::function<bool()>& cond) {
  for (int i = 0; i < 2000 && !cond(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return cond();
}

TEST(ReadRing, ReaderGetsEverySampleAheadAndInOrder) {
  std::atomic<int> fetches{0};
  Prefetcher pre(2);
  auto ring = ring_of(100, &fetches);
  pre.add(ring);
  uint64_t hits = 0;
  std::vector<std::byte> buf(256);
  for (uint64_t k = 0; k < 100; ++k) {
    ring->advance(k);
    pre.wake();
    if (k == 0) ASSERT_TRUE(wait_for([&] { return fetches.load() >= 8; })) << "nothing prefetched";
    wait_for([&] { return fetches.load() > static_cast<int>(k); });
    if (ring->take(k, 0, len_of(k), buf.data())) {
      ++hits;
      for (size_t i = 0; i < len_of(k); ++i) ASSERT_EQ(static_cast<int>(buf[i]), static_cast<int>(k % 251)) << k;
    }
  }
  EXPECT_GT(hits, 90u);
  EXPECT_LE(fetches.load(), 100);  // each sample fetched at most once
}

TEST(ReadRing, PartialTakesAndResidentPositionsAndFailures) {
  std::atomic<int> fetches{0};
  Prefetcher pre(1);
  auto ring = ring_of(20, &fetches, /*fail_at=*/3, /*resident_every=*/4);
  pre.add(ring);
  ring->advance(0);
  pre.wake();
  ASSERT_TRUE(wait_for([&] { return fetches.load() >= 5; }));  // 1, 2, 3, 5, 6 (0 and 4 resident)
  std::vector<std::byte> buf(256);
  EXPECT_FALSE(ring->take(0, 0, 10, buf.data())) << "resident position 0 was fetched";
  EXPECT_FALSE(ring->take(3, 0, 10, buf.data())) << "a failed fetch must be left to the reader";
  ASSERT_TRUE(ring->take(1, 0, 50, buf.data()));  // first half
  ASSERT_TRUE(ring->take(1, 50, len_of(1) - 50, buf.data()));  // the rest, then the slot is free
  EXPECT_EQ(static_cast<int>(buf[0]), 1);
}

TEST(Prefetcher, ServesSeveralStreamsTogether) {
  std::atomic<int> fa{0}, fb{0};
  Prefetcher pre(2);
  auto a = ring_of(1000, &fa), b = ring_of(1000, &fb);
  pre.add(a);
  pre.add(b);
  a->advance(0);
  b->advance(0);
  pre.wake();
  ASSERT_TRUE(wait_for([&] { return fa.load() >= 8 && fb.load() >= 8; })) << fa << " " << fb;
  // Each ring is full (8 slots): nothing more until its reader moves.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(fa.load(), 8);
  EXPECT_EQ(fb.load(), 8);
}

// A batching ring: positions arrive in batches of at most the limit, every
// needed position exactly once, failures of single items left to the reader.
TEST(ReadRing, BatchesClaimSeveralPositionsAndPublishEachItem) {
  std::atomic<int> fetches{0};
  std::atomic<size_t> largest{0}, batches{0};
  auto ring = ring_of(64, &fetches, /*fail_at=*/~0ull, /*resident_every=*/5);
  ring->set_batch(
      [&](std::span<ReadRing::BatchItem> items) {
        batches.fetch_add(1);
        size_t seen = largest.load();
        while (items.size() > seen && !largest.compare_exchange_weak(seen, items.size())) {
        }
        for (auto& it : items) {
          fetches.fetch_add(1);
          it.len = len_of(it.k);
          std::memset(it.dst, static_cast<int>(it.k % 251), it.len);
          it.status = it.k == 7 ? Status(EIO, "one failed get") : Status::ok();
        }
      },
      4);
  Prefetcher pre(1);
  pre.add(ring);
  std::vector<std::byte> buf(256);
  uint64_t hits = 0, needed = 0;
  for (uint64_t k = 0; k < 64; ++k) {
    ring->advance(k);
    pre.wake();
    if (k % 5 == 0) continue;  // resident: never fetched
    ++needed;
    wait_for([&] { return ring->ready(k) || k == 7; });
    if (ring->take(k, 0, len_of(k), buf.data())) {
      ++hits;
      for (size_t i = 0; i < len_of(k); ++i) ASSERT_EQ(static_cast<int>(buf[i]), static_cast<int>(k % 251)) << k;
    } else {
      EXPECT_EQ(k, 7u) << "only the failed item is left to the reader";
    }
  }
  EXPECT_EQ(hits, needed - 1);
  EXPECT_EQ(fetches.load(), static_cast<int>(needed)) << "each needed position fetched exactly once";
  EXPECT_LE(largest.load(), 4u);
  EXPECT_GT(largest.load(), 1u) << "the prefetcher never batched";
  EXPECT_LT(batches.load(), needed);
}

}  // namespace
}  // namespace dlfs::cache
