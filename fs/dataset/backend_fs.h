// What kind of file system a dataset's backend is on, for the choices that
// depend on it (FUSE passthrough while loading, fs/kernel/backing_files.h).
//
// Passthrough trades dlfsd's miss path (one open of the backend file, a
// pread, a copy) for the kernel's own read of the backend file, at the price
// of one more open of it: the kernel opens its own backing file for every
// file passed through. On a local file system an open is microseconds and
// passthrough wins; on a network or user-space file system (NFS, Lustre,
// GPFS, CephFS, SMB, a FUSE client) each open is a round trip to a server,
// the very cost DLFS exists to take off the training job, and the extra open
// lost what passthrough saved (docs/benchmark-notes.md, session 24).
#pragma once

#include <string>

#include "common/status.h"

namespace dlfs::fs {

struct BackendFs {
  std::string type;      // "ext4", "nfs", ... or "0x..." for a type not named here
  bool network = false;  // each open is a server round trip
};

// From statfs(2) on `path`.
Result<BackendFs> backend_fs(const std::string& path);
// From a statfs f_type (the magic numbers of linux/magic.h and the vendors').
BackendFs backend_fs_of_type(long f_type);

}  // namespace dlfs::fs
