// A FUSE connection, ended from this side: what makes a stop safe while one
// of dlfsd's own threads waits on its own mount.
//
// Why: once dlfsd's FUSE loop has ended, nothing answers a request any more.
// The kernel ends the connection (failing every request still waiting) only
// when the last reference to its /dev/fuse file goes, and FUSE over io_uring
// keeps references in the rings' registered entries. A thread of dlfsd that
// still waits on the mount then (the raw overlay's mount, fs/kernel/raw_overlay.h,
// reading the lower directory's xattrs) waits uninterruptibly: SIGKILL does not
// end it, the process never exits, and the new overlay's superblock it holds
// blocks every sync(2) on the machine. Writing to the connection's "abort" file
// in fusectl (/sys/fs/fuse/connections, Documentation/filesystems/fuse.rst)
// fails those requests at once.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"

namespace dlfs::fs {

inline constexpr const char* kFuseConnectionsDir = "/sys/fs/fuse/connections";

// The connection number of the DLFS mount at `mountpoint` (the minor of its
// st_dev, read from /proc/self/mountinfo: no request to the mount itself).
// None: no DLFS mount there.
std::optional<unsigned> fuse_connection_of(const std::string& mountpoint);

// Aborts connection `id`: every request waiting on it fails (ECONNABORTED).
// Where fusectl is not mounted (systemd mounts it at boot; other inits may
// not), it is mounted at kFuseConnectionsDir for the abort and unmounted
// after it. Needs root.
Status abort_fuse_connection(unsigned id);

}  // namespace dlfs::fs
