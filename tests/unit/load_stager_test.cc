// Staging the load (cache/load_stager.h): while readers miss, the extents
// after the loader's cursor are read ahead into the page cache, nothing is
// staged while nobody misses, and a Loader with staging loads every byte
// right, copying staged extents from the page cache and evicting them.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cache/load_stager.h"
#include "cache/loader.h"
#include "cache_test_util.h"
#include "page_cache_util.h"

namespace dlfs::cache {
namespace {

using namespace std::chrono_literals;
using test::TempDir;
using test::cached_pages;
using test::dataset_cached;
using test::evict;
using test::page_cache_observable;

// Notes a reader miss every millisecond while alive, as readers passing
// files through do.
class MissingReaders {
 public:
  explicit MissingReaders(StorageBuffer& b) : t_([this, &b] {
      while (!stop_.load()) {
        b.reader_misses().note();
        std::this_thread::sleep_for(1ms);
      }
    }) {}
  ~MissingReaders() {
    stop_ = true;
    t_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread t_;
};

template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 10s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

struct Fixture {
  TempDir dir;
  std::unique_ptr<test::Dataset> d;
  std::unique_ptr<StorageBuffer> b;
};

std::unique_ptr<Fixture> make(int files, size_t max_size, uint64_t extent, uint64_t seed) {
  auto f = std::make_unique<Fixture>();
  test::make_dataset(f->dir.path(), files, max_size, seed);
  f->d = test::scan(f->dir.path());
  if (!f->d || !f->d->reader) return nullptr;
  f->b = test::make_buffer(f->d->manifest.total_bytes(), extent);
  if (!f->b) return nullptr;
  evict(*f->d);
  return f;
}

TEST(LoadStager, StagesNothingWhileNobodyMisses) {
  auto f = make(60, 40 << 10, 64 << 10, 3);
  ASSERT_TRUE(f);
  LoadStager stager(*f->b, *f->d->reader, StagerOptions{.files_in_flight = 4, .label = "idle"}, [] { return 0; });
  stager.start();
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(f->b->staged_extents(), 0u);
  EXPECT_FALSE(stager.active());
  if (page_cache_observable(f->dir.path())) EXPECT_EQ(dataset_cached(*f->d).first, 0u);
}

TEST(LoadStager, WhileReadersMissReadsAheadEveryExtentAfterTheLoaderCursor) {
  auto f = make(120, 40 << 10, 64 << 10, 5);
  ASSERT_TRUE(f);
  StorageBuffer& b = *f->b;
  const uint64_t total = b.cacheable_extents(), cursor = 3;
  ASSERT_GT(total, cursor + 4);
  MissingReaders misses(b);
  LoadStager stager(b, *f->d->reader, StagerOptions{.files_in_flight = 4, .label = "ahead"}, [&] { return cursor; });
  stager.start();
  ASSERT_TRUE(eventually([&] { return b.staged_extents() == total - cursor; }))
      << b.staged_extents() << " of " << total - cursor << " staged";
  for (uint64_t e = 0; e < total; ++e) EXPECT_EQ(b.staged(e), e >= cursor) << "extent " << e;
  stager.stop();
  EXPECT_FALSE(stager.active());
  if (!page_cache_observable(f->dir.path())) GTEST_SKIP() << "the dataset is on tmpfs: no page cache to observe";
  // Every page of the files wholly after the cursor is cached; none of
  // those wholly before it (the loader's part) was read.
  const auto& m = f->d->manifest;
  const uint64_t boundary = b.extent_begin(cursor);
  for (uint32_t file = 0; file < m.file_count(); ++file) {
    const uint64_t begin = m.file_data_offset(file), end = begin + m.file_size(file);
    auto [in, all] = cached_pages(f->d->path_of(file));
    if (begin >= boundary) EXPECT_EQ(in, all) << m.file_path(file);
    if (end <= boundary) EXPECT_EQ(in, 0u) << m.file_path(file);
  }
}

TEST(LoadStager, StaysAtMostMaxAheadBytesAheadOfTheLoaderAndStepsAsideThere) {
  auto f = make(120, 40 << 10, 64 << 10, 9);
  ASSERT_TRUE(f);
  StorageBuffer& b = *f->b;
  ASSERT_GT(b.cacheable_extents(), 8u);
  std::atomic<uint64_t> cursor{2};
  MissingReaders misses(b);
  LoadStager stager(b, *f->d->reader,
                    StagerOptions{.files_in_flight = 4, .label = "bound", .max_ahead_bytes = 3 * b.extent_size()},
                    [&] { return cursor.load(); });
  stager.start();
  ASSERT_TRUE(eventually([&] { return b.staged_extents() == 3; }));
  std::this_thread::sleep_for(100ms);  // readers still miss: it must not go further
  EXPECT_EQ(b.staged_extents(), 3u);
  for (uint64_t e = 2; e < 5; ++e) EXPECT_TRUE(b.staged(e)) << "extent " << e;
  EXPECT_FALSE(b.staged(5));
  EXPECT_TRUE(eventually([&] { return !stager.active(); }));  // the loader may load meanwhile
  cursor = 4;  // the loader moved on: two more fit
  ASSERT_TRUE(eventually([&] { return b.staged_extents() == 5; }));
  EXPECT_TRUE(b.staged(5) && b.staged(6));
}

TEST(LoadStager, LoaderWithStagingLoadsEveryByteAndEvictsWhatWasStaged) {
  auto f = make(200, 60 << 10, 128 << 10, 11);
  ASSERT_TRUE(f);
  StorageBuffer& b = *f->b;
  {
    MissingReaders misses(b);  // from before the load starts: readers pass files through
    Loader loader(b, *f->d->reader,
                  LoaderOptions{.threads = 2, .log_interval_s = 0, .label = "staged", .stage_files = 4});
    loader.start();
    // While readers miss the loader waits for the stager (but for its
    // one-extent-a-second floor), then loads what was staged.
    loader.wait();
    const LoadProgress p = loader.progress();
    EXPECT_TRUE(p.done);
    EXPECT_EQ(p.extents_failed, 0u);
    EXPECT_GT(p.extents_staged, 0u);
    EXPECT_EQ(p.extents_staged, b.staged_extents());
  }
  for (uint64_t e = 0; e < b.cacheable_extents(); ++e) {
    ASSERT_EQ(b.state(e), ExtentState::resident) << "extent " << e;
    const uint64_t len = b.extent_length(e);
    ASSERT_EQ(std::memcmp(b.extent_data(e), f->d->bytes.data() + b.extent_begin(e), len), 0) << "extent " << e;
    EXPECT_EQ(b.checksum(e), extent_checksum(std::span<const std::byte>(b.extent_data(e), len)));
  }
  if (!page_cache_observable(f->dir.path())) GTEST_SKIP() << "the dataset is on tmpfs: no page cache to observe";
  // Staged extents were copied from the page cache and evicted after
  // (CacheUse::drop_buffered): the node does not hold the dataset twice.
  // A page shared by two extents' pieces may stay: allow a few per file.
  auto [in, all] = dataset_cached(*f->d);
  EXPECT_LE(in, f->d->manifest.file_count()) << in << " of " << all << " pages still cached";
}

}  // namespace
}  // namespace dlfs::cache
