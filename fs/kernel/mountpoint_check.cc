#include "fs/kernel/mountpoint_check.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include <spdlog/spdlog.h>

extern char** environ;

namespace dlfs::fs {
namespace {

// At most this many dead mounts stacked at one path are cleared (each start
// of an older dlfsd could not stack more than one; this bounds the loop).
constexpr int kMaxDeadMounts = 8;

std::string quoted(const std::string& path) { return "mountpoint '" + path + "'"; }

// realpath() of the path; on a dead mount the lookup of its root can itself
// fail with ENOTCONN, so then the parent is resolved and the name appended.
Result<std::string> absolute_path(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf)) return std::string(buf);
  const int err = errno;
  if (err != ENOTCONN && err != ECONNABORTED) return Status::from_errno(err, quoted(path));
  std::filesystem::path p = std::filesystem::absolute(path).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "mnt/" -> "mnt"
  if (!::realpath(p.parent_path().c_str(), buf)) return Status::from_errno(errno, quoted(path));
  return (std::filesystem::path(buf) / p.filename()).string();
}

// Lazy unmount (MNT_DETACH): a dead mount cannot answer the requests a plain
// unmount may wait for, and readers still holding its files keep failing
// with ENOTCONN without holding up the new mount. Not root: fusermount3
// (setuid) unmounts FUSE mounts of the user who made them.
Status detach_mount(const std::string& abs) {
  if (::umount2(abs.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0) return Status::ok();
  const int err = errno;
  const std::string what = "unmounting the dead DLFS mount at '" + abs + "'";
  if (err != EPERM) return Status::from_errno(err, what);
  const char* argv[] = {"fusermount3", "-u", "-z", abs.c_str(), nullptr};
  pid_t pid = 0;
  if (int rc = ::posix_spawnp(&pid, "fusermount3", nullptr, nullptr, const_cast<char* const*>(argv), environ); rc != 0)
    return Status::from_errno(rc, what + " (fusermount3)");
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) return Status::ok();
  return Status(EPERM, what + ": fusermount3 -u -z failed (see its message above); unmount it as its owner or root");
}

// Unmounts dead DLFS mounts at `abs` until what is left is free, or refuses.
Status clear_dead_mounts(const std::string& path, const std::string& abs) {
  for (int cleared = 0; cleared <= kMaxDeadMounts; ++cleared) {
    DLFS_ASSIGN_OR_RETURN(auto table, read_mountinfo());
    const auto top = topmost_mount_at(table, abs);
    const MountVerdict v = judge_mountpoint(path, top, [&] { return probe_mount(abs, kMountProbeTimeout); });
    if (v.action == MountVerdict::Action::mount) return Status::ok();
    if (v.action == MountVerdict::Action::refuse) return Status(EBUSY, v.why);
    if (cleared == kMaxDeadMounts) break;
    DLFS_RETURN_IF_ERROR(detach_mount(abs));
    spdlog::warn("{}: unmounted {} (mount id {}); mounting afresh", quoted(abs), v.why, top->id);
  }
  return Status(EBUSY, quoted(path) + " still has a dead DLFS mount after " + std::to_string(kMaxDeadMounts) +
                           " were unmounted there");
}

// The usual checks once nothing is mounted at the path.
Result<std::string> check_empty_directory(const std::string& path, const std::string& abs) {
  struct stat st {};
  if (::stat(abs.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOTCONN)  // a dead mount above this path, not at it: not this daemon's to remove
      return Status(EBUSY, quoted(path) + " is inside a dead FUSE mount (Transport endpoint is not connected)");
    return Status::from_errno(err, quoted(path));
  }
  if (!S_ISDIR(st.st_mode)) return Status(ENOTDIR, quoted(path) + " is not a directory");
  DIR* d = ::opendir(abs.c_str());
  if (!d) return Status::from_errno(errno, quoted(path));
  bool empty = true;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") {
      empty = false;
      break;
    }
  }
  ::closedir(d);
  if (!empty) return Status(ENOTEMPTY, quoted(path) + " is not empty (mount on an empty directory)");
  return abs;
}

}  // namespace

MountVerdict judge_mountpoint(const std::string& path, const std::optional<MountEntry>& top,
                              const std::function<MountProbe()>& probe) {
  using Action = MountVerdict::Action;
  if (!top) return {Action::mount, {}};
  const std::string what = quoted(path) + " is busy: ";
  if (!is_dlfs_mount(*top))
    return {Action::refuse, what + "a " + top->fstype + " file system (source '" + top->source +
                                "') is mounted there, not DLFS; dlfsd leaves it alone (unmount it yourself or pick "
                                "another mountpoint)"};
  const MountProbe p = probe();
  switch (p.answer) {
    case MountProbe::Answer::not_connected:
      return {Action::unmount_dead,
              std::string("a DLFS mount whose daemon died (") + std::strerror(p.err ? p.err : ENOTCONN) + ")"};
    case MountProbe::Answer::answers:
      return {Action::refuse, what + "a running dlfsd serves it; stop that daemon first (dlfs-ctl unmount) or pick "
                                     "another mountpoint"};
    case MountProbe::Answer::no_answer:
      return {Action::refuse, what + "its DLFS mount did not answer within " +
                                  std::to_string(kMountProbeTimeout.count()) +
                                  " s (a stopped or overloaded dlfsd?) and may be live, so it is left alone; stop "
                                  "that daemon, or unmount it (fusermount3 -u -z) if it is hung"};
    case MountProbe::Answer::error:
      break;
  }
  return {Action::refuse, what + "its DLFS mount answers with an error (" + std::strerror(p.err) +
                              ") and is left alone; unmount it (fusermount3 -u -z) if its daemon is gone"};
}

MountProbe probe_mount(const std::string& path, std::chrono::milliseconds timeout) {
  // In a child process, so that a mount which never answers (its daemon
  // stopped) costs `timeout`, not a hang. Not a thread: with FUSE over
  // io_uring the kernel hands the request to the daemon's ring at once, and
  // a request handed over waits uninterruptibly for its answer; a thread
  // stuck so would keep this process from exiting. The child is killed at
  // the timeout (it dies once the request ends) and reaped by init.
  const pid_t child = ::fork();
  if (child == 0) {
    // Hold none of the parent's descriptors: a caller reading its output
    // (a shell's $(...)) would otherwise wait for this child too.
    const int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
      ::dup2(null_fd, 0);
      ::dup2(null_fd, 1);
      ::dup2(null_fd, 2);
    }
    ::close_range(3, ~0u, 0);
    struct statfs sf {};
    ::_exit(::statfs(path.c_str(), &sf) == 0 ? 0 : (errno & 0xff));
  }
  if (child < 0) return {MountProbe::Answer::error, errno};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(child, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (done == 0) {
    ::kill(child, SIGKILL);
    return {MountProbe::Answer::no_answer, 0};
  }
  if (done < 0 || !WIFEXITED(status)) return {MountProbe::Answer::error, EIO};
  const int err = WEXITSTATUS(status);
  if (err == 0) return {MountProbe::Answer::answers, 0};
  // ECONNABORTED: the kernel aborted the connection as its daemon died (the
  // same dead mount, as some kernels report it): nothing can serve it again.
  if (err == ENOTCONN || err == ECONNABORTED) return {MountProbe::Answer::not_connected, err};
  return {MountProbe::Answer::error, err};
}

Result<std::string> check_mountpoint(const std::string& path) {
  DLFS_ASSIGN_OR_RETURN(std::string abs, absolute_path(path));
  DLFS_RETURN_IF_ERROR(clear_dead_mounts(path, abs));
  return check_empty_directory(path, abs);
}

}  // namespace dlfs::fs
