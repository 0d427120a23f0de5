#include "fs/page_cache_release.h"

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

namespace dlfs::fs {
namespace {

// A merged range is due after its last part: bounded, so that a file read
// on and on is still dropped piece by piece.
constexpr uint64_t kMergeBytes = 4ull << 20;

}  // namespace

PageCacheReleaser::PageCacheReleaser(Invalidate invalidate, PageCacheReleaseOptions options)
    : invalidate_(std::move(invalidate)), options_(options) {
  thread_ = std::thread([this] { run(); });
}

PageCacheReleaser::~PageCacheReleaser() { stop(); }

void PageCacheReleaser::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  std::call_once(joined_, [this] { thread_.join(); });
}

void PageCacheReleaser::add(uint64_t ino, uint64_t offset, uint64_t length) {
  if (length == 0) return;
  bool wake = false;
  {
    std::lock_guard lk(mu_);
    if (stop_) return;
    if (!pending_.empty()) {
      Range& last = pending_.back();
      // The next request of the same file (readahead comes in order): one
      // range, due `delay` after its last part, up to kMergeBytes.
      if (last.ino == ino && last.offset + last.length == offset && last.length + length <= kMergeBytes) {
        last.length += length;
        last.due = Clock::now() + options_.delay;
        pending_bytes_ += length;
        if (pending_bytes_ > options_.max_pending_bytes) cv_.notify_one();
        return;
      }
    }
    if (pending_.size() >= options_.max_pending_ranges) {
      counters_.overflowed.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    wake = pending_.empty() || pending_bytes_ + length > options_.max_pending_bytes;
    pending_.push_back({ino, offset, length, Clock::now() + options_.delay});
    pending_bytes_ += length;
  }
  // The thread sleeps until the oldest range is due; only a first range (no
  // deadline to sleep to) or too many bytes need it sooner.
  if (wake) cv_.notify_one();
}

size_t PageCacheReleaser::pending() const {
  std::lock_guard lk(mu_);
  return pending_.size();
}

void PageCacheReleaser::run() {
  std::vector<Range> due;
  std::unique_lock lk(mu_);
  for (;;) {
    if (stop_) return;
    const auto now = Clock::now();
    while (!pending_.empty() &&
           (pending_.front().due <= now || pending_bytes_ > options_.max_pending_bytes)) {
      pending_bytes_ -= pending_.front().length;
      due.push_back(pending_.front());
      pending_.pop_front();
    }
    if (due.empty()) {
      if (pending_.empty()) cv_.wait(lk);
      else cv_.wait_until(lk, pending_.front().due);
      continue;
    }
    lk.unlock();
    for (const Range& r : due) {
      if (stop_.load(std::memory_order_relaxed)) return;
      int rc = invalidate_(r.ino, r.offset, r.length);
      if (rc == 0) {
        counters_.ranges.fetch_add(1, std::memory_order_relaxed);
        counters_.bytes.fetch_add(r.length, std::memory_order_relaxed);
      } else if (rc == -ENOENT) {
        counters_.not_cached.fetch_add(1, std::memory_order_relaxed);
      } else {
        counters_.errors.fetch_add(1, std::memory_order_relaxed);
        spdlog::debug("dropping the page cache of inode {} [{}, +{}): {}", r.ino, r.offset, r.length,
                      std::strerror(-rc));
      }
    }
    due.clear();
    lk.lock();
  }
}

}  // namespace dlfs::fs
