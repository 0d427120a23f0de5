#include "cache/verifier.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "cache/loader.h"
#include "cache_test_util.h"

namespace dlfs::cache {
namespace {

using test::TempDir;

struct Loaded {
  TempDir dir;
  std::unique_ptr<test::Dataset> d;
  std::unique_ptr<StorageBuffer> b;
};

std::unique_ptr<Loaded> load(uint64_t budget = ~0ull) {
  auto l = std::make_unique<Loaded>();
  test::make_dataset(l->dir.path(), 400, 20 << 10, 77);
  l->d = test::scan(l->dir.path());
  if (!l->d || !l->d->reader) return nullptr;
  l->b = test::make_buffer(l->d->manifest.total_bytes(), 32 << 10, budget);
  if (!l->b) return nullptr;
  Loader loader(*l->b, *l->d->reader, LoaderOptions{.threads = 2, .log_interval_s = 0, .label = "test"});
  loader.start();
  loader.wait();
  return l;
}

TEST(Verifier, CleanLoadIsOk) {
  auto l = load();
  ASSERT_TRUE(l);
  uint64_t calls = 0, last_done = 0, last_total = 0;
  VerifyReport r = verify_buffer(*l->b, *l->d->reader, [&](uint64_t done, uint64_t total) {
    ++calls;
    EXPECT_GE(done, last_done);
    last_done = done;
    last_total = total;
  });
  EXPECT_TRUE(r.ok()) << (r.mismatches.empty() ? "" : r.mismatches[0].what);
  EXPECT_EQ(r.extents_checked, l->b->extent_count());
  EXPECT_EQ(r.extents_skipped, 0u);
  EXPECT_EQ(r.bytes_checked, l->d->manifest.total_bytes());
  EXPECT_GE(calls, 1u);
  EXPECT_EQ(last_done, l->b->extent_count());
  EXPECT_EQ(last_total, l->b->extent_count());
}

TEST(Verifier, SkipsExtentsBeyondTheBudget) {
  auto l = load(5 * (32 << 10));
  ASSERT_TRUE(l);
  VerifyReport r = verify_buffer(*l->b, *l->d->reader);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.extents_checked, 5u);
  EXPECT_EQ(r.extents_skipped, l->b->extent_count() - 5);
  EXPECT_EQ(r.bytes_checked, 5u * (32 << 10));
}

TEST(Verifier, BackendByteChangedSameSize) {
  auto l = load();
  ASSERT_TRUE(l);
  uint32_t f = l->d->manifest.file_count() / 3;
  while (l->d->manifest.file_size(f) < 10) ++f;
  const uint64_t in_file = l->d->manifest.file_size(f) / 2;
  {
    int fd = ::open(l->d->path_of(f).c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    unsigned char c = 0;
    ASSERT_EQ(::pread(fd, &c, 1, static_cast<off_t>(in_file)), 1);
    c ^= 0x01;
    ASSERT_EQ(::pwrite(fd, &c, 1, static_cast<off_t>(in_file)), 1);
    ::close(fd);
  }
  const uint64_t e = l->b->extent_of(l->d->manifest.file_data_offset(f) + in_file);
  VerifyReport r = verify_buffer(*l->b, *l->d->reader);
  ASSERT_EQ(r.mismatches.size(), 1u);
  EXPECT_EQ(r.mismatches[0].extent, e);
  EXPECT_EQ(r.mismatches[0].data_offset, l->b->extent_begin(e));
  EXPECT_EQ(r.mismatches[0].length, l->b->extent_length(e));
  EXPECT_NE(r.mismatches[0].what.find("backend differs"), std::string::npos) << r.mismatches[0].what;
  EXPECT_EQ(r.extents_checked, l->b->extent_count());
}

TEST(Verifier, MemoryByteCorrupted) {
  auto l = load();
  ASSERT_TRUE(l);
  const uint64_t e = l->b->extent_count() / 2;
  l->b->extent_data(e)[123] ^= std::byte{0x80};
  VerifyReport r = verify_buffer(*l->b, *l->d->reader);
  ASSERT_EQ(r.mismatches.size(), 1u);
  EXPECT_EQ(r.mismatches[0].extent, e);
  EXPECT_NE(r.mismatches[0].what.find("memory differs"), std::string::npos) << r.mismatches[0].what;
}

TEST(Verifier, BackendFileGoneIsReportedWithItsName) {
  auto l = load();
  ASSERT_TRUE(l);
  uint32_t f = 3;
  while (l->d->manifest.file_size(f) == 0) ++f;
  std::filesystem::remove(l->d->path_of(f));
  VerifyReport r = verify_buffer(*l->b, *l->d->reader);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.mismatches[0].what.find(l->d->manifest.file_path(f)), std::string::npos) << r.mismatches[0].what;
}

}  // namespace
}  // namespace dlfs::cache
