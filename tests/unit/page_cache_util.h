// Page-cache helpers for the cache unit tests: how much of a file the kernel
// holds (mincore), how to start from none of it, and whether the test's
// file system shows it at all.
#pragma once

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "cache_test_util.h"
#include "common/unique_fd.h"

namespace dlfs::cache::test {

// Pages of `path` in the page cache, and its page count (mincore).
inline std::pair<size_t, size_t> cached_pages(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return {0, 0};
  const off_t size = ::lseek(fd.get(), 0, SEEK_END);
  if (size <= 0) return {0, 0};
  void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return {0, 0};
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> vec((static_cast<size_t>(size) + page - 1) / page);
  size_t in = 0;
  if (::mincore(p, static_cast<size_t>(size), vec.data()) == 0)
    for (unsigned char v : vec) in += v & 1;
  ::munmap(p, static_cast<size_t>(size));
  return {in, vec.size()};
}

// Pages of the whole dataset in the page cache, and its page count.
inline std::pair<size_t, size_t> dataset_cached(const Dataset& d) {
  std::pair<size_t, size_t> sum{0, 0};
  for (uint32_t f = 0; f < d.manifest.file_count(); ++f) {
    auto [in, all] = cached_pages(d.path_of(f));
    sum.first += in;
    sum.second += all;
  }
  return sum;
}

// Written files sit in the page cache, dirty: write them out and evict them,
// so that what is cached afterwards is what the code under test read.
inline void evict(const Dataset& d) {
  for (uint32_t f = 0; f < d.manifest.file_count(); ++f) {
    UniqueFd fd(::open(d.path_of(f).c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd.valid());
    ::fdatasync(fd.get());
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  }
}

// tmpfs keeps its pages whatever the advice: page-cache checks mean nothing there.
inline bool page_cache_observable(const std::string& dir) {
  struct statfs s {};
  return ::statfs(dir.c_str(), &s) == 0 && s.f_type != TMPFS_MAGIC;
}

}  // namespace dlfs::cache::test
