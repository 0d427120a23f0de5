#include "fs/daemon/unix_listener.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

namespace dlfs::fs {
namespace {

// An existing directory must not let other users swap our socket (writable
// by others without the sticky bit, or owned by another non-root user).
Status prepare_dir(const std::string& dir, mode_t mode, const std::string& what) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status(ec.value(), what + " directory '" + dir + "': " + ec.message());
    ::chmod(dir.c_str(), mode);
    return Status::ok();
  }
  if (!S_ISDIR(st.st_mode)) return Status(ENOTDIR, what + " directory '" + dir + "' is not a directory");
  if ((st.st_mode & 0022) && !(st.st_mode & S_ISVTX))
    return Status(EPERM, what + " directory '" + dir + "' is writable by other users");
  if (st.st_uid != 0 && st.st_uid != ::geteuid())
    return Status(EPERM, what + " directory '" + dir + "' belongs to another user");
  return Status::ok();
}

bool something_answers(const sockaddr_un& addr, int type) {
  UniqueFd fd(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
  return fd.valid() && ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
}

}  // namespace

Result<UniqueFd> listen_unix(const std::string& path, const UnixListenerOptions& o) {
  const std::string what = o.what + " '" + path + "'";
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return Status(ENAMETOOLONG, what + ": path too long");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  DLFS_RETURN_IF_ERROR(prepare_dir(std::filesystem::path(path).parent_path().string(), o.dir_mode, o.what));
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Status(EEXIST, what + " exists and is not a socket");
    if (something_answers(addr, o.type)) return Status(EADDRINUSE, what + " is in use by another dlfsd");
    ::unlink(path.c_str());  // stale: its daemon is gone
  }
  UniqueFd fd(::socket(AF_UNIX, o.type | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Status::from_errno(errno, what);
  const mode_t old = ::umask(0177);  // never briefly open to others before the chmod
  const int rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  const int err = errno;
  ::umask(old);
  if (rc != 0) return Status::from_errno(err, what);
  ::chmod(path.c_str(), o.mode);
  if (::listen(fd.get(), o.backlog) != 0) return Status::from_errno(errno, what);
  return fd;
}

void accept_connections(int listen_fd, int wake_fd, const std::atomic<bool>& stopping, std::atomic<int>& active,
                        int max, const std::function<void(int)>& refuse, const std::function<void(int)>& serve) {
  while (!stopping) {
    pollfd fds[2] = {{listen_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents) break;
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    if (active.load() >= max) {
      refuse(fd);
      ::close(fd);
      continue;
    }
    ++active;
    std::thread([&active, serve, fd] {
      serve(fd);
      ::close(fd);
      --active;
    }).detach();
  }
}

}  // namespace dlfs::fs
