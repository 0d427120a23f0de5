#include "cache/verifier.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <memory>

namespace dlfs::cache {
namespace {

constexpr uint64_t kProgressEvery = 64;  // extents between progress callbacks

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
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
    if (mem != recorded)
      mismatch("memory differs from load checksum (memory " + hex(mem) + ", recorded " + hex(recorded) + ")");

    if (!scratch) scratch = std::make_unique_for_overwrite<std::byte[]>(buffer.extent_size());
    Status s = backend.read(begin, std::span<std::byte>(scratch.get(), len));
    if (!s) {
      mismatch("backend read failed: " + s.message());
    } else {
      uint64_t be = extent_checksum(std::span<const std::byte>(scratch.get(), len));
      if (be != recorded)
        mismatch("backend differs from load checksum (backend " + hex(be) + ", recorded " + hex(recorded) + ")");
    }
    ++r.extents_checked;
    r.bytes_checked += len;
  }
  if (progress) progress(total, total);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace dlfs::cache
