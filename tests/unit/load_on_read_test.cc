// Reads while loading: a read that needs an absent extent claims and loads it
// (cache/extent_fill.h through the buffer's fill_on_read), one that finds it
// being loaded waits (up to its load wait) or reads the backend, and the
// Loader counts every extent that settled, whoever loaded it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "cache/extent_fill.h"
#include "cache/fetcher.h"
#include "cache/loader.h"
#include "cache/sample_reader.h"
#include "cache_test_util.h"

namespace dlfs::cache {
namespace {

using test::Dataset;
using test::TempDir;

struct Fixture {
  TempDir dir;
  std::unique_ptr<Dataset> d;
  std::unique_ptr<StorageBuffer> b;
  std::unique_ptr<Fetcher> fetcher;
  std::unique_ptr<SampleReader> reader;
};

// `files` random files up to `max_size` bytes, extents of `extent` bytes.
std::unique_ptr<Fixture> make(int files, size_t max_size, uint64_t extent, uint64_t seed) {
  auto f = std::make_unique<Fixture>();
  test::make_dataset(f->dir.path(), files, max_size, seed);
  f->d = test::scan(f->dir.path());
  if (!f->d || !f->d->reader) return nullptr;
  const uint64_t total = f->d->manifest.total_bytes();
  f->b = test::make_buffer(total, extent);
  if (!f->b) return nullptr;
  f->fetcher = std::make_unique<Fetcher>(*f->d->reader, StripeMap(total, 1), 0);
  f->fetcher->set_local(f->b.get());
  f->reader = std::make_unique<SampleReader>(f->d->manifest, *f->b, *f->fetcher, nullptr, nullptr);
  return f;
}

// Reads [off, off + len) through the reader; checks the bytes against the files.
::testing::AssertionResult read_matches(const Fixture& f, uint64_t off, uint64_t len, ReadCounters& c,
                                        Gather& g) {
  g.reset(len);
  Status s = f.reader->read_bytes(off, len, g, c);
  if (!s) return ::testing::AssertionFailure() << "read " << off << "+" << len << ": " << s.message();
  auto got = test::flatten(g.iov(), g.count());
  if (got.size() != len || !std::equal(got.begin(), got.end(), f.d->bytes.begin() + static_cast<long>(off)))
    return ::testing::AssertionFailure() << "wrong bytes at " << off << "+" << len;
  return ::testing::AssertionSuccess();
}

bool in_buffer(const StorageBuffer& b, const Gather& g) {
  auto* p = static_cast<const std::byte*>(g.iov()[0].iov_base);
  return g.count() == 1 && p >= b.extent_data(0) && p < b.extent_data(0) + b.capacity_bytes();
}

TEST(LoadOnRead, ReaderLoadsTheAbsentExtentWhole) {
  auto f = make(300, 20 << 10, 32 << 10, 7);
  ASSERT_TRUE(f);
  StorageBuffer& b = *f->b;
  ASSERT_GT(b.extent_count(), 4u);
  ReadCounters c;
  Gather g;

  // No load running: a miss reads the backend and claims nothing.
  const uint64_t e = 3;
  const uint64_t off = b.extent_begin(e) + 100, len = 5000;
  ASSERT_TRUE(read_matches(*f, off, len, c, g));
  EXPECT_EQ(b.state(e), ExtentState::absent);
  EXPECT_EQ(c.extents_loaded.load(), 0u);
  EXPECT_EQ(c.fetched_bytes.load(), len);

  b.set_fill_on_read(std::make_shared<const ExtentFill>(b, *f->d->reader, 4096, "test"));
  ASSERT_TRUE(read_matches(*f, off, len, c, g));
  EXPECT_EQ(c.extents_loaded.load(), 1u);
  EXPECT_EQ(c.fetched_bytes.load(), len) << "the second read is served from the extent it loaded";
  EXPECT_EQ(c.memory_bytes.load(), len);
  EXPECT_TRUE(in_buffer(b, g)) << "referenced in place, not copied";
  ASSERT_EQ(b.state(e), ExtentState::resident);
  EXPECT_EQ(b.checksum(e), extent_checksum(test::slice(f->d->bytes, b.extent_begin(e), b.extent_length(e))));
  EXPECT_EQ(std::memcmp(b.extent_data(e), f->d->bytes.data() + b.extent_begin(e), b.extent_length(e)), 0);
  EXPECT_EQ(b.resident_extents(), 1u);
  EXPECT_EQ(b.settled_extents(), 1u);
  for (uint64_t x = 0; x < b.extent_count(); ++x) {
    if (x == e) continue;
    EXPECT_EQ(b.state(x), ExtentState::absent) << "only the extent read was loaded: " << x;
  }

  // A read across two absent extents loads both and is one run of memory.
  const uint64_t across = b.extent_begin(6) - 700;
  ASSERT_TRUE(read_matches(*f, across, 1400, c, g));
  EXPECT_EQ(c.extents_loaded.load(), 3u);
  EXPECT_TRUE(in_buffer(b, g));

  // The Loader then loads the rest and counts the extents readers loaded.
  Loader loader(b, *f->d->reader, LoaderOptions{.threads = 2, .log_interval_s = 0, .label = "test", .readers_load = true});
  loader.start();
  loader.wait();
  LoadProgress p = loader.progress();
  EXPECT_TRUE(p.done);
  EXPECT_EQ(p.extents_loaded, b.extent_count());
  EXPECT_EQ(p.bytes_loaded, f->d->manifest.total_bytes());
  EXPECT_EQ(p.extents_failed, 0u);
  loader.stop();
  EXPECT_EQ(b.fill_on_read(), nullptr) << "a stopped loader no longer lets readers load";
}

TEST(LoadOnRead, OnlyALoaderWithReadersLoadLetsReadersLoad) {
  auto f = make(100, 20 << 10, 32 << 10, 9);
  ASSERT_TRUE(f);
  StorageBuffer& b = *f->b;
  {
    Loader off(b, *f->d->reader, LoaderOptions{.threads = 1, .log_interval_s = 0, .label = "off"});
    off.start();
    EXPECT_EQ(b.fill_on_read(), nullptr) << "by default misses read the backend";
    off.wait();
  }
  auto g = make(100, 20 << 10, 32 << 10, 9);
  ASSERT_TRUE(g);
  Loader on(*g->b, *g->d->reader, LoaderOptions{.threads = 1, .log_interval_s = 0, .label = "on", .readers_load = true});
  on.start();
  EXPECT_NE(g->b->fill_on_read(), nullptr);
  on.wait();
  EXPECT_TRUE(on.progress().done);
  on.stop();
  EXPECT_EQ(g->b->fill_on_read(), nullptr);
}

TEST(LoadOnRead, ConcurrentReadersAndLoaderNeverServeWrongBytes) {
  for (int round = 0; round < 3; ++round) {
    auto f = make(800, 24 << 10, 16 << 10, 100 + round);
    ASSERT_TRUE(f);
    StorageBuffer& b = *f->b;
    const uint64_t total = f->d->manifest.total_bytes();
    // One thread with small preads: the readers race it for most extents.
    Loader loader(b, *f->d->reader, LoaderOptions{.threads = 1, .read_size = 4096, .log_interval_s = 0,
                                                  .label = "race", .readers_load = true});
    std::atomic<bool> go{false};
    std::atomic<int> bad{0};
    std::atomic<uint64_t> loaded_by_readers{0};
    std::vector<std::thread> readers;
    for (int t = 0; t < 4; ++t) {
      readers.emplace_back([&, t] {
        std::mt19937_64 rng(round * 10 + t);
        ReadCounters c;
        Gather g;
        while (!go.load()) std::this_thread::yield();
        for (int i = 0; i < 300; ++i) {
          const uint64_t off = rng() % total;
          const uint64_t len = std::min<uint64_t>(total - off, 1 + rng() % 40000);
          if (!read_matches(*f, off, len, c, g)) bad.fetch_add(1);
        }
        loaded_by_readers.fetch_add(c.extents_loaded.load());
      });
    }
    loader.start();
    go.store(true);
    for (auto& th : readers) th.join();
    loader.wait();
    EXPECT_EQ(bad.load(), 0);
    LoadProgress p = loader.progress();
    EXPECT_TRUE(p.done);
    EXPECT_EQ(p.extents_total, b.extent_count());
    EXPECT_EQ(p.extents_loaded, b.extent_count()) << "each extent counted once, whoever loaded it";
    EXPECT_EQ(p.bytes_loaded, total);
    EXPECT_EQ(p.extents_failed, 0u);
    EXPECT_EQ(b.settled_extents(), b.extent_count());
    EXPECT_LE(loaded_by_readers.load(), b.extent_count());
    for (uint64_t e = 0; e < b.extent_count(); ++e) {
      ASSERT_EQ(b.state(e), ExtentState::resident) << e;
      auto want = test::slice(f->d->bytes, b.extent_begin(e), b.extent_length(e));
      ASSERT_EQ(std::memcmp(b.extent_data(e), want.data(), want.size()), 0) << "extent " << e;
      ASSERT_EQ(b.checksum(e), extent_checksum(want)) << "extent " << e;
    }
  }
}

TEST(LoadOnRead, BackendFailureDegradesToTheBackendReadAndCountsOnce) {
  auto f = make(300, 20 << 10, 64 << 10, 23);
  ASSERT_TRUE(f);
  StorageBuffer& b = *f->b;
  const auto& m = f->d->manifest;
  // A file that shares its extent with the next (non-empty) file, which stays readable.
  uint32_t victim = m.file_count() / 3, neighbour = 0;
  for (;; ++victim) {
    ASSERT_LT(victim + 1, m.file_count());
    if (m.file_size(victim) == 0) continue;
    neighbour = victim + 1;
    while (neighbour < m.file_count() && m.file_size(neighbour) == 0) ++neighbour;
    if (neighbour < m.file_count() && b.extent_of(m.file_data_offset(neighbour)) ==
                                          b.extent_of(m.file_data_offset(victim) + m.file_size(victim) - 1))
      break;
  }
  const uint64_t e = b.extent_of(m.file_data_offset(neighbour));
  ASSERT_TRUE(std::filesystem::remove(f->d->path_of(victim)));
  b.set_fill_on_read(std::make_shared<const ExtentFill>(b, *f->d->reader, 8192, "broken"));

  ReadCounters c;
  Gather g;
  const uint64_t off = m.file_data_offset(neighbour);
  const uint64_t len = std::min<uint64_t>(m.file_size(neighbour), b.extent_begin(e) + b.extent_length(e) - off);
  ASSERT_TRUE(read_matches(*f, off, len, c, g)) << "the reader falls back to its own bytes from the backend";
  EXPECT_EQ(b.state(e), ExtentState::failed);
  EXPECT_EQ(b.failed_extents(), 1u);
  EXPECT_EQ(c.extents_loaded.load(), 1u);
  EXPECT_EQ(c.fetched_bytes.load(), len);
  ASSERT_TRUE(read_matches(*f, off, len, c, g));
  EXPECT_EQ(c.extents_loaded.load(), 1u) << "a failed extent is not claimed again";
  EXPECT_EQ(b.failed_extents(), 1u);

  // A read of the missing file itself fails and names it.
  g.reset(m.file_size(victim));
  Status s = f->reader->read_bytes(m.file_data_offset(victim), m.file_size(victim), g, c);
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find(m.file_path(victim)), std::string::npos) << s.message();

  Loader loader(b, *f->d->reader, LoaderOptions{.threads = 2, .log_interval_s = 0, .label = "broken"});
  loader.start();
  loader.wait();
  LoadProgress p = loader.progress();
  EXPECT_TRUE(p.done);
  const uint64_t first = b.extent_of(m.file_data_offset(victim));
  const uint64_t last = b.extent_of(m.file_data_offset(victim) + m.file_size(victim) - 1);
  EXPECT_EQ(p.extents_failed, last - first + 1) << "the failed extent counted once";
  EXPECT_EQ(p.extents_loaded + p.extents_failed, b.extent_count());
}

TEST(LoadOnRead, WaitForALoadingExtentTimesOutToTheBackend) {
  auto f = make(200, 20 << 10, 32 << 10, 31);
  ASSERT_TRUE(f);
  StorageBuffer& b = *f->b;
  auto fill = std::make_shared<const ExtentFill>(b, *f->d->reader, 4096, "stuck");
  b.set_fill_on_read(fill);
  const uint64_t e = 2;
  ASSERT_TRUE(b.try_mark_loading(e));  // a load that never finishes
  f->reader->set_load_wait(std::chrono::milliseconds(60));

  ReadCounters c;
  Gather g;
  const uint64_t off = b.extent_begin(e) + 10, len = 3000;
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(read_matches(*f, off, len, c, g));
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(60));
  EXPECT_EQ(c.load_waits.load(), 1u);
  EXPECT_EQ(c.load_wait_timeouts.load(), 1u);
  EXPECT_EQ(c.fetched_bytes.load(), len);
  EXPECT_EQ(b.state(e), ExtentState::loading) << "the reader does not take over another's claim";

  // With no wait at all the reader goes straight to the backend.
  f->reader->set_load_wait(std::chrono::nanoseconds(0));
  ASSERT_TRUE(read_matches(*f, off, len, c, g));
  EXPECT_EQ(c.load_waits.load(), 1u);
  EXPECT_EQ(c.fetched_bytes.load(), 2 * len);

  // A load that finishes during the wait: the reader is served from memory.
  f->reader->set_load_wait(std::chrono::seconds(30));
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(fill->load(e));
  });
  ASSERT_TRUE(read_matches(*f, off, len, c, g));
  finisher.join();
  EXPECT_EQ(c.load_waits.load(), 2u);
  EXPECT_EQ(c.load_wait_timeouts.load(), 1u);
  EXPECT_EQ(c.memory_bytes.load(), len);
  EXPECT_TRUE(in_buffer(b, g));
  EXPECT_EQ(b.state(e), ExtentState::resident);
}

}  // namespace
}  // namespace dlfs::cache
