// ByteSource: the read path of a dataset. Gathers a byte-space range from
// this node's resident memory where it can, and through the Fetcher (a peer's
// memory, or the backend) where it must.
//
// The result is a list of iovecs: segments that point straight into the
// storage buffer (zero copies here; the FUSE reply is the one copy) and, for
// non-resident parts, segments of a scratch buffer that the Gather owns.
// No lock and no allocation when everything is resident.
#pragma once

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "cache/backend_reader.h"
#include "cache/fetcher.h"
#include "cache/storage_buffer.h"

namespace dlfs::cache {

// The bytes of one read: up to kMaxSegments iovecs (contiguous runs of
// resident memory or backend bytes, in order).
class Gather {
 public:
  static constexpr size_t kMaxSegments = 64;
  const iovec* iov() const { return iov_.data(); }
  size_t count() const { return count_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t backend_bytes() const { return backend_bytes_; }
  void clear() { count_ = 0; bytes_ = 0; backend_bytes_ = 0; }

 private:
  friend class ByteSource;
  void add(const void* p, size_t n);
  std::array<iovec, kMaxSegments> iov_{};
  size_t count_ = 0;
  uint64_t bytes_ = 0;
  uint64_t backend_bytes_ = 0;
  std::unique_ptr<std::byte[]> scratch_;   // backend bytes, allocated only when needed
  size_t scratch_cap_ = 0;
};

struct ByteSourceCounters {
  std::atomic<uint64_t> memory_bytes{0};
  std::atomic<uint64_t> backend_bytes{0};
  std::atomic<uint64_t> backend_reads{0};
};

class ByteSource {
 public:
  ByteSource(const StorageBuffer& buffer, const Fetcher& fetcher) : buffer_(buffer), fetcher_(fetcher) {}

  // Gathers [data_offset, data_offset + length) (must lie inside the
  // dataset's byte space). Backend errors are returned with the file named; `out` is then
  // unspecified.
  Status read(uint64_t data_offset, uint64_t length, Gather& out) const;

  const ByteSourceCounters& counters() const { return counters_; }

 private:
  const StorageBuffer& buffer_;
  const Fetcher& fetcher_;
  mutable ByteSourceCounters counters_;
};

}  // namespace dlfs::cache
