// A backend that fails on purpose, for the scenarios (LD_PRELOAD into dlfsd):
// disks and parallel file systems return EIO, short reads and slow reads, and
// none of that can be made to happen on this machine's disk. pread is how
// dlfsd reads dataset bytes (cache/backend_reader.cc); fstatat is how its scan
// learns each file's size (provenance/manifest_scan.cc); readdir stays real.
//
// Which files misbehave is chosen by fnmatch(3) patterns on the file's path
// (from /proc/self/fd, so every way of opening it is covered):
//   DLFS_FAULT_EIO=PATTERN        every pread fails with EIO
//   DLFS_FAULT_SHORT=PATTERN      every pread returns at most a third of what
//                                 was asked (at least 1 byte): callers must loop
//   DLFS_FAULT_DELAY=PATTERN      every pread first sleeps DLFS_FAULT_DELAY_MS
//                                 (default 20) milliseconds
//   DLFS_FAULT_NO_DIRECT=PATTERN  a pread on an fd opened with O_DIRECT fails
//                                 with EINVAL, as on a file system that has
//                                 no direct I/O (or not at that alignment)
//   DLFS_FAULT_STAT_EIO=PATTERN   fstatat of a matching path fails with EIO
//                                 the first DLFS_FAULT_STAT_TIMES (default 1)
//                                 times for each path, then works: a network
//                                 file system's passing error
// With DLFS_FAULT_LOG=FILE every fault injected appends a line to FILE.
// Both symbols of each are defined below; the build's large-file mode would
// rename pread to pread64 (fstatat to fstatat64) in the headers and make them one.
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <sys/stat.h>

#include <map>
#include <mutex>
#include <string>

namespace {

using pread_fn = ssize_t (*)(int, void*, size_t, off_t);

// The path an fd was opened at ("" if unknown).
std::string path_of(int fd) {
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  return n < 0 ? std::string() : std::string(path, static_cast<size_t>(n));
}

bool matches(const std::string& path, const char* env_name) {
  const char* pattern = getenv(env_name);
  return pattern != nullptr && *pattern != '\0' && fnmatch(pattern, path.c_str(), 0) == 0;
}

// One line per fault injected ("eio PATH"), appended to DLFS_FAULT_LOG, so
// a scenario can check that its faults were really hit (write(2) with
// O_APPEND: lines of concurrent threads do not interleave).
void note(const char* kind, const std::string& path) {
  const char* log = getenv("DLFS_FAULT_LOG");
  if (log == nullptr) return;
  const int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const std::string line = std::string(kind) + " " + path + "\n";
  (void)!write(fd, line.data(), line.size());
  close(fd);
}

ssize_t faulty_pread(pread_fn real, int fd, void* buf, size_t count, off_t offset) {
  const std::string path = path_of(fd);
  if (matches(path, "DLFS_FAULT_EIO")) {
    note("eio", path);
    errno = EIO;
    return -1;
  }
  if ((fcntl(fd, F_GETFL) & O_DIRECT) != 0 && matches(path, "DLFS_FAULT_NO_DIRECT")) {
    note("nodirect", path);
    errno = EINVAL;
    return -1;
  }
  if (matches(path, "DLFS_FAULT_DELAY")) {
    const char* ms = getenv("DLFS_FAULT_DELAY_MS");
    const long delay = ms ? atol(ms) : 20;
    timespec ts{delay / 1000, (delay % 1000) * 1000000L};
    nanosleep(&ts, nullptr);
    note("delay", path);
  }
  if (count > 1 && matches(path, "DLFS_FAULT_SHORT")) {
    note("short", path);
    count = count / 3 > 0 ? count / 3 : 1;
  }
  return real(fd, buf, count, offset);
}

using fstatat_fn = int (*)(int, const char*, struct stat*, int);

// How often each path's stat has failed so far.
std::mutex stat_mu;
std::map<std::string, long> stat_failures;

int faulty_fstatat(fstatat_fn real, int dirfd, const char* name, struct stat* st, int flags) {
  if (name != nullptr && name[0] != '\0' && getenv("DLFS_FAULT_STAT_EIO") != nullptr) {
    const std::string path = name[0] == '/' ? std::string(name) : path_of(dirfd) + "/" + name;
    if (matches(path, "DLFS_FAULT_STAT_EIO")) {
      const char* times = getenv("DLFS_FAULT_STAT_TIMES");
      const long limit = times ? atol(times) : 1;
      std::lock_guard<std::mutex> lock(stat_mu);
      if (stat_failures[path]++ < limit) {
        note("stat_eio", path);
        errno = EIO;
        return -1;
      }
    }
  }
  return real(dirfd, name, st, flags);
}

}  // namespace

extern "C" int fstatat(int dirfd, const char* name, struct stat* st, int flags) {
  static fstatat_fn real;
  if (!real) real = reinterpret_cast<fstatat_fn>(dlsym(RTLD_NEXT, "fstatat"));
  return faulty_fstatat(real, dirfd, name, st, flags);
}

// On x86-64 struct stat64 is struct stat: one implementation serves both.
extern "C" int fstatat64(int dirfd, const char* name, struct stat64* st, int flags) {
  static fstatat_fn real;
  if (!real) real = reinterpret_cast<fstatat_fn>(dlsym(RTLD_NEXT, "fstatat64"));
  return faulty_fstatat(real, dirfd, name, reinterpret_cast<struct stat*>(st), flags);
}

extern "C" ssize_t pread(int fd, void* buf, size_t count, off_t offset) {
  static pread_fn real;
  if (!real) real = reinterpret_cast<pread_fn>(dlsym(RTLD_NEXT, "pread"));
  return faulty_pread(real, fd, buf, count, offset);
}

extern "C" ssize_t pread64(int fd, void* buf, size_t count, off_t offset) {
  static pread_fn real;
  if (!real) real = reinterpret_cast<pread_fn>(dlsym(RTLD_NEXT, "pread64"));
  return faulty_pread(real, fd, buf, count, offset);
}
