// What the kernel is handed instead of asking dlfsd: raw files read from
// their backend files while datasets load (FUSE passthrough), and raw files
// pushed into the page cache from memory.
#include "fs/kernel/raw_files.h"

#include <fcntl.h>

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

namespace dlfs::fs {

bool RawFiles::loading_with_passthrough() const {
  for (const auto& slot : ns_.datasets()) {
    if (!slot->settled()) return true;  // it may pass files through once scanned
    if (const Dataset* ds = slot->get(); ds && ds->passthrough() && ds->loading()) return true;
  }
  return false;
}

bool RawFiles::wants_passthrough(uint64_t ino) const {
  const auto [ds, f] = ns_.raw_file_of(ino);
  if (!ds || !ds->passthrough() || !ds->loading()) return false;
  const auto& m = ds->manifest();
  const uint64_t begin = m.file_data_offset(f), size = m.file_size(f);
  const cache::StorageBuffer& b = ds->buffer();
  // Only bytes this node will hold: another node's stripe is read from that
  // node's memory, which is faster than the backend once it is loaded.
  const uint64_t lo = std::max(begin, b.range_begin()), hi = std::min(begin + size, b.range_end());
  if (size == 0 || lo >= hi || b.cacheable_extents() == 0 || b.extent_of(lo) >= b.cacheable_extents()) return false;
  return b.resident_span(begin, size) == nullptr;
}

UniqueFd RawFiles::prefetch_backend_file(uint64_t ino, uint64_t bytes) const {
  const auto [ds, f] = ns_.raw_file_of(ino);
  if (!ds) return UniqueFd();
  auto fd = ds->backend().open_checked(f);
  if (!fd) return UniqueFd();  // the open, if any, finds out and says why
  // Advice: a failure changes nothing but speed.
  (void)::posix_fadvise(fd->get(), 0, static_cast<off_t>(bytes), POSIX_FADV_WILLNEED);
  ds->raw_counters().prefetched_files.fetch_add(1, std::memory_order_relaxed);
  return std::move(fd).value();
}

UniqueFd RawFiles::open_backend_file(uint64_t ino, UniqueFd opened) const {
  const auto [ds, f] = ns_.raw_file_of(ino);
  if (!ds) return UniqueFd();
  if (!opened.valid()) {
    auto fd = ds->backend().open_checked(f);
    if (!fd) {
      spdlog::debug("dataset '{}': not passed through: {}", ds->name(), fd.status().message());
      return UniqueFd();
    }
    opened = std::move(fd).value();
  }
  // The reader now reads the backend for bytes the loader has yet to load:
  // a miss, to which the loader yields (cache/load_yield.h).
  ds->buffer().reader_misses().note();
  ds->raw_counters().passthrough_files.fetch_add(1, std::memory_order_relaxed);
  return opened;
}

std::span<const std::byte> RawFiles::claim_push(uint64_t ino, uint64_t max_size) const {
  const auto [ds, f] = ns_.raw_file_of(ino);
  if (!ds) return {};
  const auto& m = ds->manifest();
  const uint64_t size = m.file_size(f);
  if (size == 0 || size > max_size) return {};
  // Resident in one piece: the push copies from memory and never waits on
  // the backend or a peer (the worker that pushes holds up the reader).
  const std::byte* bytes = ds->buffer().resident_span(m.file_data_offset(f), size);
  if (bytes == nullptr) return {};
  const bool first = inodes_.with(ino, [](KernelInode& e) { return !std::exchange(e.pushed, true); });
  if (!first) return {};
  return {bytes, size};
}

void RawFiles::count_push(uint64_t ino, uint64_t bytes) const {
  const auto [ds, f] = ns_.raw_file_of(ino);
  if (!ds) return;
  auto& c = ds->raw_counters();
  c.requests.fetch_add(1, std::memory_order_relaxed);
  c.bytes.fetch_add(bytes, std::memory_order_relaxed);
  c.reads.memory_bytes.fetch_add(bytes, std::memory_order_relaxed);
  c.pushed_files.fetch_add(1, std::memory_order_relaxed);
  c.pushed_bytes.fetch_add(bytes, std::memory_order_relaxed);
}

}  // namespace dlfs::fs
