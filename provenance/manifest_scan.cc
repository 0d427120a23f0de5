#include "provenance/manifest_scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "common/unique_fd.h"

namespace dlfs::provenance {
namespace {

constexpr size_t kMaxExamples = 10;

int64_t mtime_of(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

void note(ScanReport& r, uint64_t& counter, const std::string& path, const char* why) {
  ++counter;
  if (r.examples.size() < kMaxExamples) r.examples.push_back(path + " (" + why + ")");
}

std::string join(const std::string& dir, const char* name) { return dir.empty() ? name : dir + "/" + name; }

// Opens the directory `rel` below `root` without following any symlink and
// without leaving the tree. Pending directories are kept as paths, not fds,
// so a wide tree cannot run the process out of descriptors.
int open_subdir(int root, const std::string& rel) {
  open_how how{};
  how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
  int fd = static_cast<int>(::syscall(SYS_openat2, root, rel.c_str(), &how, sizeof how));
  if (fd < 0 && errno == ENOSYS)  // kernels before 5.6: the final component at least is not followed
    fd = ::openat(root, rel.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  return fd;
}

// Walks the tree below `root`. Iterative over an explicit stack so that deep
// trees cannot overflow ours; at most one directory is open at a time.
void walk(int root, ScanResult& out, ScanReport& report) {
  std::vector<std::string> stack{""};
  while (!stack.empty()) {
    std::string cur = std::move(stack.back());
    stack.pop_back();
    int dfd = cur.empty() ? ::dup(root) : open_subdir(root, cur);
    if (dfd < 0) {
      note(report, report.unreadable, cur, "cannot open directory");
      continue;
    }
    DIR* d = ::fdopendir(dfd);
    if (!d) {
      ::close(dfd);
      note(report, report.unreadable, cur.empty() ? "." : cur, "cannot list directory");
      continue;
    }
    while (dirent* e = ::readdir(d)) {
      const char* name = e->d_name;
      if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
      std::string rel = join(cur, name);
      struct stat st {};
      if (::fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        note(report, report.unreadable, rel, "cannot stat");
        continue;
      }
      if (S_ISLNK(st.st_mode)) {
        note(report, report.skipped_symlinks, rel, "symlink, not followed");
      } else if (S_ISREG(st.st_mode)) {
        out.files.push_back({std::move(rel), static_cast<uint64_t>(st.st_size), mtime_of(st), st.st_mode & 07777u,
                             static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_dev)});
      } else if (S_ISDIR(st.st_mode)) {
        if (::faccessat(dfd, name, R_OK | X_OK, 0) != 0) {
          note(report, report.unreadable, rel, "cannot open directory");
          continue;
        }
        out.dirs.push_back({rel, 0, mtime_of(st), st.st_mode & 07777u});
        stack.push_back(std::move(rel));
      } else {
        note(report, report.skipped_special, rel, "special file");
      }
    }
    ::closedir(d);
  }
}

}  // namespace

Result<ScanResult> scan_tree(const std::string& root, ScanReport& report) {
  const std::string what = "dataset root '" + root + "'";
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0) return Status::from_errno(errno, what);
  if (!S_ISDIR(st.st_mode)) return Status(ENOTDIR, what + " is not a directory");
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::from_errno(errno, what);
  // opendir on a directory we cannot list fails only at fdopendir; check now
  // so an unreadable root is an error, not an empty dataset.
  if (::access(root.c_str(), R_OK | X_OK) != 0) {
    ::close(fd);
    return Status::from_errno(errno, what);
  }
  ScanResult out;
  out.dirs.push_back({"", 0, static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                      st.st_mode & 07777u});
  UniqueFd root_fd(fd);
  walk(root_fd.get(), out, report);
  return out;
}

}  // namespace dlfs::provenance
