#include "cache/verifier.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
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
  // Whether stat saw the write (mtime moved) or only the contents differ
  // (same clock tick), verify names the file as changed, not as corruption.
  VerifyReport r = verify_buffer(*l->b, *l->d->reader);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.mismatches.empty()) << r.mismatches[0].what;
  EXPECT_GE(r.extents_changed, 1u);  // 2 if stat saw it and the file spans two extents
  ASSERT_EQ(r.changed_count, 1u);
  ASSERT_EQ(r.changed.size(), 1u);
  EXPECT_EQ(r.changed[0].path, l->d->manifest.file_path(f));
  EXPECT_TRUE(l->d->reader->changed_files().contains(f)) << "later backend reads of it must fail";
  EXPECT_EQ(r.extents_checked, l->b->extent_count());
}

TEST(Verifier, ContentChangeThatStatCannotSeeIsNamed) {
  auto l = load();
  ASSERT_TRUE(l);
  uint32_t f = l->d->manifest.file_count() / 2;
  while (l->d->manifest.file_size(f) < 10) ++f;
  // One byte flipped, then size and mtime put back as scanned: only the
  // contents tell, and verify compares them.
  const std::string path = l->d->path_of(f);
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  {
    int fd = ::open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    unsigned char c = 0;
    ASSERT_EQ(::pread(fd, &c, 1, 3), 1);
    c ^= 0x10;
    ASSERT_EQ(::pwrite(fd, &c, 1, 3), 1);
    timespec t[2] = {before.st_atim, before.st_mtim};
    ASSERT_EQ(::futimens(fd, t), 0);
    ::close(fd);
  }
  VerifyReport r = verify_buffer(*l->b, *l->d->reader);
  EXPECT_TRUE(r.mismatches.empty()) << r.mismatches[0].what;
  ASSERT_EQ(r.changed.size(), 1u);
  EXPECT_EQ(r.changed[0].path, l->d->manifest.file_path(f));
  EXPECT_NE(r.changed[0].what.find("bytes differ"), std::string::npos) << r.changed[0].what;
  std::vector<std::byte> one(1);
  EXPECT_EQ(l->d->reader->read_file(f, 0, one).err(), EIO) << "a file verify found changed is still read";
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
  EXPECT_TRUE(r.mismatches.empty()) << r.mismatches[0].what;
  ASSERT_EQ(r.changed.size(), 1u);
  EXPECT_EQ(r.changed[0].path, l->d->manifest.file_path(f));
  EXPECT_EQ(r.changed[0].what, "vanished");
}

}  // namespace
}  // namespace dlfs::cache
