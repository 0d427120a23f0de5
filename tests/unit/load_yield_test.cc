// Readers first while loading (cache/load_yield.h): the miss clock, the rule
// a loader thread follows, the thread priority it switches, the readers that
// note their misses, the Loader that yields, and the loader's reads that
// leave the backend's page cache.
#include "cache/load_yield.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "cache/fetcher.h"
#include "cache/loader.h"
#include "cache/sample_reader.h"
#include "cache/thread_priority.h"
#include "cache_test_util.h"
#include "page_cache_util.h"

namespace dlfs::cache {
namespace {

using namespace std::chrono_literals;
using test::TempDir;

constexpr int64_t kMs = 1'000'000;

TEST(ReaderMisses, RecentOnlyWithinTheWindowAfterANote) {
  ReaderMisses m;
  const int64_t t = 1'000 * kMs;
  EXPECT_FALSE(m.recent(50ms, t)) << "never missed";
  m.note(t);
  EXPECT_EQ(m.last_ns(), t);
  EXPECT_TRUE(m.recent(50ms, t));
  EXPECT_TRUE(m.recent(50ms, t + 49 * kMs));
  EXPECT_FALSE(m.recent(50ms, t + 50 * kMs));
}

TEST(ReaderMisses, NotesWithinAGranuleKeepTheFirst) {
  ReaderMisses m;
  const int64_t t = 1'000 * kMs;
  m.note(t);
  m.note(t + ReaderMisses::kGranuleNs - 1);
  EXPECT_EQ(m.last_ns(), t) << "a burst writes the shared line once";
  m.note(t + ReaderMisses::kGranuleNs);
  EXPECT_EQ(m.last_ns(), t + ReaderMisses::kGranuleNs);
}

TEST(LoadYieldPolicy, BackgroundOnlyWhileReadersMiss) {
  LoadYieldPolicy p;  // 50 ms window, 1 s floor
  ReaderMisses m;
  const int64_t t = 10'000 * kMs;
  std::atomic<int64_t> progress{t - 100 * kMs};
  EXPECT_FALSE(p.background(m, t, progress)) << "no reader ever missed";
  m.note(t - 10 * kMs);
  EXPECT_TRUE(p.background(m, t, progress));
  EXPECT_FALSE(p.background(m, t + 60 * kMs, progress)) << "readers stopped missing";
  p.enabled = false;
  EXPECT_FALSE(p.background(m, t, progress));
  EXPECT_EQ(progress.load(), t - 100 * kMs) << "no floor granted";
}

TEST(LoadYieldPolicy, AStalledLoadGetsOneNormalExtentPerPeriod) {
  LoadYieldPolicy p;
  ReaderMisses m;
  const int64_t t = 10'000 * kMs;
  m.note(t);
  std::atomic<int64_t> progress{t - 1'500 * kMs};  // nothing settled for 1.5 s
  EXPECT_FALSE(p.background(m, t, progress)) << "the floor: this thread loads at normal priority";
  EXPECT_EQ(progress.load(), t);
  EXPECT_TRUE(p.background(m, t, progress)) << "the next thread stays in the background";
  m.note(t + 990 * kMs);  // readers still missing
  EXPECT_TRUE(p.background(m, t + 999 * kMs, progress));
  EXPECT_FALSE(p.background(m, t + 1'000 * kMs, progress)) << "a second later, the next grant";
}

TEST(LoadYieldPolicy, OneGrantAmongThreadsRacingForIt) {
  LoadYieldPolicy p;
  ReaderMisses m;
  const int64_t t = 10'000 * kMs;
  m.note(t);
  std::atomic<int64_t> progress{0};
  std::atomic<int> normal{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] { normal += p.background(m, t, progress) ? 0 : 1; });
  for (auto& th : threads) th.join();
  EXPECT_EQ(normal.load(), 1);
}

int ioprio_class_of_self() {
  const long v = ::syscall(SYS_ioprio_get, cache::ioprio::kWhoProcess, 0);
  return v < 0 ? -1 : cache::ioprio::class_of(v);
}

TEST(ThreadPriority, BackgroundIsIdleCpuAndIoThenBackAsFound) {
  // In a thread of its own: the test runner's thread keeps its priority.
  std::atomic<int> failures{0};
  int main_policy = ::sched_getscheduler(0);
  int main_io = ioprio_class_of_self();
  std::thread([&] {
    const int policy = ::sched_getscheduler(0);
    const long io = ::syscall(SYS_ioprio_get, cache::ioprio::kWhoProcess, 0);
    ThreadPriority p;
    EXPECT_FALSE(p.background());
    // Root (the CI runs as root) may leave SCHED_IDLE; otherwise only the I/O class changes.
    const int idle_policy = p.cpu_yields() ? SCHED_IDLE : policy;
    if (::geteuid() == 0) EXPECT_TRUE(p.cpu_yields());
    p.set_background(true);
    EXPECT_TRUE(p.background());
    EXPECT_EQ(::sched_getscheduler(0), idle_policy);
    EXPECT_EQ(ioprio_class_of_self(), cache::ioprio::kClassIdle);
    p.set_background(true);  // no change
    EXPECT_EQ(::sched_getscheduler(0), idle_policy);
    p.set_background(false);
    EXPECT_FALSE(p.background());
    EXPECT_EQ(::sched_getscheduler(0), policy);
    EXPECT_EQ(::syscall(SYS_ioprio_get, cache::ioprio::kWhoProcess, 0), io);
    failures += ::testing::Test::HasFailure();
  }).join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(::sched_getscheduler(0), main_policy) << "only the calling thread changes";
  EXPECT_EQ(ioprio_class_of_self(), main_io);
}

struct Fixture {
  TempDir dir;
  std::unique_ptr<test::Dataset> d;
  std::unique_ptr<StorageBuffer> b;
  std::unique_ptr<Fetcher> fetcher;
  std::unique_ptr<SampleReader> reader;
};

std::unique_ptr<Fixture> make(int files, size_t max_size, uint64_t extent, uint64_t budget = ~0ull) {
  auto f = std::make_unique<Fixture>();
  test::make_dataset(f->dir.path(), files, max_size, 3);
  f->d = test::scan(f->dir.path());
  if (!f->d || !f->d->reader) return nullptr;
  const uint64_t total = f->d->manifest.total_bytes();
  f->b = test::make_buffer(total, extent, budget);
  if (!f->b) return nullptr;
  f->fetcher = std::make_unique<Fetcher>(*f->d->reader, StripeMap(total, 1), 0);
  f->fetcher->set_local(f->b.get());
  f->reader = std::make_unique<SampleReader>(f->d->manifest, *f->b, *f->fetcher, nullptr, nullptr);
  return f;
}

Status read(const Fixture& f, uint64_t off, uint64_t len) {
  Gather g;
  ReadCounters c;
  g.reset(len);
  return f.reader->read_bytes(off, len, g, c);
}

TEST(ReadersNoteMisses, AReadOfBytesNotResidentYetIsNoted) {
  auto f = make(100, 8 << 10, 64 << 10);
  ASSERT_TRUE(f);
  ASSERT_EQ(f->b->reader_misses().last_ns(), 0);
  const int64_t before = ReaderMisses::now_ns();
  ASSERT_TRUE(read(*f, 100, 1000).is_ok());
  EXPECT_GE(f->b->reader_misses().last_ns(), before);
}

TEST(ReadersNoteMisses, ResidentReadsAndBytesBeyondTheBudgetAreNotMisses) {
  const uint64_t extent = 16 << 10;
  auto f = make(200, 8 << 10, extent, 2 * extent);  // two cacheable extents, the rest never loaded here
  ASSERT_TRUE(f);
  ASSERT_GT(f->b->extent_count(), 3u);
  Loader loader(*f->b, *f->d->reader, LoaderOptions{.threads = 1, .log_interval_s = 0, .label = "budget"});
  loader.start();
  loader.wait();
  ASSERT_EQ(f->b->resident_extents(), 2u);
  ASSERT_TRUE(read(*f, 10, 2 * extent - 20).is_ok());  // resident
  ASSERT_TRUE(read(*f, 3 * extent, 1000).is_ok());     // beyond the budget: the backend, but no loader will come
  EXPECT_EQ(f->b->reader_misses().last_ns(), 0);
}

// Notes a miss every millisecond until stopped: readers that keep missing.
struct MissingReaders {
  explicit MissingReaders(const StorageBuffer& b)
      : t([this, &b] {
          while (!stop) {
            b.reader_misses().note();
            std::this_thread::sleep_for(1ms);
          }
        }) {}
  ~MissingReaders() {
    stop = true;
    t.join();
  }
  std::atomic<bool> stop{false};
  std::thread t;
};

TEST(LoaderYields, ExtentsLoadInTheBackgroundWhileReadersMissAndAllArriveIntact) {
  auto f = make(400, 20 << 10, 32 << 10);
  ASSERT_TRUE(f);
  LoadProgress p;
  {
    MissingReaders readers(*f->b);
    Loader loader(*f->b, *f->d->reader, LoaderOptions{.threads = 2, .log_interval_s = 0, .label = "yield"});
    loader.start();
    loader.wait();
    p = loader.progress();
  }
  EXPECT_TRUE(p.done);
  EXPECT_EQ(p.extents_loaded, f->b->extent_count());
  EXPECT_GT(p.extents_background, 0u);
  for (uint64_t e = 0; e < f->b->extent_count(); ++e) {
    ASSERT_EQ(f->b->state(e), ExtentState::resident) << e;
    auto want = test::slice(f->d->bytes, f->b->extent_begin(e), f->b->extent_length(e));
    ASSERT_EQ(std::memcmp(f->b->extent_data(e), want.data(), want.size()), 0) << e;
  }
}

TEST(LoaderYields, NoMissesNoBackgroundAndTheSwitchCanBeOff) {
  auto f = make(200, 20 << 10, 32 << 10);
  ASSERT_TRUE(f);
  {
    Loader loader(*f->b, *f->d->reader, LoaderOptions{.threads = 2, .log_interval_s = 0, .label = "idle"});
    loader.start();
    loader.wait();
    EXPECT_TRUE(loader.progress().done);
    EXPECT_EQ(loader.progress().extents_background, 0u);
  }
  auto g = make(200, 20 << 10, 32 << 10);
  ASSERT_TRUE(g);
  MissingReaders readers(*g->b);
  LoaderOptions o{.threads = 2, .log_interval_s = 0, .label = "off"};
  o.yield.enabled = false;
  Loader loader(*g->b, *g->d->reader, o);
  loader.start();
  loader.wait();
  EXPECT_TRUE(loader.progress().done);
  EXPECT_EQ(loader.progress().extents_background, 0u);
}

// Pages of `path` in the page cache (mincore).
size_t cached_pages(const std::string& path) { return test::cached_pages(path).first; }

TEST(BackendCacheUse, DropLeavesNoPagesOfWhatWasRead) {
  TempDir dir;
  struct statfs sf {};
  ASSERT_EQ(::statfs(dir.path().c_str(), &sf), 0);
  if (sf.f_type == TMPFS_MAGIC) GTEST_SKIP() << dir.path() << " is on tmpfs: its pages are the file, never dropped";
  const size_t size = 1 << 20;
  std::mt19937_64 rng(5);
  test::write_file(dir.path() + "/one.bin", test::random_bytes(rng, size));
  {
    int fd = ::open((dir.path() + "/one.bin").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fsync(fd), 0);  // clean pages: the only kind DONTNEED drops
    ::close(fd);
  }
  auto d = test::scan(dir.path());
  ASSERT_TRUE(d && d->reader);
  const std::string path = d->path_of(0);
  std::vector<std::byte> out(size);
  ASSERT_TRUE(d->reader->read(0, out, CacheUse::keep).is_ok());
  const size_t kept = cached_pages(path);
  if (kept == 0) GTEST_SKIP() << "the file system of " << path << " shows no page cache (mincore)";
  ASSERT_TRUE(d->reader->read(0, out, CacheUse::drop).is_ok());
  EXPECT_EQ(std::memcmp(out.data(), d->bytes.data(), size), 0);
  EXPECT_LT(cached_pages(path), kept / 4) << "kept " << kept << " pages after a keep read";
}

// A miss on this node's bytes that fit its memory leaves no page-cache copy
// (the loader will hold them); bytes beyond the budget keep it.
TEST(BackendCacheUse, FetcherDropsOnlyBytesThisNodeWillLoad) {
  TempDir dir;
  struct statfs sf {};
  ASSERT_EQ(::statfs(dir.path().c_str(), &sf), 0);
  if (sf.f_type == TMPFS_MAGIC) GTEST_SKIP() << dir.path() << " is on tmpfs";
  const size_t size = 1 << 20;
  std::mt19937_64 rng(6);
  for (const char* name : {"a.bin", "b.bin"}) {
    test::write_file(dir.path() + "/" + name, test::random_bytes(rng, size));
    int fd = ::open((dir.path() + "/" + name).c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fsync(fd), 0);
    ::close(fd);
  }
  auto d = test::scan(dir.path());
  ASSERT_TRUE(d && d->reader);
  ASSERT_EQ(d->manifest.file_count(), 2u);
  auto b = test::make_buffer(2 * size, size, size);  // a.bin fits the budget, b.bin does not
  ASSERT_TRUE(b);
  ASSERT_EQ(b->cacheable_extents(), 1u);
  Fetcher fetcher(*d->reader, StripeMap(2 * size, 1), 0);
  fetcher.set_local(b.get());
  std::vector<std::byte> out(size);
  ASSERT_TRUE(fetcher.read(size, out).is_ok());  // b.bin
  const size_t kept = cached_pages(d->path_of(1));
  if (kept == 0) GTEST_SKIP() << "the file system of " << d->path_of(1) << " shows no page cache (mincore)";
  ASSERT_TRUE(d->reader->read(0, out).is_ok());  // a.bin into the page cache
  ASSERT_GT(cached_pages(d->path_of(0)), 0u);
  ASSERT_TRUE(fetcher.read(0, out).is_ok());     // the miss
  EXPECT_EQ(std::memcmp(out.data(), d->bytes.data(), size), 0);
  EXPECT_LT(cached_pages(d->path_of(0)), kept / 4);
  EXPECT_GT(cached_pages(d->path_of(1)), kept / 2) << "beyond the budget: kept";
}

}  // namespace
}  // namespace dlfs::cache
