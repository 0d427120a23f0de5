#include "cache/storage_buffer.h"

#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "common/units.h"

namespace dlfs::cache {
namespace {

}  // namespace

Result<std::unique_ptr<StorageBuffer>> StorageBuffer::create(uint64_t range_begin, uint64_t range_end,
                                                             const StorageOptions& options) {
  if (range_end < range_begin)
    return Status(EINVAL, "storage range [" + std::to_string(range_begin) + ", " + std::to_string(range_end) +
                              ") ends before it begins");
  if (options.extent_size == 0) return Status(EINVAL, "storage extent size must be > 0");

  std::unique_ptr<StorageBuffer> b(new StorageBuffer());
  const uint64_t range = range_end - range_begin;
  b->begin_ = range_begin;
  b->end_ = range_end;
  b->extent_size_ = options.extent_size;
  b->extent_count_ = range / options.extent_size + (range % options.extent_size != 0 ? 1 : 0);
  if (options.memory_budget >= range) {
    b->cacheable_ = b->extent_count_;
    b->capacity_ = range;  // includes the short last extent
  } else {
    // Whole extents only: a partial extent could never become resident.
    b->cacheable_ = options.memory_budget / options.extent_size;
    b->capacity_ = b->cacheable_ * options.extent_size;
  }
  b->state_ = std::make_unique<std::atomic<uint8_t>[]>(b->extent_count_);
  b->checksum_ = std::make_unique<uint64_t[]>(b->extent_count_);
  b->staged_ = std::make_unique<std::atomic<uint8_t>[]>(b->extent_count_);
  if (b->capacity_ == 0) return b;

  if (options.shared) {
    DLFS_ASSIGN_OR_RETURN(b->shared_, SharedMemory::create("dlfs-dataset", b->capacity_, options.huge_pages));
    b->huge_ = b->shared_->huge_pages();
    b->map_len_ = b->shared_->mapped_bytes();
    b->base_ = b->shared_->data();
    return b;
  }
  void* p = MAP_FAILED;
  if (options.huge_pages) {
    // No MAP_NORESERVE here: with it the kernel would accept the mapping even
    // without enough reserved huge pages and SIGBUS on first touch. Without
    // it, a shortage fails now and we fall back to normal pages.
    b->map_len_ = round_up(b->capacity_, kHugePageBytes);
    p = ::mmap(nullptr, b->map_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    b->huge_ = p != MAP_FAILED;
  }
  if (p == MAP_FAILED) {
    b->map_len_ = round_up(b->capacity_, static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
    // MAP_NORESERVE: memory is committed as the loader touches it, so a large
    // budget does not trip overcommit accounting up front.
    p = ::mmap(nullptr, b->map_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      return Status::from_errno(errno, "cannot map " + format_size(b->map_len_) + " of dataset memory");
    // Transparent huge pages where the kernel allows them; failure is harmless
    // (THP disabled), and huge_ stays false since nothing is guaranteed.
    if (options.huge_pages) ::madvise(p, b->map_len_, MADV_HUGEPAGE);
  }
  b->base_ = static_cast<std::byte*>(p);
  return b;
}

StorageBuffer::~StorageBuffer() {
  if (base_ != nullptr && !shared_) ::munmap(base_, map_len_);
}

int StorageBuffer::memory_fd() const { return shared_ ? shared_->fd() : -1; }

uint64_t StorageBuffer::extent_length(uint64_t e) const {
  uint64_t b = begin_ + e * extent_size_;
  return std::min(extent_size_, end_ - b);
}

const std::byte* StorageBuffer::resident_ptr(uint64_t data_offset) const {
  if (data_offset < begin_ || data_offset >= end_) return nullptr;
  uint64_t e = extent_of(data_offset);
  if (e >= cacheable_ || state(e) != ExtentState::resident) return nullptr;
  return base_ + (data_offset - begin_);
}

const std::byte* StorageBuffer::resident_span(uint64_t data_offset, uint64_t length) const {
  if (length == 0 || data_offset < begin_ || length > end_ - data_offset) return nullptr;
  const std::byte* first = resident_ptr(data_offset);
  if (first == nullptr) return nullptr;
  // One mapping: consecutive resident extents are contiguous memory.
  for (uint64_t e = extent_of(data_offset) + 1; e <= extent_of(data_offset + length - 1); ++e)
    if (e >= cacheable_ || state(e) != ExtentState::resident) return nullptr;
  return first;
}

bool StorageBuffer::try_mark_loading(uint64_t e) {
  if (e >= cacheable_) return false;
  uint8_t expected = static_cast<uint8_t>(ExtentState::absent);
  return state_[e].compare_exchange_strong(expected, static_cast<uint8_t>(ExtentState::loading),
                                           std::memory_order_acq_rel, std::memory_order_relaxed);
}

uint64_t StorageBuffer::give(uint64_t data_offset, std::span<const std::byte> bytes) const {
  if (!accepts_given_.load(std::memory_order_acquire) || bytes.empty()) return 0;
  const uint64_t lo = std::max(data_offset, begin_);
  const uint64_t hi = std::min(data_offset + bytes.size(), end_);
  uint64_t taken = 0;
  for (uint64_t pos = lo; pos < hi;) {
    const uint64_t e = extent_of(pos);
    if (e >= cacheable_) break;  // the extents after it have no memory either
    const uint64_t stop = std::min(hi, extent_begin(e) + extent_length(e));
    // Cheap check first: most misses during a load are of absent extents,
    // and a resident or loading one takes nothing.
    if (state(e) == ExtentState::absent) {
      std::lock_guard lk(given_.lock_of(e));
      // Under the lock: a loader that claimed e after this check takes the
      // ranges (take_given) only once this copy is recorded.
      if (state(e) == ExtentState::absent) {
        std::memcpy(extent_data(e) + (pos - extent_begin(e)), bytes.data() + (pos - data_offset), stop - pos);
        given_.add(e, pos - extent_begin(e), stop - extent_begin(e));
        taken += stop - pos;
      }
    }
    pos = stop;
  }
  if (taken) given_bytes_.fetch_add(taken, std::memory_order_relaxed);
  return taken;
}

std::vector<GivenRanges::Range> StorageBuffer::take_given(uint64_t e) const {
  std::lock_guard lk(given_.lock_of(e));
  return given_.take(e);
}

void StorageBuffer::mark_resident(uint64_t e, uint64_t checksum) {
  checksum_[e] = checksum;
  resident_bytes_.fetch_add(extent_length(e), std::memory_order_relaxed);
  resident_extents_.fetch_add(1, std::memory_order_relaxed);
  settle(e, ExtentState::resident);
}

void StorageBuffer::mark_failed(uint64_t e) {
  failed_bytes_.fetch_add(extent_length(e), std::memory_order_relaxed);
  failed_extents_.fetch_add(1, std::memory_order_relaxed);
  settle(e, ExtentState::failed);
}

void StorageBuffer::settle(uint64_t e, ExtentState to) {
  {
    // Under the mutex: a waiter that checked the state before this store is
    // already asleep on the condition variable, so the notify reaches it.
    std::lock_guard lk(settle_mu_);
    // Release: a reader that sees `resident` (acquire) sees the bytes and checksum.
    state_[e].store(static_cast<uint8_t>(to), std::memory_order_release);
    // Counted with the state change: a settled count of N means N extents read settled.
    settled_.fetch_add(1, std::memory_order_release);
  }
  settle_cv_.notify_all();
}

bool StorageBuffer::wait_settled(uint64_t e, std::chrono::nanoseconds timeout) const {
  if (state(e) != ExtentState::loading) return true;
  std::unique_lock lk(settle_mu_);
  return settle_cv_.wait_for(lk, timeout, [&] { return state(e) != ExtentState::loading; });
}

bool StorageBuffer::wait_all_settled(std::chrono::nanoseconds timeout) const {
  if (settled_extents() >= cacheable_) return true;
  std::unique_lock lk(settle_mu_);
  return settle_cv_.wait_for(lk, timeout, [&] { return settled_extents() >= cacheable_; });
}

uint64_t extent_checksum(std::span<const std::byte> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

}  // namespace dlfs::cache
