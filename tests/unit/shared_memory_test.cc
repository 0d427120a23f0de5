// The dataset memory clients map (cache/shared_memory.h): the daemon's
// mapping writes, every other way of writing it fails, a read-only mapping
// sees the daemon's bytes and outlives the daemon's object.
#include "cache/shared_memory.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "cache/storage_buffer.h"

namespace dlfs::cache {
namespace {

std::unique_ptr<SharedMemory> make(uint64_t bytes) {
  auto r = SharedMemory::create("dlfs-test", bytes, /*huge_pages=*/true);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r ? std::move(r).value() : nullptr;
}

TEST(SharedMemory, OthersMapItReadOnlyAndCannotWriteIt) {
  auto m = make(3 * 4096 + 100);
  ASSERT_TRUE(m);
  std::memset(m->data(), 0x5a, m->bytes());  // the daemon's own mapping writes
  const int fd = m->fd();

  // A client's mapping: read-only works and sees the bytes.
  void* ro = ::mmap(nullptr, m->bytes(), PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(ro, MAP_FAILED) << std::strerror(errno);
  EXPECT_EQ(static_cast<unsigned char*>(ro)[m->bytes() - 1], 0x5a);

  // Writable shared mappings, write(2), a resize and a re-open for writing fail.
  EXPECT_EQ(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), MAP_FAILED);
  EXPECT_EQ(::mprotect(ro, 4096, PROT_READ | PROT_WRITE), -1);  // the read-only mapping cannot become writable
  char byte = 1;
  EXPECT_EQ(::pwrite(fd, &byte, 1, 0), -1);
  EXPECT_EQ(::ftruncate(fd, 0), -1);
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  int again = ::open(self.c_str(), O_RDWR);
  if (again >= 0) {  // the open may succeed; the seals belong to the file
    EXPECT_EQ(::pwrite(again, &byte, 1, 0), -1);
    EXPECT_EQ(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, again, 0), MAP_FAILED);
    ::close(again);
  }
  EXPECT_EQ(::fcntl(fd, F_ADD_SEALS, 0), -1);  // F_SEAL_SEAL: no seal can be removed or added

  // A private writable mapping is the client's own copy: the daemon's bytes stay.
  void* cow = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ASSERT_NE(cow, MAP_FAILED);
  static_cast<unsigned char*>(cow)[0] = 1;
  EXPECT_EQ(std::to_integer<int>(m->data()[0]), 0x5a);
  ::munmap(cow, 4096);

  // The daemon writes on after the seal; the client sees it.
  m->data()[5] = std::byte{7};
  EXPECT_EQ(static_cast<unsigned char*>(ro)[5], 7);

  // The memory outlives the daemon's object while mapped.
  const uint64_t n = m->bytes();
  m.reset();
  EXPECT_EQ(static_cast<unsigned char*>(ro)[n - 1], 0x5a);
  ::munmap(ro, n);
}

TEST(SharedMemory, EmptyRegionHasADescriptorAndNoMapping) {
  auto m = make(0);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->data(), nullptr);
  EXPECT_GE(m->fd(), 0);
  EXPECT_FALSE(m->contains(nullptr, 0));
}

TEST(SharedMemory, ContainsIsExact) {
  auto m = make(8192);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->contains(m->data(), 8192));
  EXPECT_TRUE(m->contains(m->data() + 8191, 1));
  EXPECT_FALSE(m->contains(m->data() + 8191, 2));
  EXPECT_FALSE(m->contains(m->data() - 1, 1));
}

TEST(SharedMemory, StorageBufferMemoryIsTheMemfd) {
  StorageOptions o;
  o.extent_size = 4096;
  auto b = StorageBuffer::create(0, 10000, o);
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  ASSERT_GE((*b)->memory_fd(), 0);
  std::memset((*b)->extent_data(1), 0x33, 4096);
  void* ro = ::mmap(nullptr, 10000, PROT_READ, MAP_SHARED, (*b)->memory_fd(), 0);
  ASSERT_NE(ro, MAP_FAILED);
  EXPECT_EQ(static_cast<unsigned char*>(ro)[4096 + 17], 0x33);
  ::munmap(ro, 10000);

  o.shared = false;  // anonymous memory: nothing to hand out
  auto a = StorageBuffer::create(0, 10000, o);
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ((*a)->memory_fd(), -1);
}

}  // namespace
}  // namespace dlfs::cache
