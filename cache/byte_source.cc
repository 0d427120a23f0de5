#include "cache/byte_source.h"

#include <cstring>
#include <string>

namespace dlfs::cache {
namespace {

// Where the residency of the byte space may change after `pos`: the end of
// pos's extent inside this node's stripe, else the stripe's edge (other
// nodes' bytes are never resident here).
uint64_t next_boundary(const StorageBuffer& b, uint64_t pos) {
  if (pos < b.range_begin()) return b.range_begin();
  if (pos >= b.range_end()) return UINT64_MAX;
  uint64_t e = b.extent_of(pos);
  return b.extent_begin(e) + b.extent_length(e);
}

// Calls fn(pos, n, mem) for the maximal runs of [off, off + len) whose
// extents are all resident (mem points at pos in the buffer) or all not
// (mem == nullptr). Consecutive resident extents are contiguous in the one
// mapping, so a resident run is one pointer range. Each extent's state is
// looked at once per walk. Stops early when fn returns false.
template <typename Fn>
bool for_each_run(const StorageBuffer& b, uint64_t off, uint64_t len, Fn&& fn) {
  const uint64_t end = off + len;
  uint64_t pos = off;
  while (pos < end) {
    const std::byte* mem = b.resident_ptr(pos);
    uint64_t run_end = pos;
    do {
      run_end = std::min(end, next_boundary(b, run_end));
    } while (run_end < end && (b.resident_ptr(run_end) != nullptr) == (mem != nullptr));
    if (!fn(pos, run_end - pos, mem)) return false;
    pos = run_end;
  }
  return true;
}

}  // namespace

void Gather::add(const void* p, size_t n) {
  if (n == 0) return;
  bytes_ += n;
  if (count_ > 0) {
    iovec& last = iov_[count_ - 1];
    if (static_cast<const std::byte*>(last.iov_base) + last.iov_len == p) {
      last.iov_len += n;
      return;
    }
  }
  iov_[count_++] = iovec{const_cast<void*>(p), n};  // iovec is non-const by API; never written through
}

namespace {

// Makes room for `n` scratch bytes. Only called before any iovec points into
// the scratch buffer (or after they were dropped), so reallocating is safe.
std::byte* reserve_scratch(std::unique_ptr<std::byte[]>& scratch, size_t& cap, size_t n) {
  if (cap < n) {
    size_t want = (n + 0xFFFF) & ~size_t{0xFFFF};  // 64 KiB steps: fewer regrowths across calls
    scratch = std::make_unique_for_overwrite<std::byte[]>(want);
    cap = want;
  }
  return scratch.get();
}

}  // namespace

Status ByteSource::read(uint64_t data_offset, uint64_t length, Gather& out) const {
  out.clear();
  const uint64_t total = fetcher_.stripes().total();
  if (data_offset > total || length > total - data_offset)
    return Status(EINVAL, "read of " + std::to_string(length) + " bytes at byte-space offset " +
                              std::to_string(data_offset) + " is outside the dataset's " + std::to_string(total) +
                              " bytes");
  if (length == 0) return Status::ok();

  // Pass 1: how many segments and how many backend bytes. Nothing allocated.
  size_t runs = 0;
  uint64_t backend_total = 0;
  for_each_run(buffer_, data_offset, length, [&](uint64_t, uint64_t n, const std::byte* mem) {
    ++runs;
    if (mem == nullptr) backend_total += n;
    return true;
  });

  uint64_t mem_bytes = 0, be_bytes = 0, be_reads = 0;
  Status status;
  bool gathered = false;
  if (runs <= Gather::kMaxSegments) {
    std::byte* scratch =
        backend_total ? reserve_scratch(out.scratch_, out.scratch_cap_, backend_total) : out.scratch_.get();
    uint64_t used = 0;
    // Pass 2. Residency only grows (absent -> resident), so this walk needs at
    // most backend_total scratch bytes; it may need more segments (a run split
    // by an extent that became resident meanwhile): then fall back to copying.
    gathered = for_each_run(buffer_, data_offset, length, [&](uint64_t pos, uint64_t n, const std::byte* mem) {
      const void* p = mem ? static_cast<const void*>(mem) : static_cast<const void*>(scratch + used);
      if (out.count_ == Gather::kMaxSegments) return false;
      if (mem != nullptr) {
        mem_bytes += n;
      } else {
        status = fetcher_.read(pos, std::span<std::byte>(scratch + used, n));
        if (!status) return false;
        used += n;
        be_bytes += n;
        ++be_reads;
      }
      out.add(p, n);
      return true;
    });
    if (!status) return status;
  }

  if (!gathered) {
    // Too fragmented for kMaxSegments iovecs: copy the whole range into
    // scratch. Correct, one extra copy; rare (alternating residency).
    out.clear();
    mem_bytes = be_bytes = be_reads = 0;
    std::byte* scratch = reserve_scratch(out.scratch_, out.scratch_cap_, length);
    for_each_run(buffer_, data_offset, length, [&](uint64_t pos, uint64_t n, const std::byte* mem) {
      std::byte* dst = scratch + (pos - data_offset);
      if (mem != nullptr) {
        std::memcpy(dst, mem, n);
        mem_bytes += n;
      } else {
        status = fetcher_.read(pos, std::span<std::byte>(dst, n));
        if (!status) return false;
        be_bytes += n;
        ++be_reads;
      }
      return true;
    });
    if (!status) return status;
    out.add(scratch, length);
  }

  out.backend_bytes_ = be_bytes;
  counters_.memory_bytes.fetch_add(mem_bytes, std::memory_order_relaxed);
  if (be_bytes) {
    counters_.backend_bytes.fetch_add(be_bytes, std::memory_order_relaxed);
    counters_.backend_reads.fetch_add(be_reads, std::memory_order_relaxed);
  }
  return Status::ok();
}

}  // namespace dlfs::cache
