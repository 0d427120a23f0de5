#include "fs/mountpoint_check.h"

#include <dirent.h>
#include <limits.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace dlfs::fs {
namespace {

// /proc/self/mountinfo field 5 is the mount point, with spaces etc. octal-escaped.
bool is_mounted_at(const std::string& abs) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string id, parent, dev, root, mnt;
    if (!(ls >> id >> parent >> dev >> root >> mnt)) continue;
    std::string unescaped;
    for (size_t i = 0; i < mnt.size(); ++i) {
      if (mnt[i] == '\\' && i + 3 < mnt.size()) {
        unescaped += static_cast<char>(std::strtol(mnt.substr(i + 1, 3).c_str(), nullptr, 8));
        i += 3;
      } else {
        unescaped += mnt[i];
      }
    }
    if (unescaped == abs) return true;
  }
  return false;
}

}  // namespace

Result<std::string> check_mountpoint(const std::string& path) {
  const std::string what = "mountpoint '" + path + "'";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOTCONN)
      return Status(EBUSY, what + " is a dead FUSE mount (Transport endpoint is not connected); run: fusermount3 -u " + path);
    return Status::from_errno(err, what);
  }
  if (!S_ISDIR(st.st_mode)) return Status(ENOTDIR, what + " is not a directory");
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) return Status::from_errno(errno, what);
  std::string abs(buf);
  if (is_mounted_at(abs)) return Status(EBUSY, what + " is busy: something is already mounted there (umount it first)");
  DIR* d = ::opendir(abs.c_str());
  if (!d) return Status::from_errno(errno, what);
  bool empty = true;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") {
      empty = false;
      break;
    }
  }
  ::closedir(d);
  if (!empty) return Status(ENOTEMPTY, what + " is not empty (mount on an empty directory)");
  return abs;
}

}  // namespace dlfs::fs
