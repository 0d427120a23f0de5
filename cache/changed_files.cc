#include "cache/changed_files.h"

#include <sys/stat.h>

#include <algorithm>

#include <spdlog/spdlog.h>

namespace dlfs::cache {
namespace {

// Kept with their reason for reports and error messages; beyond this only
// counted, so a rewritten tree of a million files costs no memory here.
constexpr size_t kKeep = 256;
// Logged one by one; a whole tree replaced must not flood the log.
constexpr uint64_t kLogLines = 20;

}  // namespace

ChangedFiles::ChangedFiles(uint32_t file_count, std::string label)
    : file_count_(file_count), label_(std::move(label)),
      flags_(std::make_unique<std::atomic<uint8_t>[]>(file_count)) {}

void ChangedFiles::mark(uint32_t f, const std::string& path, const std::string& what) {
  uint8_t expected = 0;
  if (!flags_[f].compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return;  // known already
  const uint64_t n = count_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard lk(mu_);
    if (kept_.size() < kKeep) kept_.push_back({f, path, what});
  }
  if (n < kLogLines) {
    spdlog::warn("[{}] backend file '{}' changed since the scan ({}): reads that need its backend bytes fail with "
                 "EIO; its bytes already in memory keep serving the scanned version",
                 label_, path, what);
  } else if (n == kLogLines) {
    spdlog::warn("[{}] more backend files changed since the scan; not logging each (dlfs-ctl status counts them)",
                 label_);
  }
}

std::vector<ChangedFile> ChangedFiles::first(size_t limit) const {
  std::lock_guard lk(mu_);
  return std::vector<ChangedFile>(kept_.begin(), kept_.begin() + static_cast<std::ptrdiff_t>(std::min(limit, kept_.size())));
}

std::string ChangedFiles::what(uint32_t f) const {
  std::lock_guard lk(mu_);
  for (const auto& c : kept_)
    if (c.file == f) return c.what;
  return "see the log";
}

}  // namespace dlfs::cache
