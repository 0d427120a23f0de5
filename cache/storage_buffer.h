// StorageBuffer: the memory that holds this node's part of a dataset.
//
// It covers a range [begin, end) of the dataset byte space (the whole dataset
// on a cluster of one; one stripe per node later), split into fixed-size
// extents (the last one may be shorter). An extent is the unit of loading,
// residency and checksumming. Memory is one mapping sized min(range,
// budget): extents that do not fit the budget are never resident and are
// read from the backend on demand. By default the mapping is a sealed memfd
// (cache/shared_memory.h) that local clients map read-only
// (docs/client-protocol.md); they read only extents the daemon told them
// are resident, whose bytes never change again, so a client never sees an
// extent being loaded (or given bytes, below) however the two interleave.
//
// Residency is published with release/acquire on a per-extent state byte:
// once an extent reads `resident`, its bytes and checksum are final and stay
// valid for the buffer's lifetime (eviction arrives with rounds, later).
//
// An extent is filled by whoever claims it first (try_mark_loading): a loader
// thread walking the extents in order, or, while a Loader runs (it hands the
// buffer its ExtentFill), a reader that needs the extent's bytes. Whoever
// claims it settles it (mark_resident or mark_failed); others may wait for
// that (wait_settled) with a timeout. Readers that read the backend for an
// extent not resident yet note it (reader_misses), so the loader can yield.
//
// Thread safety: every method may be called concurrently; the claim decides
// who writes an extent's memory.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "cache/given_ranges.h"
#include "cache/shared_memory.h"
#include "cache/load_yield.h"
#include "common/status.h"

namespace dlfs::cache {

class ExtentFill;

enum class ExtentState : uint8_t {
  absent = 0,      // not loaded yet (or beyond the budget)
  loading = 1,     // a loader thread (or a reader) is filling it
  resident = 2,    // bytes and checksum final
  failed = 3,      // backend read failed; reads go to the backend
};

struct StorageOptions {
  uint64_t extent_size = 8ull << 20;   // bytes per extent
  uint64_t memory_budget = ~0ull;      // bytes of memory this buffer may use
  bool huge_pages = true;              // try MAP_HUGETLB, then MADV_HUGEPAGE
  // A memfd clients can map (cache/shared_memory.h), else anonymous memory.
  bool shared = true;
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
  // The memory as a sealed memfd for clients (-1: anonymous memory, or none).
  int memory_fd() const;
  const std::byte* memory_base() const { return base_; }

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
  uint64_t failed_bytes() const { return failed_bytes_.load(std::memory_order_relaxed); }
  uint64_t failed_extents() const { return failed_extents_.load(std::memory_order_relaxed); }
  // Cacheable extents resident or failed: the load is complete when this
  // equals cacheable_extents(), whoever loaded them.
  uint64_t settled_extents() const { return settled_.load(std::memory_order_acquire); }

  // Loading protocol: absent -> loading -> resident | failed. The thread whose
  // try_mark_loading returned true fills extent_data(e) and settles it.
  bool try_mark_loading(uint64_t e);
  void mark_resident(uint64_t e, uint64_t checksum);
  void mark_failed(uint64_t e);

  // Staging (cache/load_stager.h): extent e's backend bytes were read ahead
  // into the kernel's page cache, so reads of them (the loader's, a miss's)
  // go through the page cache instead of past it. A hint: pages the kernel
  // evicted meanwhile are simply read again from the device.
  void mark_staged(uint64_t e) {
    if (staged_[e].exchange(1, std::memory_order_release) == 0) staged_count_.fetch_add(1, std::memory_order_relaxed);
  }
  bool staged(uint64_t e) const { return staged_[e].load(std::memory_order_acquire) != 0; }
  uint64_t staged_extents() const { return staged_count_.load(std::memory_order_relaxed); }

  // Bytes readers give (cache/given_ranges.h): a reader that read
  // [data_offset, data_offset + bytes.size()) from the backend hands it in,
  // and the parts that fall in absent cacheable extents are copied into the
  // buffer, so the loader reads only the rest. Taken only while a loader
  // accepts them (set_accepts_given): with no load running they would never
  // become resident. Returns the bytes taken.
  uint64_t give(uint64_t data_offset, std::span<const std::byte> bytes) const;
  // The loader, having claimed e (try_mark_loading): the ranges of e given
  // before the claim, relative to the extent, sorted and disjoint. None are
  // taken for e afterwards (give checks the state under the same lock).
  std::vector<GivenRanges::Range> take_given(uint64_t e) const;
  void set_accepts_given(bool on) { accepts_given_.store(on, std::memory_order_release); }
  uint64_t given_bytes() const { return given_bytes_.load(std::memory_order_relaxed); }

  // Waits until extent e is not `loading` (resident, failed or absent) or
  // `timeout` passed; true when it settled in time.
  bool wait_settled(uint64_t e, std::chrono::nanoseconds timeout) const;
  // Waits until every cacheable extent is resident or failed, or `timeout`.
  bool wait_all_settled(std::chrono::nanoseconds timeout) const;

  // How readers load the absent extents they read: set by a running Loader,
  // null otherwise (then misses go to the backend). Shared: a reader keeps it
  // alive through its load even if the Loader stops meanwhile.
  void set_fill_on_read(std::shared_ptr<const ExtentFill> fill) {
    const bool set = fill != nullptr;
    fill_on_read_.store(std::move(fill));
    has_fill_.store(set, std::memory_order_release);
  }
  // Readers note here when they read the backend for bytes this buffer will
  // hold (not resident yet); a running Loader yields to them
  // (cache/load_yield.h). Mutable: readers hold the buffer const.
  ReaderMisses& reader_misses() const { return misses_; }

  std::shared_ptr<const ExtentFill> fill_on_read() const {
    // The flag first: most reads happen with no fill set (no load, or one
    // without readers_load), and the shared pointer's load takes a lock.
    return has_fill_.load(std::memory_order_acquire) ? fill_on_read_.load() : nullptr;
  }

 private:
  StorageBuffer() = default;
  void settle(uint64_t e, ExtentState to);  // publishes resident/failed and wakes waiters
  uint64_t begin_ = 0, end_ = 0, extent_size_ = 0, extent_count_ = 0, cacheable_ = 0;
  uint64_t capacity_ = 0;
  uint64_t map_len_ = 0;   // capacity_ rounded up to the page (or huge page) size
  bool huge_ = false;
  std::byte* base_ = nullptr;
  std::unique_ptr<SharedMemory> shared_;  // owns base_ when options.shared
  std::unique_ptr<std::atomic<uint8_t>[]> state_;
  std::unique_ptr<uint64_t[]> checksum_;
  std::unique_ptr<std::atomic<uint8_t>[]> staged_;
  std::atomic<uint64_t> staged_count_{0};
  mutable GivenRanges given_;
  std::atomic<bool> accepts_given_{false};
  mutable std::atomic<uint64_t> given_bytes_{0};
  std::atomic<uint64_t> resident_bytes_{0};
  std::atomic<uint64_t> resident_extents_{0};
  std::atomic<uint64_t> failed_bytes_{0};
  std::atomic<uint64_t> failed_extents_{0};
  std::atomic<uint64_t> settled_{0};
  std::atomic<std::shared_ptr<const ExtentFill>> fill_on_read_;
  std::atomic<bool> has_fill_{false};
  mutable ReaderMisses misses_;
  // Wakes wait_settled()/wait_all_settled() when an extent settles (once per
  // extent: a lock per 8 MiB loaded).
  mutable std::mutex settle_mu_;
  mutable std::condition_variable settle_cv_;
};

// xxh3-64 of a byte range: the extent checksum used by the loader and verify.
uint64_t extent_checksum(std::span<const std::byte> bytes);

}  // namespace dlfs::cache
