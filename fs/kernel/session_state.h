// SessionState: what the FUSE callbacks (fs/kernel/fuse_ops.cc) share while
// a KernelSession (fs/kernel/kernel_session.h) serves: the namespace they
// answer from, and the kernel side's parts, each with its own logic:
// per-inode state (KernelInodes), raw files' passthrough and pushes
// (PassthroughWindow, RawPush), view pages dropped behind readers, request
// counters. It derives from WireUser: libfuse hands it to the wire hooks
// (fs/kernel/wire/fuse_wire.h) as the session's userdata.
#pragma once

#include <atomic>
#include <cstdint>

#include "fs/kernel/drop_behind.h"
#include "fs/kernel/fuse_counters.h"
#include "fs/kernel/kernel_inodes.h"
#include "fs/kernel/passthrough_window.h"
#include "fs/kernel/raw_files.h"
#include "fs/kernel/raw_push.h"
#include "fs/kernel/raw_readers.h"
#include "fs/kernel/wire/fuse_wire.h"
#include "fs/namespace/namespace.h"

namespace dlfs::fs {

struct FuseOptions {
  double entry_timeout_s = 86400;
  double attr_timeout_s = 86400;
  uint64_t raw_push_size = 1 << 20;  // the largest raw file pushed (RawPush; 0: off)
  unsigned push_slots = 1;           // workers that may push at once
};

struct SessionState : WireUser {
  SessionState(const Namespace& ns, FuseOptions o)
      : ns(ns),
        options(o),
        raw(ns, inodes),
        passthrough(raw, inodes, wire.passthrough),
        push(raw, passthrough, o.raw_push_size, o.push_slots) {}

  const Namespace& ns;
  const FuseOptions options;
  FuseCounters counters;  // requests by kind, for stats
  // Set at INIT from the kernel's capabilities (fuse_ops.cc, op_init),
  // before any other request.
  bool kernel_skips_open = false;
  bool kernel_skips_opendir = false;
  KernelInodes inodes;
  RawFiles raw;
  PassthroughWindow passthrough;
  RawPush push;
  RawReaders readers;  // who may be pushed to at the overlay's getxattr
  // Drops view pages from the page cache behind their readers; null once
  // the session loop has ended (no worker reports to it then).
  std::atomic<ViewDropBehind*> drop_behind{nullptr};
};

}  // namespace dlfs::fs
