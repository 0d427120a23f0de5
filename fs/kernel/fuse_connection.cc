#include "fs/kernel/fuse_connection.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>

#include "fs/kernel/mountinfo.h"

namespace dlfs::fs {

std::optional<unsigned> fuse_connection_of(const std::string& mountpoint) {
  auto table = read_mountinfo();
  if (!table) return std::nullopt;
  auto top = topmost_mount_at(*table, mountpoint);
  if (!top || !is_dlfs_mount(*top)) return std::nullopt;
  return top->dev_minor;
}

namespace {

Status write_abort(const std::string& dir) {
  const std::string abort_file = dir + "/abort";
  const int fd = ::open(abort_file.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::from_errno(errno, "cannot open " + abort_file);
  const bool written = ::write(fd, "1", 1) == 1;
  const int e = errno;
  ::close(fd);
  if (!written) return Status::from_errno(e, "cannot write " + abort_file);
  return Status::ok();
}

}  // namespace

Status abort_fuse_connection(unsigned id) {
  const std::string dir = std::string(kFuseConnectionsDir) + "/" + std::to_string(id);
  if (::access(dir.c_str(), F_OK) == 0) return write_abort(dir);
  // fusectl is not mounted here: mount it for the abort and leave the
  // machine as it was found.
  if (::mount("fusectl", kFuseConnectionsDir, "fusectl", 0, nullptr) != 0)
    return Status::from_errno(errno, std::string("cannot mount fusectl at ") + kFuseConnectionsDir);
  Status s = write_abort(dir);
  (void)::umount2(kFuseConnectionsDir, MNT_DETACH);
  return s;
}

}  // namespace dlfs::fs
