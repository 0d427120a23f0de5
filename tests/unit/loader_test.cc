#include "cache/loader.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>

#include "cache_test_util.h"

namespace dlfs::cache {
namespace {

using test::Dataset;
using test::TempDir;

// Every resident extent holds exactly the byte space slice and the checksum of it.
void expect_extents_match(const StorageBuffer& b, const Dataset& d) {
  for (uint64_t e = 0; e < b.cacheable_extents(); ++e) {
    if (b.state(e) != ExtentState::resident) continue;
    auto want = test::slice(d.bytes, b.extent_begin(e), b.extent_length(e));
    ASSERT_EQ(std::memcmp(b.extent_data(e), want.data(), want.size()), 0) << "extent " << e;
    ASSERT_EQ(b.checksum(e), extent_checksum(want)) << "extent " << e;
  }
}

struct LoadCase {
  unsigned threads;
  uint64_t read_size;
};

class LoaderManySmallFiles : public ::testing::TestWithParam<LoadCase> {};

TEST_P(LoaderManySmallFiles, EveryExtentEqualsTheFilesInCanonicalOrder) {
  TempDir dir;
  test::make_dataset(dir.path(), 2000, 20 << 10, 42);
  auto d = test::scan(dir.path());
  ASSERT_TRUE(d && d->reader);
  ASSERT_GT(d->manifest.total_bytes(), 64u << 10);
  auto b = test::make_buffer(d->manifest.total_bytes(), 64 << 10);
  ASSERT_TRUE(b);

  Loader loader(*b, *d->reader,
                LoaderOptions{.threads = GetParam().threads, .read_size = GetParam().read_size,
                              .log_interval_s = 0.02, .label = "small"});
  loader.start();
  loader.wait();
  LoadProgress p = loader.progress();
  EXPECT_TRUE(p.done);
  EXPECT_EQ(p.extents_failed, 0u);
  EXPECT_EQ(p.extents_total, b->extent_count());
  EXPECT_EQ(p.extents_loaded, b->extent_count());
  EXPECT_EQ(p.bytes_total, d->manifest.total_bytes());
  EXPECT_EQ(p.bytes_loaded, d->manifest.total_bytes());
  EXPECT_EQ(p.eta_s, 0.0);
  EXPECT_GT(p.elapsed_s, 0.0);
  EXPECT_GT(p.rate_bps, 0.0);
  EXPECT_EQ(b->resident_bytes(), d->manifest.total_bytes());
  for (uint64_t e = 0; e < b->extent_count(); ++e) ASSERT_EQ(b->state(e), ExtentState::resident) << e;
  expect_extents_match(*b, *d);
  // Elapsed freezes once done.
  double t = loader.progress().elapsed_s;
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(loader.progress().elapsed_s, t);
}

INSTANTIATE_TEST_SUITE_P(ThreadsAndReadSizes, LoaderManySmallFiles,
                         ::testing::Values(LoadCase{1, 8 << 20}, LoadCase{4, 16 << 10}, LoadCase{3, 5000}));

TEST(Loader, BudgetSmallerThanDatasetLoadsOnlyCacheableExtents) {
  TempDir dir;
  test::make_dataset(dir.path(), 500, 20 << 10, 7);
  auto d = test::scan(dir.path());
  ASSERT_TRUE(d && d->reader);
  const uint64_t extent = 16 << 10;
  auto b = test::make_buffer(d->manifest.total_bytes(), extent, 10 * extent + extent / 2);
  ASSERT_TRUE(b);
  ASSERT_EQ(b->cacheable_extents(), 10u);
  ASSERT_GT(b->extent_count(), 10u);

  Loader loader(*b, *d->reader, LoaderOptions{.threads = 4, .log_interval_s = 0, .label = "budget"});
  loader.start();
  loader.wait();
  LoadProgress p = loader.progress();
  EXPECT_TRUE(p.done);
  EXPECT_EQ(p.extents_total, 10u);
  EXPECT_EQ(p.extents_loaded, 10u);
  EXPECT_EQ(p.bytes_total, 10 * extent);
  EXPECT_EQ(p.bytes_loaded, 10 * extent);
  EXPECT_EQ(b->resident_extents(), 10u);
  for (uint64_t e = 10; e < b->extent_count(); ++e) EXPECT_EQ(b->state(e), ExtentState::absent) << e;
  expect_extents_match(*b, *d);
}

TEST(Loader, NothingCacheableIsDoneAtOnce) {
  TempDir dir;
  test::make_dataset(dir.path(), 50, 4096, 1);
  auto d = test::scan(dir.path());
  ASSERT_TRUE(d && d->reader);
  auto b = test::make_buffer(d->manifest.total_bytes(), 64 << 10, 0);
  ASSERT_TRUE(b);
  Loader loader(*b, *d->reader, LoaderOptions{});
  EXPECT_TRUE(loader.progress().done);
  loader.start();
  loader.wait();
  EXPECT_TRUE(loader.progress().done);
  EXPECT_EQ(loader.progress().bytes_total, 0u);
  EXPECT_EQ(b->resident_extents(), 0u);
}

TEST(Loader, StopMidwayJoinsPromptly) {
  TempDir dir;
  // One sparse 512 MiB file read 4 KiB at a time: slow enough to stop midway.
  {
    int fd = ::open((dir.path() + "/big.bin").c_str(), O_CREAT | O_WRONLY, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 512ll << 20), 0);
    ::close(fd);
  }
  auto d = test::scan(dir.path());
  ASSERT_TRUE(d && d->reader);
  auto b = test::make_buffer(d->manifest.total_bytes(), 1 << 20);
  ASSERT_TRUE(b);
  Loader loader(*b, *d->reader,
                LoaderOptions{.threads = 2, .read_size = 4096, .log_interval_s = 0.01, .label = "stop"});
  loader.start();
  std::thread waiter([&] { loader.wait(); });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (loader.progress().extents_loaded == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_GT(loader.progress().extents_loaded, 0u);

  auto t0 = std::chrono::steady_clock::now();
  loader.stop();
  waiter.join();  // wait() returns once stopped
  double stop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(stop_s, 1.0);

  LoadProgress p = loader.progress();
  EXPECT_FALSE(p.done);
  EXPECT_LT(p.extents_loaded, p.extents_total);
  EXPECT_EQ(p.extents_loaded, b->resident_extents());
  for (uint64_t e = 0; e < b->extent_count(); ++e)
    ASSERT_NE(b->state(e), ExtentState::loading) << "extent " << e << " left half-loaded";
  expect_extents_match(*b, *d);
  loader.wait();  // returns at once after stop
}

TEST(Loader, FileDeletedAfterScanFailsOnlyItsExtents) {
  TempDir dir;
  test::make_dataset(dir.path(), 300, 20 << 10, 99);
  auto d = test::scan(dir.path());
  ASSERT_TRUE(d && d->reader);
  const uint64_t extent = 64 << 10;
  auto b = test::make_buffer(d->manifest.total_bytes(), extent);
  ASSERT_TRUE(b);

  uint32_t victim = d->manifest.file_count() / 2;
  while (d->manifest.file_size(victim) == 0) ++victim;
  ASSERT_TRUE(std::filesystem::remove(d->path_of(victim)));
  const uint64_t first = b->extent_of(d->manifest.file_data_offset(victim));
  const uint64_t last =
      b->extent_of(d->manifest.file_data_offset(victim) + d->manifest.file_size(victim) - 1);

  Loader loader(*b, *d->reader, LoaderOptions{.threads = 3, .log_interval_s = 0, .label = "deleted"});
  loader.start();
  loader.wait();
  LoadProgress p = loader.progress();
  EXPECT_TRUE(p.done);
  EXPECT_EQ(p.extents_failed, last - first + 1);
  EXPECT_EQ(p.extents_loaded + p.extents_failed, b->extent_count());
  EXPECT_EQ(p.eta_s, 0.0);
  for (uint64_t e = 0; e < b->extent_count(); ++e)
    EXPECT_EQ(b->state(e), e >= first && e <= last ? ExtentState::failed : ExtentState::resident) << e;
  expect_extents_match(*b, *d);
}

TEST(Loader, FailureLogIsRateLimited) {
  TempDir dir;
  test::make_dataset(dir.path(), 400, 20 << 10, 13);
  auto d = test::scan(dir.path());
  ASSERT_TRUE(d && d->reader);
  std::filesystem::remove_all(dir.path() + "/a");  // a quarter or so of the files, spread over the byte space
  auto b = test::make_buffer(d->manifest.total_bytes(), 8 << 10);
  ASSERT_TRUE(b);

  std::ostringstream log;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  {
    Loader loader(*b, *d->reader, LoaderOptions{.threads = 3, .log_interval_s = 0, .label = "flood"});
    loader.start();
    loader.wait();
    EXPECT_GT(loader.progress().extents_failed, 20u);
  }
  spdlog::set_default_logger(previous);

  std::string text = log.str();
  size_t per_extent = 0;
  for (size_t pos = 0; (pos = text.find("not loaded", pos)) != std::string::npos; ++pos) ++per_extent;
  EXPECT_EQ(per_extent, 5u) << text;
  EXPECT_NE(text.find("more extents failed to load"), std::string::npos) << text;
  EXPECT_NE(text.find("[flood] load done:"), std::string::npos) << text;
  EXPECT_NE(text.find("failed extents"), std::string::npos) << text;
}

TEST(Loader, SecondLoaderCountsWhatIsAlreadyResident) {
  TempDir dir;
  test::make_dataset(dir.path(), 100, 20 << 10, 5);
  auto d = test::scan(dir.path());
  ASSERT_TRUE(d && d->reader);
  auto b = test::make_buffer(d->manifest.total_bytes(), 32 << 10);
  ASSERT_TRUE(b);
  {
    Loader first(*b, *d->reader, LoaderOptions{.threads = 2, .log_interval_s = 0, .label = "test"});
    first.start();
    first.wait();
  }
  Loader again(*b, *d->reader, LoaderOptions{.threads = 2, .log_interval_s = 0, .label = "test"});
  again.start();
  again.wait();
  EXPECT_TRUE(again.progress().done);
  EXPECT_EQ(again.progress().bytes_loaded, d->manifest.total_bytes());
  EXPECT_EQ(b->resident_bytes(), d->manifest.total_bytes()) << "nothing loaded twice";
}

}  // namespace
}  // namespace dlfs::cache
