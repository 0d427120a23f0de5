#include "cache/fetcher.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

namespace dlfs::cache {

bool Fetcher::read_local(uint64_t offset, std::span<std::byte> dst) const {
  const std::byte* p = local_->resident_span(offset, dst.size());
  if (p == nullptr) return false;
  std::memcpy(dst.data(), p, dst.size());
  counters_.local_bytes.fetch_add(dst.size(), std::memory_order_relaxed);
  return true;
}

CacheUse Fetcher::backend_cache_use(uint64_t offset) const {
  // Bytes of this node's stripe that fit its memory: the loader brings them
  // into the buffer (or has; then this read is the rare failed extent), so a
  // copy in the page cache as well would only take fresh memory, which on
  // some VMs is what reads while loading wait for (docs/benchmark-notes.md).
  if (local_ == nullptr || offset < local_->range_begin() || offset >= local_->range_end()) return CacheUse::keep;
  const uint64_t e = local_->extent_of(offset);
  if (e >= local_->cacheable_extents()) return CacheUse::keep;
  // Staged (cache/load_stager.h): read ahead into the page cache already.
  // Read it there, and evict it: the bytes are given to the buffer
  // (counted_backend_read), so the loader skips them and would never evict
  // those pages itself.
  return local_->staged(e) ? CacheUse::drop_buffered : CacheUse::drop;
}

void Fetcher::counted_backend_read(uint32_t owner, uint64_t offset, std::span<const std::byte> bytes) const {
  counters_.backend_bytes.fetch_add(bytes.size(), std::memory_order_relaxed);
  counters_.backend_reads.fetch_add(1, std::memory_order_relaxed);
  // This node's own bytes, read while the loader has yet to: hand them in,
  // so that the loader does not read them from the backend a second time.
  if (owner == self_ && local_ != nullptr) (void)local_->give(offset, bytes);
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
      DLFS_RETURN_IF_ERROR(backend_.read(pos, part, owner == self_ ? backend_cache_use(pos) : CacheUse::keep));
      counted_backend_read(owner, pos, part);
    }
    pos += n;
    done += n;
  }
  return Status::ok();
}

void Fetcher::read_many(std::span<ReadRequest> requests) const {
  RemoteFetch* remote = remote_.load(std::memory_order_acquire);
  // Every part, with the request it belongs to; remote parts grouped by owner.
  struct Part {
    size_t request;
    uint64_t offset;
    std::span<std::byte> dst;
    bool got = false;
  };
  std::vector<Part> parts;
  std::map<uint32_t, std::vector<size_t>> by_owner;  // owner -> indexes into parts
  for (size_t i = 0; i < requests.size(); ++i) {
    ReadRequest& r = requests[i];
    r.status = Status::ok();
    uint64_t pos = r.offset;
    size_t done = 0;
    while (done < r.dst.size()) {
      const uint32_t owner = stripes_.owner(pos);
      const uint64_t n = std::min<uint64_t>(r.dst.size() - done, stripes_.end(owner) - pos);
      Part part{i, pos, r.dst.subspan(done, n)};
      if (owner == self_ && local_ != nullptr) part.got = read_local(pos, part.dst);
      if (owner != self_ && remote != nullptr) by_owner[owner].push_back(parts.size());
      parts.push_back(part);
      pos += n;
      done += n;
    }
  }
  for (auto& [owner, idx] : by_owner) {
    std::vector<RemoteFetch::Piece> pieces;
    pieces.reserve(idx.size());
    for (size_t j : idx) pieces.push_back({parts[j].offset, parts[j].dst});
    remote->fetch_many(owner, pieces);
    for (size_t q = 0; q < idx.size(); ++q) {
      Part& part = parts[idx[q]];
      part.got = pieces[q].ok;
      if (part.got) {
        counters_.remote_bytes.fetch_add(part.dst.size(), std::memory_order_relaxed);
        counters_.remote_gets.fetch_add(1, std::memory_order_relaxed);
      } else {
        counters_.remote_fallbacks.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  for (Part& part : parts) {
    if (part.got || !requests[part.request].status) continue;
    Status st = backend_.read(part.offset, part.dst);
    if (!st) {
      requests[part.request].status = st;
      continue;
    }
    counted_backend_read(stripes_.owner(part.offset), part.offset, part.dst);
  }
}

}  // namespace dlfs::cache
