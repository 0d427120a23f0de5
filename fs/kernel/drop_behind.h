// ViewDropBehind: drops the pages of epoch view files from the kernel's page
// cache behind a reader that reads them in order.
//
// Why: an epoch view is a new file every epoch, read once, and its bytes stay
// in dlfsd's memory after the kernel's copy is gone. The page cache holding a
// view is a second copy of the dataset per epoch read, useful to nobody, and
// making it costs fresh memory: on this project's VMs, pages not recently
// freed cost a host fault at first touch, and an epoch-2 view read at a
// quarter of the speed of epoch 1, whose pages came from a drop_caches just
// before (docs/benchmark-notes.md, "Views drop their pages behind the reader").
// Anywhere, it evicts what other files (raw/ in epoch 2, the training job's
// own) need. Dropped behind the reader, a view holds a few MiB of page cache,
// and the freed pages are reused, still warm, by the next read-ahead.
//
// How: every answered read of a view file reports its range (served()). Per
// file, the furthest byte served is the reader's front; once the front is
// `keep_bytes + step_bytes` past what was dropped, the range up to
// `front - keep_bytes` is queued, and a background thread asks the kernel to
// invalidate it (fuse_lowlevel_notify_inval_inode). Not on the worker thread
// that answered the read: the kernel waits for locked pages there, and a page
// being read ahead stays locked until a worker answers its read. A read far
// from the front (random access: a record of a .bin view, a sample by index)
// starts a new run there without dropping what it skipped: only ranges read
// through in order are dropped. A page dropped that a reader wants again is
// read again from dlfsd's memory: slower, never wrong (views are immutable).
//
// Thread safety: served() and the counters from any thread; stop() once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace dlfs::fs {

struct DropBehindOptions {
  uint64_t keep_bytes = 16ull << 20;  // kept behind the front (0: the whole feature is off)
  uint64_t step_bytes = 32ull << 20;  // dropped at once: one notification per this many bytes read
  // A read starting further than this past the front is a jump, not the next
  // read of the run. Read-ahead requests arrive up to a reader's request size
  // (TarView: 8 MiB) ahead of one another, and not always in order.
  uint64_t jump_bytes = 64ull << 20;
  size_t max_files = 4096;            // per-file fronts kept; beyond, they are all forgotten
  size_t max_queued = 1024;           // ranges waiting for the thread; beyond, new ones are not dropped
};

class ViewDropBehind {
 public:
  // Asks the kernel to drop [off, off + len) of inode ino from its page
  // cache; returns 0 or -errno (fuse_lowlevel_notify_inval_inode).
  using Invalidate = std::function<int(uint64_t ino, uint64_t off, uint64_t len)>;

  ViewDropBehind(DropBehindOptions options, Invalidate invalidate);
  ~ViewDropBehind();  // stop()
  ViewDropBehind(const ViewDropBehind&) = delete;
  ViewDropBehind& operator=(const ViewDropBehind&) = delete;

  // A read of [off, off + len) of view inode ino was answered.
  void served(uint64_t ino, uint64_t off, uint64_t len);
  // Waits until every queued range was handed to the kernel (tests, stop()).
  void drain();
  // Drains and ends the thread; served() does nothing afterwards.
  void stop();

  bool enabled() const { return options_.keep_bytes > 0; }
  uint64_t keep_bytes() const { return options_.keep_bytes; }
  uint64_t dropped_bytes() const { return dropped_bytes_.load(std::memory_order_relaxed); }
  uint64_t notifications() const { return notifications_.load(std::memory_order_relaxed); }
  uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  uint64_t skipped() const { return skipped_.load(std::memory_order_relaxed); }

 private:
  struct Run {
    uint64_t front = 0;    // furthest byte served in this run
    uint64_t dropped = 0;  // every byte before it of this run was dropped (or the run began there)
  };
  struct Range {
    uint64_t ino, off, len;
  };
  void run();
  void send(const Range& r);

  const DropBehindOptions options_;
  const Invalidate invalidate_;
  std::mutex mu_;
  std::condition_variable wake_;     // the thread: work or stop
  std::condition_variable drained_;  // drain(): queue empty and nothing in hand
  std::unordered_map<uint64_t, Run> runs_;
  std::deque<Range> queue_;
  bool busy_ = false;  // the thread holds a range outside the lock
  bool stop_ = false;
  std::atomic<uint64_t> dropped_bytes_{0}, notifications_{0}, failures_{0}, skipped_{0};
  std::thread thread_;
};

}  // namespace dlfs::fs
