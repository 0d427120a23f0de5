#include "cache/extent_fill.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <vector>

namespace dlfs::cache {
namespace {

// Failed extents are logged one by one up to this many, then only counted:
// a vanished directory of a million files must not flood the log.
constexpr unsigned kMaxFailureLines = 5;

}  // namespace

ExtentFill::ExtentFill(StorageBuffer& buffer, const BackendReader& backend, uint64_t read_size, std::string label,
                       CacheUse backend_cache)
    : buffer_(buffer), backend_(backend), read_size_(std::max<uint64_t>(1, read_size)),
      label_(label.empty() ? "dataset" : std::move(label)), backend_cache_(backend_cache) {}

Status ExtentFill::load(uint64_t e, CacheUse use) const {
  std::byte* dst = buffer_.extent_data(e);
  const uint64_t base = buffer_.extent_begin(e);
  const uint64_t len = buffer_.extent_length(e);
  // Ranges readers read from the backend and gave before the claim are in
  // memory already: read only the gaps between them.
  const std::vector<GivenRanges::Range> given = buffer_.take_given(e);
  size_t g = 0;
  for (uint64_t off = 0; off < len;) {
    if (g < given.size() && off >= given[g].begin) {
      off = std::max(off, given[g++].end);
      continue;
    }
    const uint64_t gap_end = g < given.size() ? given[g].begin : len;
    const uint64_t n = std::min(read_size_, gap_end - off);
    Status s = backend_.read(base + off, std::span<std::byte>(dst + off, n), use);
    if (!s) {
      buffer_.mark_failed(e);
      report_failure(e, s);
      return s;
    }
    off += n;
  }
  buffer_.mark_resident(e, extent_checksum(std::span<const std::byte>(dst, len)));
  return Status::ok();
}

bool ExtentFill::claim_and_load(uint64_t e, CacheUse use) const {
  if (!buffer_.try_mark_loading(e)) return false;
  (void)load(e, use);  // a failure is settled (failed) and logged; the caller reads the backend
  return true;
}

void ExtentFill::report_failure(uint64_t e, const Status& s) const {
  const unsigned n = failure_lines_.fetch_add(1, std::memory_order_relaxed);
  if (n < kMaxFailureLines) {
    spdlog::warn("[{}] extent {} (byte-space [{}, {})) not loaded, reads of it go to the backend: {}", label_, e,
                 buffer_.extent_begin(e), buffer_.extent_begin(e) + buffer_.extent_length(e), s.message());
  } else if (n == kMaxFailureLines) {
    spdlog::warn("[{}] more extents failed to load; not logging each (the final line has the count)", label_);
  }
}

}  // namespace dlfs::cache
