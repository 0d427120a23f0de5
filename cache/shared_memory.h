// SharedMemory: memory dlfsd writes and local clients map read-only
// (docs/client-protocol.md).
//
// A memfd, mapped once read-write by the daemon and then sealed
// (F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_FUTURE_WRITE, F_SEAL_SEAL): from then
// on nobody can write it except through the daemon's own mapping, made
// before the seal. A client that receives the descriptor can map it
// PROT_READ only (a shared writable mapping, write(2) and a re-open of
// /proc/self/fd/N for writing all fail: seals belong to the file, not the
// descriptor). The memory lives while any mapping or descriptor does, so a
// client that maps it keeps valid memory after the daemon unmaps or exits.
//
// Huge pages: MFD_HUGETLB when the kernel has reserved huge pages free, else
// ordinary shmem pages with MADV_HUGEPAGE (which the kernel honours only
// when /sys/kernel/mm/transparent_hugepage/shmem_enabled allows it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "common/unique_fd.h"

namespace dlfs::cache {

class SharedMemory {
 public:
  // `bytes` of zeroed memory (0 is allowed: no mapping, a descriptor of an
  // empty file). `name` names the memfd (/proc/<pid>/fd, /proc/<pid>/maps).
  static Result<std::unique_ptr<SharedMemory>> create(const std::string& name, uint64_t bytes, bool huge_pages);
  ~SharedMemory();
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  std::byte* data() const { return base_; }  // the daemon's writable mapping (null when bytes() is 0)
  uint64_t bytes() const { return bytes_; }
  uint64_t mapped_bytes() const { return map_len_; }  // bytes() rounded up to the page size used
  bool huge_pages() const { return huge_; }
  int fd() const { return fd_.get(); }  // sealed; send it, never write through it
  // p .. p + n lies inside the mapping.
  bool contains(const void* p, uint64_t n) const {
    auto* b = static_cast<const std::byte*>(p);
    return base_ != nullptr && b >= base_ && n <= bytes_ && static_cast<uint64_t>(b - base_) <= bytes_ - n;
  }

 private:
  SharedMemory() = default;
  UniqueFd fd_;
  std::byte* base_ = nullptr;
  uint64_t bytes_ = 0, map_len_ = 0;
  bool huge_ = false;
};

}  // namespace dlfs::cache
