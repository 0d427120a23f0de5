// RawPush: a small raw file, in memory, put whole into the kernel's page
// cache (fuse_lowlevel_notify_store) on the request that comes right before
// its reader's read: the isatty() ioctl of Python's open(), or the raw
// overlay's metacopy getxattr at lookup (fs/kernel/raw_overlay.h). The read
// then finds its pages and sends no READ.
//
// Once per kernel inode (RawFiles::claim_push, KernelInodes::forget), never
// while the passthrough window is open (files may then be open in both
// kinds), and by at most `slots` workers at once: a push can wait for a page
// lock that another worker's READ holds, so some workers never push.
//
// Thread safety: push() may run on every worker at once.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include <fuse_lowlevel.h>

#include "fs/kernel/passthrough_window.h"
#include "fs/kernel/raw_files.h"

namespace dlfs::fs {

class RawPush {
 public:
  // max_size: the largest file pushed (0: off); slots: workers that may push at once.
  RawPush(const RawFiles& raw, PassthroughWindow& window, uint64_t max_size, unsigned slots)
      : raw_(raw), window_(window), max_size_(max_size), slots_(slots) {}
  // The session pushes go through; set before the loop starts, cleared after it.
  void set_session(fuse_session* se) { session_.store(se, std::memory_order_release); }
  // Fewer workers may push (FUSE over io_uring: a push's READ needs a free
  // entry on its CPU's queue, so at most half of one queue pushes).
  void limit_slots(unsigned slots) { slots_ = std::min(slots_, slots); }

  // Pushes raw file `ino` if it qualifies (above); anything else: nothing.
  void push(uint64_t ino);

 private:
  const RawFiles& raw_;
  PassthroughWindow& window_;
  const uint64_t max_size_;
  unsigned slots_;  // set before the loop starts
  std::atomic<fuse_session*> session_{nullptr};
  std::atomic<unsigned> pushing_{0};
};

}  // namespace dlfs::fs
