#include "fs/kernel/mount_readahead.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fstream>

namespace dlfs::fs {

Status set_mount_readahead(const std::string& mountpoint, unsigned kib) {
  struct stat st {};
  // stat() of the mount root is answered only after the INIT handshake, so
  // INIT can no longer shrink what is set below.
  if (::stat(mountpoint.c_str(), &st) != 0) return Status::from_errno(errno, "mountpoint '" + mountpoint + "'");
  const std::string path = "/sys/class/bdi/" + std::to_string(major(st.st_dev)) + ":" +
                           std::to_string(minor(st.st_dev)) + "/read_ahead_kb";
  std::ofstream out(path);
  if (!out) return Status::from_errno(errno, "cannot open " + path);
  out << kib << "\n";
  out.flush();
  if (!out) return Status::from_errno(errno, "cannot write " + path);
  return Status::ok();
}

}  // namespace dlfs::fs
