// PageCacheReleaser: asks the kernel to drop the page-cache copy of file
// ranges a little after they were served.
//
// Why: while a dataset loads, every raw file read through the mount leaves
// a kernel copy of its bytes (the FUSE page cache, kept across opens) while
// the loader is filling this node's stripe with the same bytes. Both are
// first touches of memory at the moment memory is being filled, and on a VM
// whose host takes free memory back (free page reporting) a first touch
// costs 15-20x a reused page (docs/benchmarks.md, "Reads while loading").
// Dropping the kernel copy soon after the reader has it keeps the pages it
// uses few and recently freed; once the load is done the stripe holds the
// bytes and raw files are cached by the kernel as usual (a second epoch at
// page-cache speed).
//
// The drop is delayed (`delay`), so that pages read ahead are not dropped
// before the reader consumes them; and bounded (`max_pending_bytes`), so
// that a burst of reads never holds much memory. Ranges of one inode served
// back to back are merged. It never affects bytes: a dropped page is read
// again from the daemon if someone asks for it.
//
// The drop itself is injected (`Invalidate`: fuse_lowlevel_notify_inval_inode
// in dlfsd), and runs on this object's own thread, never on a FUSE worker:
// the kernel may wait there for a locked page whose read a worker must
// answer.
//
// Thread safety: every method may be called from any thread. stop() (and
// the destructor) drops nothing more: what is pending stays cached, as
// without this object. Stop it while the FUSE workers still answer reads:
// a drop under way may be waiting for one.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace dlfs::fs {

struct PageCacheReleaseOptions {
  std::chrono::milliseconds delay{50};         // a range is dropped this long after it was served...
  uint64_t max_pending_bytes = 64ull << 20;    // ...or sooner, oldest first, above this many bytes
  size_t max_pending_ranges = 1u << 16;        // more ranges than this: new ones stay cached (counted)
};

struct PageCacheReleaseCounters {
  std::atomic<uint64_t> ranges{0};        // ranges handed to the kernel (after merging)
  std::atomic<uint64_t> bytes{0};         // bytes in them
  std::atomic<uint64_t> not_cached{0};    // the kernel no longer knew the inode (forgotten): nothing to drop
  std::atomic<uint64_t> errors{0};        // other failures (logged at debug)
  std::atomic<uint64_t> overflowed{0};    // ranges left cached because too many were pending
};

class PageCacheReleaser {
 public:
  // Drops the cached pages of [offset, offset + length) of inode `ino`;
  // returns 0 or a negative errno (as libfuse's notify calls do).
  using Invalidate = std::function<int(uint64_t ino, uint64_t offset, uint64_t length)>;

  PageCacheReleaser(Invalidate invalidate, PageCacheReleaseOptions options = {});
  ~PageCacheReleaser();
  PageCacheReleaser(const PageCacheReleaser&) = delete;
  PageCacheReleaser& operator=(const PageCacheReleaser&) = delete;

  // [offset, offset + length) of `ino` was just served: drop it later.
  void add(uint64_t ino, uint64_t offset, uint64_t length);
  // Ends the thread after the drop under way, if any; idempotent.
  void stop();
  // Ranges waiting to be dropped (tests, stats).
  size_t pending() const;
  const PageCacheReleaseCounters& counters() const { return counters_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Range {
    uint64_t ino, offset, length;
    Clock::time_point due;
  };
  void run();

  const Invalidate invalidate_;
  const PageCacheReleaseOptions options_;
  PageCacheReleaseCounters counters_;
  mutable std::mutex mu_;  // guards the fields below; never held while the kernel is called
  std::condition_variable cv_;
  std::deque<Range> pending_;  // in order of `due`
  uint64_t pending_bytes_ = 0;
  std::atomic<bool> stop_{false};  // set under mu_ (for cv_), read without it between drops
  std::once_flag joined_;
  std::thread thread_;  // last: started once the rest is built
};

}  // namespace dlfs::fs
