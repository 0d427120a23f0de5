// StorageBuffer: the memory that holds this node's part of a dataset.
//
// It covers a range [begin, end) of the dataset byte space (the whole dataset
// on a cluster of one; one stripe per node later), split into fixed-size
// extents (the last one may be shorter). An extent is the unit of loading,
// residency and checksumming. Memory is one anonymous mapping (huge pages
// where the kernel gives them), sized min(range, budget): extents that do not
// fit the budget are never resident and are read from the backend on demand.
//
// Residency is published with release/acquire on a per-extent state byte:
// once an extent reads `resident`, its bytes and checksum are final and stay
// valid for the buffer's lifetime (eviction arrives with rounds, later).
//
// Thread safety: state queries and data() may be called concurrently with the
// loader; mark_loading/mark_resident/mark_failed are called by the loader only.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "common/status.h"

namespace dlfs::cache {

enum class ExtentState : uint8_t {
  absent = 0,      // not loaded yet (or beyond the budget)
  loading = 1,     // a loader thread is filling it
  resident = 2,    // bytes and checksum final
  failed = 3,      // backend read failed; reads go to the backend
};

struct StorageOptions {
  uint64_t extent_size = 8ull << 20;   // bytes per extent
  uint64_t memory_budget = ~0ull;      // bytes of memory this buffer may use
  bool huge_pages = true;              // try MAP_HUGETLB, then MADV_HUGEPAGE
};

class StorageBuffer {
 public:
  // range_end >= range_begin; extent_size > 0. Fails with a clear message when
  // the mapping cannot be made (names the size).
  static Result<std::unique_ptr<StorageBuffer>> create(uint64_t range_begin, uint64_t range_end,
                                                       const StorageOptions& options);
  ~StorageBuffer();
  StorageBuffer(const StorageBuffer&) = delete;
  StorageBuffer& operator=(const StorageBuffer&) = delete;

  uint64_t range_begin() const { return begin_; }
  uint64_t range_end() const { return end_; }
  uint64_t extent_size() const { return extent_size_; }
  uint64_t extent_count() const { return extent_count_; }
  // Extents [0, cacheable_extents()) fit the budget and get memory.
  uint64_t cacheable_extents() const { return cacheable_; }
  uint64_t capacity_bytes() const { return capacity_; }  // bytes of memory mapped
  bool huge_pages_in_use() const { return huge_; }

  // Extent holding byte-space offset `data_offset` (begin <= offset < end).
  uint64_t extent_of(uint64_t data_offset) const { return (data_offset - begin_) / extent_size_; }
  uint64_t extent_begin(uint64_t e) const { return begin_ + e * extent_size_; }  // byte-space
  uint64_t extent_length(uint64_t e) const;

  ExtentState state(uint64_t e) const { return static_cast<ExtentState>(state_[e].load(std::memory_order_acquire)); }
  // Memory of extent e (cacheable extents only); writable for the loader.
  std::byte* extent_data(uint64_t e) const { return base_ + e * extent_size_; }
  // Pointer to byte-space offset if its extent is resident, else nullptr.
  const std::byte* resident_ptr(uint64_t data_offset) const;
  // Pointer to [data_offset, data_offset + length) if every extent it touches
  // is resident (then the range is one contiguous run of memory), else
  // nullptr (also for an empty range or one outside this buffer). The one
  // "is this range resident" check of the read path.
  const std::byte* resident_span(uint64_t data_offset, uint64_t length) const;

  uint64_t checksum(uint64_t e) const { return checksum_[e]; }  // valid once resident
  uint64_t resident_bytes() const { return resident_bytes_.load(std::memory_order_relaxed); }
  uint64_t resident_extents() const { return resident_extents_.load(std::memory_order_relaxed); }

  // Loader protocol: absent -> loading -> resident | failed.
  bool try_mark_loading(uint64_t e);
  void mark_resident(uint64_t e, uint64_t checksum);
  void mark_failed(uint64_t e);

 private:
  StorageBuffer() = default;
  uint64_t begin_ = 0, end_ = 0, extent_size_ = 0, extent_count_ = 0, cacheable_ = 0;
  uint64_t capacity_ = 0;
  uint64_t map_len_ = 0;   // capacity_ rounded up to the page (or huge page) size
  bool huge_ = false;
  std::byte* base_ = nullptr;
  std::unique_ptr<std::atomic<uint8_t>[]> state_;
  std::unique_ptr<uint64_t[]> checksum_;
  std::atomic<uint64_t> resident_bytes_{0};
  std::atomic<uint64_t> resident_extents_{0};
};

// xxh3-64 of a byte range: the extent checksum used by the loader and verify.
uint64_t extent_checksum(std::span<const std::byte> bytes);

}  // namespace dlfs::cache
