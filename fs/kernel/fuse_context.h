// FuseContext: what the FUSE callbacks (fs/kernel/fuse_ops.h) and the wire
// hooks (fs/kernel/fuse_wire.h) share, handed to libfuse as the session's
// userdata.
#pragma once

#include <atomic>

#include <fuse_lowlevel.h>

#include "fs/kernel/backing_files.h"
#include "fs/kernel/drop_behind.h"
#include "fs/kernel/fuse_counters.h"
#include "fs/kernel/fuse_uring.h"
#include "fs/namespace/namespace.h"

namespace dlfs::fs {

struct FuseOptions {
  double entry_timeout_s = 86400;
  double attr_timeout_s = 86400;
};

// Userdata handed to fuse_session_new; must outlive the session.
struct FuseContext {
  const Namespace* ns = nullptr;
  FuseOptions options;
  FuseCounters counters;  // requests by kind, for stats
  // Set at init from the kernel's capabilities (fuse_adapter.cc, op_init).
  bool kernel_skips_open = false;
  bool kernel_skips_opendir = false;
  // FUSE passthrough while datasets load (fs/kernel/backing_files.h): what INIT
  // agreed, the backing files of open raw files, and whether the window is
  // over (every dataset loaded, or the kernel refused a backing file): from
  // then on opens are answered as without passthrough.
  PassthroughWire passthrough;
  BackingFiles backing;
  PrefetchedFiles prefetched;
  std::atomic<bool> passthrough_over{false};
  // FUSE over io_uring (fs/kernel/fuse_uring.h): what INIT agreed, and the queues
  // once started (null until then, and after the loop ended).
  UringWire uring_wire;
  std::atomic<FuseUring*> uring{nullptr};
  // Drops view pages from the page cache behind their readers
  // (fs/kernel/drop_behind.h; it does nothing when off); null in tests
  // without a daemon, and once the session loop has ended.
  ViewDropBehind* drop_behind = nullptr;
  // Pushes of raw files at isatty() (fuse_adapter.cc, op_ioctl): the session
  // they go through (set before the loop starts), the largest file pushed
  // (0: off), and how many workers may push at once: a push can wait for a
  // page another worker is answering a read of, so some workers never push.
  fuse_session* session = nullptr;
  uint64_t raw_push_size = 0;
  unsigned push_slots = 1;
  std::atomic<unsigned> pushing{0};
};

}  // namespace dlfs::fs
