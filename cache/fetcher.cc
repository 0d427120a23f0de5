#include "cache/fetcher.h"

#include <algorithm>
#include <cstring>

namespace dlfs::cache {

bool Fetcher::read_local(uint64_t offset, std::span<std::byte> dst) const {
  const StorageBuffer& b = *local_;
  if (dst.empty() || offset < b.range_begin() || offset + dst.size() > b.range_end()) return false;
  const std::byte* p = b.resident_ptr(offset);
  if (p == nullptr) return false;
  for (uint64_t e = b.extent_of(offset) + 1; e <= b.extent_of(offset + dst.size() - 1); ++e)
    if (b.state(e) != ExtentState::resident) return false;
  std::memcpy(dst.data(), p, dst.size());
  counters_.local_bytes.fetch_add(dst.size(), std::memory_order_relaxed);
  return true;
}

Status Fetcher::read(uint64_t offset, std::span<std::byte> dst) const {
  RemoteFetch* remote = remote_.load(std::memory_order_acquire);
  uint64_t pos = offset;
  size_t done = 0;
  while (done < dst.size()) {
    const uint32_t owner = stripes_.owner(pos);
    const uint64_t n = std::min<uint64_t>(dst.size() - done, stripes_.end(owner) - pos);
    std::span<std::byte> part = dst.subspan(done, n);
    bool got = false;
    if (owner == self_ && local_ != nullptr) {
      got = read_local(pos, part);
    } else if (owner != self_ && remote != nullptr) {
      got = remote->fetch(owner, pos, part);
      if (got) {
        counters_.remote_bytes.fetch_add(n, std::memory_order_relaxed);
        counters_.remote_gets.fetch_add(1, std::memory_order_relaxed);
      } else {
        counters_.remote_fallbacks.fetch_add(1, std::memory_order_relaxed);
      }
    }
    if (!got) {
      DLFS_RETURN_IF_ERROR(backend_.read(pos, part));
      counters_.backend_bytes.fetch_add(n, std::memory_order_relaxed);
      counters_.backend_reads.fetch_add(1, std::memory_order_relaxed);
    }
    pos += n;
    done += n;
  }
  return Status::ok();
}

}  // namespace dlfs::cache
