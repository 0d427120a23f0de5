// Bytes readers give while a dataset loads (cache/given_ranges.h,
// StorageBuffer::give): a miss's backend bytes are kept in the buffer and the
// loader reads only the rest of each extent.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "cache/fetcher.h"
#include "cache/given_ranges.h"
#include "cache/loader.h"
#include "cache_test_util.h"
#include "page_cache_util.h"

namespace dlfs::cache {
namespace {

namespace fs = std::filesystem;
using Range = GivenRanges::Range;

std::vector<std::pair<uint64_t, uint64_t>> pairs(const std::vector<Range>& v) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const Range& r : v) out.emplace_back(r.begin, r.end);
  return out;
}

using Pairs = std::vector<std::pair<uint64_t, uint64_t>>;

TEST(GivenRanges, MergesOverlappingAndAdjacentRangesInOrder) {
  GivenRanges g;
  g.add(7, 30, 40);
  g.add(7, 10, 20);
  g.add(7, 20, 25);  // adjacent to [10, 20): one range
  g.add(7, 5, 8);
  g.add(7, 50, 60);
  g.add(7, 12, 13);  // inside [10, 25): nothing changes
  g.add(7, 41, 41);  // empty: ignored
  g.add(8, 0, 4);    // another extent
  g.add(7, 24, 31);  // bridges [10, 25) and [30, 40)
  EXPECT_EQ(pairs(g.take(7)), (Pairs{{5, 8}, {10, 40}, {50, 60}}));
  EXPECT_TRUE(g.take(7).empty()) << "take forgets the extent";
  EXPECT_EQ(pairs(g.take(8)), (Pairs{{0, 4}}));
  EXPECT_TRUE(g.take(9).empty());
}

TEST(StorageBufferGive, TakesBytesOnlyWhileAcceptedAndOnlyIntoAbsentExtents) {
  const uint64_t extent = 64 << 10;
  auto b = test::make_buffer(4 * extent, extent, 3 * extent);  // extent 3 has no memory
  ASSERT_TRUE(b);
  ASSERT_EQ(b->cacheable_extents(), 3u);
  std::mt19937_64 rng(11);
  const auto bytes = test::random_bytes(rng, 4 * extent);
  auto span_at = [&](uint64_t off, uint64_t len) { return std::span<const std::byte>(bytes).subspan(off, len); };

  EXPECT_EQ(b->give(100, span_at(100, 1000)), 0u) << "no loader accepts them yet";
  EXPECT_TRUE(b->take_given(0).empty());

  b->set_accepts_given(true);
  // Across the edge of extents 0 and 1.
  const uint64_t off = extent - 3000, len = 5000;
  EXPECT_EQ(b->give(off, span_at(off, len)), len);
  EXPECT_EQ(std::memcmp(b->extent_data(0) + off, bytes.data() + off, 3000), 0);
  EXPECT_EQ(std::memcmp(b->extent_data(1), bytes.data() + extent, 2000), 0);
  EXPECT_EQ(b->given_bytes(), len);

  ASSERT_TRUE(b->try_mark_loading(2));  // claimed: the loader reads it, gifts are refused
  EXPECT_EQ(b->give(2 * extent + 10, span_at(2 * extent + 10, 100)), 0u);
  EXPECT_EQ(b->give(3 * extent, span_at(3 * extent, 100)), 0u) << "beyond the budget";
  EXPECT_EQ(b->given_bytes(), len);

  EXPECT_EQ(pairs(b->take_given(0)), (Pairs{{off, extent}}));
  EXPECT_EQ(pairs(b->take_given(1)), (Pairs{{0, 2000}}));
  EXPECT_TRUE(b->take_given(2).empty());

  b->set_accepts_given(false);
  EXPECT_EQ(b->give(off, span_at(off, len)), 0u);
}

struct Fixture {
  test::TempDir dir;
  std::unique_ptr<test::Dataset> d;
  std::unique_ptr<StorageBuffer> b;
  std::unique_ptr<Fetcher> fetcher;
};

std::unique_ptr<Fixture> make(uint64_t seed) {
  auto f = std::make_unique<Fixture>();
  test::make_dataset(f->dir.path(), 300, 20 << 10, seed);
  f->d = test::scan(f->dir.path());
  if (!f->d || !f->d->reader) return nullptr;
  f->b = test::make_buffer(f->d->manifest.total_bytes(), 64 << 10);
  if (!f->b) return nullptr;
  const uint64_t total = f->d->manifest.total_bytes();
  f->fetcher = std::make_unique<Fetcher>(*f->d->reader, StripeMap(total, 1), 0);
  f->fetcher->set_local(f->b.get());
  return f;
}

// Reads [off, off + len) through the fetcher (a miss: nothing is resident)
// and checks the bytes.
void miss(const Fixture& f, uint64_t off, uint64_t len) {
  std::vector<std::byte> out(len);
  ASSERT_TRUE(f.fetcher->read(off, out).is_ok());
  ASSERT_EQ(std::memcmp(out.data(), f.d->bytes.data() + off, len), 0) << off << "+" << len;
}

void expect_resident_and_right(const StorageBuffer& b, const test::Dataset& d, uint64_t e) {
  ASSERT_EQ(b.state(e), ExtentState::resident) << "extent " << e;
  auto want = test::slice(d.bytes, b.extent_begin(e), b.extent_length(e));
  EXPECT_EQ(std::memcmp(b.extent_data(e), want.data(), want.size()), 0) << "extent " << e;
  EXPECT_EQ(b.checksum(e), extent_checksum(want)) << "extent " << e;
}

// Half of each extent given, at its start, middle or end: the loader fills
// the gaps at the right offsets and checksums the whole extent.
TEST(GivenBytes, TheLoaderFillsTheGapsAroundWhatReadersGave) {
  auto f = make(21);
  ASSERT_TRUE(f);
  StorageBuffer& b = *f->b;
  ASSERT_GT(b.extent_count(), 6u);
  b.set_accepts_given(true);  // as a running loader does; given before it starts, so no race with it
  uint64_t given = 0;
  for (uint64_t e = 0; e < b.extent_count(); ++e) {
    const uint64_t len = b.extent_length(e), half = len / 2;
    const uint64_t at = e % 3 == 0 ? 0 : e % 3 == 1 ? len / 4 : len - half;
    miss(*f, b.extent_begin(e) + at, half);
    given += half;
  }
  ASSERT_EQ(b.given_bytes(), given);
  Loader loader(b, *f->d->reader, LoaderOptions{.threads = 2, .read_size = 8 << 10, .log_interval_s = 0, .label = "gaps"});
  loader.start();
  loader.wait();
  EXPECT_EQ(loader.progress().bytes_given, given);
  EXPECT_EQ(loader.progress().extents_failed, 0u);
  for (uint64_t e = 0; e < b.extent_count(); ++e) expect_resident_and_right(b, *f->d, e);
}

// What was given is not read again: with every backend file gone after the
// readers read even extents whole, those still load (from the gifts) and
// the odd ones fail (the loader found the files gone).
TEST(GivenBytes, WhatReadersGaveIsNotReadFromTheBackendAgain) {
  auto f = make(22);
  ASSERT_TRUE(f);
  StorageBuffer& b = *f->b;
  ASSERT_GT(b.extent_count(), 4u);
  b.set_accepts_given(true);
  for (uint64_t e = 0; e < b.extent_count(); e += 2) miss(*f, b.extent_begin(e), b.extent_length(e));
  for (const auto& entry : fs::recursive_directory_iterator(f->dir.path()))
    if (entry.is_regular_file()) fs::remove(entry.path());
  Loader loader(b, *f->d->reader, LoaderOptions{.threads = 2, .log_interval_s = 0, .label = "gone"});
  loader.start();
  loader.wait();
  for (uint64_t e = 0; e < b.extent_count(); ++e) {
    if (e % 2 == 0) {
      expect_resident_and_right(b, *f->d, e);
    } else {
      EXPECT_EQ(b.state(e), ExtentState::failed) << "extent " << e << " needed the backend, whose files are gone";
    }
  }
}

// A miss of a staged extent (read ahead into the page cache for the loader)
// gives its bytes to the buffer, so the loader skips them: the miss itself
// evicts their pages, or nobody would and the node would hold them twice.
TEST(GivenBytes, AMissOfAStagedExtentGivesItsBytesAndEvictsItsPages) {
  auto f = make(23);
  ASSERT_TRUE(f);
  if (!test::page_cache_observable(f->dir.path())) GTEST_SKIP() << f->dir.path() << " is on tmpfs";
  StorageBuffer& b = *f->b;
  test::evict(*f->d);
  const uint64_t e = 1;
  const uint64_t begin = b.extent_begin(e), len = b.extent_length(e);
  // Stage it as the stager does: every file piece of it into the page cache.
  std::vector<std::byte> scratch(len);
  ASSERT_TRUE(f->d->reader->read(begin, scratch, CacheUse::keep).is_ok());
  b.mark_staged(e);
  uint32_t first = f->d->manifest.file_at(begin), last = f->d->manifest.file_at(begin + len - 1);
  size_t cached = 0;
  for (uint32_t file = first; file <= last; ++file) cached += test::cached_pages(f->d->path_of(file)).first;
  if (cached == 0) GTEST_SKIP() << "the file system shows no page cache (mincore)";

  b.set_accepts_given(true);
  miss(*f, begin, len);
  EXPECT_EQ(b.given_bytes(), len) << "the miss gives the whole staged extent";
  size_t left = 0;
  for (uint32_t file = first; file <= last; ++file) {
    // Files that straddle the extent's edges keep their pages outside it.
    const uint64_t fb = f->d->manifest.file_data_offset(file), fe = fb + f->d->manifest.file_size(file);
    if (fb >= begin && fe <= begin + len) left += test::cached_pages(f->d->path_of(file)).first;
  }
  EXPECT_LT(left, cached / 4) << cached << " pages staged, " << left << " still cached after the miss";
}

}  // namespace
}  // namespace dlfs::cache
