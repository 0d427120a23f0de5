// Reads that leave nothing in the page cache (CacheUse::drop) go past it
// with O_DIRECT where offset and destination are aligned: the right bytes,
// the tail of a file through the bounce block, the page cache untouched
// (mincore), the ordinary path for unaligned reads, a file shortened after
// the scan still an EIO naming it. (A file system that refuses O_DIRECT is
// read the ordinary way: 19_faulty_backend, which makes one; tmpfs has
// O_DIRECT since Linux 6.6.) Plus Gather::alloc_aligned, which gives a raw
// read's miss an aligned destination.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>

#include "cache/backend_reader.h"
#include "cache/gather.h"
#include "cache_test_util.h"

namespace dlfs::cache {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

constexpr size_t kA = kDirectAlign;

// A kA-aligned buffer of n bytes (+ a guard page's worth past it, filled with
// 0xee, to see a read never writes beyond n).
struct Aligned {
  explicit Aligned(size_t n) : size(n) {
    void* p = nullptr;
    EXPECT_EQ(::posix_memalign(&p, kA, n + kA), 0);
    mem.reset(static_cast<std::byte*>(p));
    std::memset(p, 0xee, n + kA);
  }
  std::span<std::byte> span(size_t off = 0) { return {mem.get() + off, size - off}; }
  bool guard_intact() const {
    for (size_t i = size; i < size + kA; ++i)
      if (mem.get()[i] != std::byte{0xee}) return false;
    return true;
  }
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> mem;
  size_t size;
};

// Pages of `path` in the page cache.
size_t cached_pages(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  const size_t size = fs::file_size(path);
  if (size == 0) return ::close(fd), 0;
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  EXPECT_NE(m, MAP_FAILED);
  std::vector<unsigned char> v((size + 4095) / 4096);
  EXPECT_EQ(::mincore(m, size, v.data()), 0);
  ::munmap(m, size);
  size_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n;
}

void evict(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// tmpfs before Linux 6.6 has no O_DIRECT: those tests then skip.
bool on_tmpfs(const std::string& path) {
  struct statfs s {};
  return ::statfs(path.c_str(), &s) == 0 && s.f_type == 0x01021994;  // TMPFS_MAGIC
}

// A temporary directory where O_DIRECT works, and one scanned file in it.
class BackendDirect : public ::testing::Test {
 protected:
  void SetUp() override {
    if (on_tmpfs(tmp_.path())) GTEST_SKIP() << "the temporary directory is on tmpfs (no O_DIRECT before Linux 6.6)";
  }
  // One file of `size` random bytes, scanned (with its reader).
  std::unique_ptr<test::Dataset> one_file(size_t size) {
    std::mt19937_64 rng(1);
    test::write_file(tmp_ / "data" / "f.bin", test::random_bytes(rng, size));
    auto d = test::scan((tmp_ / "data").string());
    EXPECT_TRUE(d && d->reader);
    return d && d->reader ? std::move(d) : nullptr;
  }
  TempDir tmp_;
};

TEST_F(BackendDirect, AlignedDropReadsGoPastThePageCacheWithTheRightBytes) {
  const size_t size = 3 * kA + 100;  // a partial last block: the bounce
  auto d = one_file(size);
  ASSERT_TRUE(d);
  const std::string path = d->path_of(0);
  evict(path);
  ASSERT_EQ(cached_pages(path), 0u);
  Aligned buf(size);
  ASSERT_TRUE(d->reader->read_file(0, 0, buf.span(), CacheUse::drop).is_ok());
  EXPECT_EQ(std::memcmp(buf.mem.get(), d->bytes.data(), size), 0) << "wrong bytes";
  EXPECT_TRUE(buf.guard_intact()) << "wrote past the destination";
  EXPECT_EQ(d->reader->direct_reads(), 1u);
  EXPECT_TRUE(d->reader->direct_io());
  EXPECT_EQ(cached_pages(path), 0u) << "a direct read left pages in the page cache";

  // From an aligned offset inside the file, whole blocks only.
  Aligned mid(kA);
  ASSERT_TRUE(d->reader->read_file(0, kA, mid.span(), CacheUse::drop).is_ok());
  EXPECT_EQ(std::memcmp(mid.mem.get(), d->bytes.data() + kA, kA), 0);
  EXPECT_EQ(d->reader->direct_reads(), 2u);
}

TEST_F(BackendDirect, UnalignedOrKeptReadsTakeTheOrdinaryPath) {
  const size_t size = 5 * kA;
  auto d = one_file(size);
  ASSERT_TRUE(d);
  Aligned buf(size);
  // Unaligned destination, unaligned offset, a read smaller than a block, and a kept read.
  ASSERT_TRUE(d->reader->read_file(0, 0, buf.span(8).first(2 * kA), CacheUse::drop).is_ok());
  EXPECT_EQ(std::memcmp(buf.mem.get() + 8, d->bytes.data(), 2 * kA), 0);
  ASSERT_TRUE(d->reader->read_file(0, 100, buf.span().first(kA), CacheUse::drop).is_ok());
  EXPECT_EQ(std::memcmp(buf.mem.get(), d->bytes.data() + 100, kA), 0);
  ASSERT_TRUE(d->reader->read_file(0, 0, buf.span().first(512), CacheUse::drop).is_ok());
  EXPECT_EQ(std::memcmp(buf.mem.get(), d->bytes.data(), 512), 0);
  ASSERT_TRUE(d->reader->read_file(0, 0, buf.span(), CacheUse::keep).is_ok());
  EXPECT_EQ(std::memcmp(buf.mem.get(), d->bytes.data(), size), 0);
  EXPECT_EQ(d->reader->direct_reads(), 0u);
  EXPECT_GT(cached_pages(d->path_of(0)), 0u) << "the kept read should have left its pages";
}

TEST_F(BackendDirect, AFileShortenedAfterTheScanIsAnErrorNamingItNeverZeros) {
  const size_t size = 4 * kA;
  auto d = one_file(size);
  ASSERT_TRUE(d);
  fs::resize_file(d->path_of(0), 2 * kA + 10);
  Aligned buf(size);
  Status s = d->reader->read_file(0, 0, buf.span(), CacheUse::drop);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.err(), EIO);
  EXPECT_NE(s.message().find("f.bin"), std::string::npos) << s.message();
}

TEST(GatherArena, AllocAlignedStartsAtABlockAndKeepsTheBytesInOrder) {
  Gather g;
  g.reset(1 << 20);
  std::byte* header = g.alloc(100);  // a tar header, say
  std::memset(header, 1, 100);
  std::byte* body = g.alloc_aligned(3 * kA);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(body) % kA, 0u);
  std::memset(body, 2, 3 * kA);
  std::byte* more = g.alloc_aligned(kA);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(more) % kA, 0u);
  EXPECT_EQ(g.bytes(), 100 + 4 * kA) << "padding must not be part of the reply";
  auto flat = test::flatten(g.iov(), static_cast<size_t>(g.count()));
  ASSERT_EQ(flat.size(), 100 + 4 * kA);
  EXPECT_EQ(flat[99], std::byte{1});
  EXPECT_EQ(flat[100], std::byte{2});
  // Padding is bounded per reply: past it, allocations are plain (never past the arena).
  for (int i = 0; i < 64; ++i) {
    (void)g.alloc(1);
    (void)g.alloc_aligned(8);
  }
  g.reset(1 << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(g.alloc_aligned(kA)) % kA, 0u) << "a fresh reply starts aligned";
}

}  // namespace
}  // namespace dlfs::cache
