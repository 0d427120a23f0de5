#include "fs/kernel/drop_behind.h"

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

namespace dlfs::fs {

ViewDropBehind::ViewDropBehind(DropBehindOptions options, Invalidate invalidate)
    : options_(options), invalidate_(std::move(invalidate)) {
  if (enabled()) thread_ = std::thread([this] { run(); });
}

ViewDropBehind::~ViewDropBehind() { stop(); }

void ViewDropBehind::served(uint64_t ino, uint64_t off, uint64_t len) {
  if (!enabled() || len == 0) return;
  const uint64_t end = off + len;
  std::lock_guard lock(mu_);
  if (stop_) return;
  auto it = runs_.find(ino);
  if (it == runs_.end()) {
    if (runs_.size() >= options_.max_files) runs_.clear();  // views of epochs long read: start again
    runs_.emplace(ino, Run{end, off});
    return;
  }
  Run& r = it->second;
  if (off < r.dropped || off > r.front + options_.jump_bytes) {
    r = Run{end, off};  // a jump (or a read of what was dropped): a new run from here
    return;
  }
  if (end > r.front) r.front = end;
  if (r.front < r.dropped + options_.keep_bytes + options_.step_bytes) return;
  const uint64_t upto = r.front - options_.keep_bytes;
  if (queue_.size() >= options_.max_queued) {
    skipped_.fetch_add(1, std::memory_order_relaxed);  // the thread lags: these pages stay cached
  } else {
    queue_.push_back(Range{ino, r.dropped, upto - r.dropped});
    wake_.notify_one();
  }
  r.dropped = upto;
}

void ViewDropBehind::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping, and nothing left
    const Range r = queue_.front();
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    send(r);
    lock.lock();
    busy_ = false;
    if (queue_.empty()) drained_.notify_all();
  }
  drained_.notify_all();
}

void ViewDropBehind::send(const Range& r) {
  const int rc = invalidate_(r.ino, r.off, r.len);
  notifications_.fetch_add(1, std::memory_order_relaxed);
  if (rc == 0) {
    dropped_bytes_.fetch_add(r.len, std::memory_order_relaxed);
    return;
  }
  // ENOENT: the kernel forgot the inode (its pages went with it). Anything
  // else (an old kernel, the mount going away) only leaves pages cached.
  if (rc == -ENOENT) return;
  if (failures_.fetch_add(1, std::memory_order_relaxed) == 0)
    spdlog::warn("cannot drop view pages behind readers (inode {}, bytes {}-{}): {}; they stay in the page cache",
                 r.ino, r.off, r.off + r.len, std::strerror(-rc));
}

void ViewDropBehind::drain() {
  std::unique_lock lock(mu_);
  drained_.wait(lock, [&] { return queue_.empty() && !busy_; });  // run() empties the queue even when stopping
}

void ViewDropBehind::stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace dlfs::fs
