#include "cache/verifier.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>

namespace dlfs::cache {
namespace {

constexpr uint64_t kProgressEvery = 64;  // extents between progress callbacks

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// Whether a read already found a file of the range changed.
bool has_changed_file(const BackendReader& backend, uint64_t begin, uint64_t end) {
  bool any = false;
  backend.manifest().for_each_file_in(
      begin, end, [&](uint32_t f, uint64_t, uint64_t) { any = any || backend.changed_files().contains(f); });
  return any;
}

// The memory of the extent is intact and the backend's bytes differ: mark
// the files whose bytes differ (stat did not show it). Returns how many.
uint64_t mark_differing_files(const BackendReader& backend, const std::byte* memory, const std::byte* disk,
                              uint64_t begin, uint64_t end) {
  uint64_t n = 0;
  backend.manifest().for_each_file_in(begin, end, [&](uint32_t f, uint64_t b, uint64_t e) {
    if (std::memcmp(memory + (b - begin), disk + (b - begin), e - b) == 0) return;
    backend.mark_changed(f, "its bytes differ from the loaded ones while size, mtime and inode did not change");
    ++n;
  });
  return n;
}

}  // namespace

VerifyReport verify_buffer(const StorageBuffer& buffer, const BackendReader& backend,
                           const std::function<void(uint64_t, uint64_t)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  VerifyReport r;
  const uint64_t total = buffer.extent_count();
  // One scratch extent for the backend copy, allocated only if something is resident.
  std::unique_ptr<std::byte[]> scratch;

  for (uint64_t e = 0; e < total; ++e) {
    if (progress && e > 0 && e % kProgressEvery == 0) progress(e, total);
    if (buffer.state(e) != ExtentState::resident) {  // includes extents beyond the budget
      ++r.extents_skipped;
      continue;
    }
    const uint64_t begin = buffer.extent_begin(e);
    const uint64_t len = buffer.extent_length(e);
    const uint64_t recorded = buffer.checksum(e);
    auto mismatch = [&](std::string what) { r.mismatches.push_back({e, begin, len, std::move(what)}); };

    uint64_t mem = extent_checksum(std::span<const std::byte>(buffer.extent_data(e), len));
    const bool memory_ok = mem == recorded;
    if (!memory_ok)
      mismatch("memory differs from load checksum (memory " + hex(mem) + ", recorded " + hex(recorded) + ")");

    if (!scratch) scratch = std::make_unique_for_overwrite<std::byte[]>(buffer.extent_size());
    Status s = backend.read(begin, std::span<std::byte>(scratch.get(), len));
    if (!s) {
      if (has_changed_file(backend, begin, begin + len)) ++r.extents_changed;
      else mismatch("backend read failed: " + s.message());
    } else if (uint64_t be = extent_checksum(std::span<const std::byte>(scratch.get(), len)); be != recorded) {
      if (memory_ok && mark_differing_files(backend, buffer.extent_data(e), scratch.get(), begin, begin + len) > 0)
        ++r.extents_changed;
      else
        mismatch("backend differs from load checksum (backend " + hex(be) + ", recorded " + hex(recorded) + ")");
    }
    ++r.extents_checked;
    r.bytes_checked += len;
  }
  if (progress) progress(total, total);
  r.changed_count = backend.changed_files().count();
  r.changed = backend.changed_files().first(kVerifyListed);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace dlfs::cache
