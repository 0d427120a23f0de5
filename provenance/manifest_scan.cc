#include "provenance/manifest_scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

#include "common/unique_fd.h"

namespace dlfs::provenance {
namespace {

constexpr size_t kMaxExamples = 10;
// One getdents64 call lists a typical class directory (1,000 entries of
// ~32 bytes) whole; glibc's readdir buffer takes 32 KiB at a time.
constexpr size_t kDirentBuffer = 128 << 10;

int64_t mtime_of(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

std::string join(const std::string& dir, std::string_view name) {
  std::string out;
  out.reserve(dir.size() + 1 + name.size());
  if (!dir.empty()) out.append(dir).push_back('/');
  out.append(name);
  return out;
}

// Opens the directory `rel` below `root` without following any symlink and
// without leaving the tree. Pending directories are kept as paths, not fds,
// so a wide tree cannot run the process out of descriptors: each worker holds
// one directory open at a time.
int open_subdir(int root, const std::string& rel) {
  open_how how{};
  how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
  int fd = static_cast<int>(::syscall(SYS_openat2, root, rel.c_str(), &how, sizeof how));
  if (fd < 0 && errno == ENOSYS)  // kernels before 5.6: the final component at least is not followed
    fd = ::openat(root, rel.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  return fd;
}

// What one worker skipped. Examples are the byte-wise smallest few, so the
// merged report is the same whichever thread met which entry first.
struct Notes {
  uint64_t symlinks = 0, special = 0, unreadable = 0;
  std::vector<std::string> examples;  // sorted, at most kMaxExamples

  void example(std::string text) {
    if (examples.size() == kMaxExamples && text >= examples.back()) return;
    examples.insert(std::upper_bound(examples.begin(), examples.end(), text), std::move(text));
    if (examples.size() > kMaxExamples) examples.pop_back();
  }
  void note(uint64_t& counter, const std::string& path, const std::string& why) {
    ++counter;
    example(path + " (" + why + ")");
  }
  void merge_into(ScanReport& r) {
    r.skipped_symlinks += symlinks;
    r.skipped_special += special;
    r.unreadable += unreadable;
    Notes all;
    all.examples = std::move(r.examples);
    std::sort(all.examples.begin(), all.examples.end());
    if (all.examples.size() > kMaxExamples) all.examples.resize(kMaxExamples);
    for (auto& e : examples) all.example(std::move(e));
    r.examples = std::move(all.examples);
  }
};

// A directory waiting to be listed, with what its parent's listing saw of it.
struct PendingDir {
  std::string path;
  int64_t mtime_ns = 0;
  uint32_t mode = 0;
  uint32_t uid = 0, gid = 0;
};

// The shared work: a stack of directories (depth first keeps it short) and
// the number being listed, whose subdirectories may still come.
class DirQueue {
 public:
  explicit DirQueue(PendingDir root) { stack_.push_back(std::move(root)); }

  // The next directory, or false when every directory has been listed.
  bool pop(PendingDir& out) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !stack_.empty() || busy_ == 0; });
    if (stack_.empty()) return false;
    out = std::move(stack_.back());
    stack_.pop_back();
    ++busy_;
    return true;
  }
  // The directory popped last by this worker is listed; these were in it.
  void done(std::vector<PendingDir>& found) {
    {
      std::lock_guard lock(mu_);
      for (auto& d : found) stack_.push_back(std::move(d));
      --busy_;
    }
    found.clear();
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<PendingDir> stack_;
  size_t busy_ = 0;
};

// One worker's state and results.
struct Worker {
  std::vector<ScannedDir> dirs;
  Notes notes;
  std::unique_ptr<char[]> buf{new char[kDirentBuffer]};
  std::vector<PendingDir> found;  // subdirectories of the directory being listed
};

// Whether we may search `dfd` (list names is not enough: stat needs search).
// Skipped when every class of user has the x bit: a denial then needs an ACL
// entry naming us, whose entries would each be reported as "cannot stat".
bool can_search(int dfd, uint32_t mode) {
  if ((mode & 0111) == 0111) return true;
  return ::faccessat(dfd, ".", X_OK, 0) == 0;
}

// The entry's stat, tried again when it fails for a reason that can pass:
// a network file system under load answers EIO, ETIMEDOUT or ESTALE now and
// then, and a file left out of the scan is left out of the dataset. Returns
// 0 or the last errno; errors that stay (gone, no permission) are not retried.
int stat_entry(int dfd, const char* name, struct stat* st) {
  constexpr int kRetries = 3;  // after 10, 40 and 160 ms
  for (int attempt = 0;; ++attempt) {
    if (::fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) == 0) return 0;
    const int err = errno;
    const bool lasting = err == ENOENT || err == EACCES || err == EPERM || err == ENOTDIR || err == ENAMETOOLONG ||
                         err == ELOOP;
    if (lasting || attempt == kRetries) return err;
    std::this_thread::sleep_for(std::chrono::milliseconds(10 << (2 * attempt)));
  }
}

void add_entry(Worker& w, int dfd, ScannedDir& dir, const char* name, unsigned char type) {
  // d_type answers for symlinks and special files without a stat; a regular
  // file or a directory needs one for its size and times, and whatever the
  // stat finds wins (the entry may have been replaced since the listing).
  if (type == DT_LNK) return w.notes.note(w.notes.symlinks, join(dir.path, name), "symlink, not followed");
  if (type == DT_FIFO || type == DT_SOCK || type == DT_CHR || type == DT_BLK)
    return w.notes.note(w.notes.special, join(dir.path, name), "special file");
  struct stat st {};
  if (const int err = stat_entry(dfd, name, &st); err != 0)
    return w.notes.note(w.notes.unreadable, join(dir.path, name), std::string("cannot stat: ") + std::strerror(err));
  if (S_ISREG(st.st_mode)) {
    size_t len = std::strlen(name);
    ScannedFile f;
    f.name_off = static_cast<uint32_t>(dir.names.size());
    f.name_len = static_cast<uint16_t>(len);
    f.mode = static_cast<uint16_t>(st.st_mode & 07777u);
    f.uid = st.st_uid;
    f.gid = st.st_gid;
    f.size = static_cast<uint64_t>(st.st_size);
    f.mtime_ns = mtime_of(st);
    f.inode = static_cast<uint64_t>(st.st_ino);
    f.device = static_cast<uint64_t>(st.st_dev);
    dir.names.append(name, len);
    dir.files.push_back(f);
  } else if (S_ISDIR(st.st_mode)) {
    w.found.push_back({join(dir.path, name), mtime_of(st), st.st_mode & 07777u, st.st_uid, st.st_gid});
  } else if (S_ISLNK(st.st_mode)) {
    w.notes.note(w.notes.symlinks, join(dir.path, name), "symlink, not followed");
  } else {
    w.notes.note(w.notes.special, join(dir.path, name), "special file");
  }
}

// Lists one directory into w.dirs (regular files) and w.found (subdirectories).
void list_dir(int root, PendingDir&& pending, Worker& w) {
  UniqueFd dfd(pending.path.empty() ? ::dup(root) : open_subdir(root, pending.path));
  if (!dfd.valid() || !can_search(dfd.get(), pending.mode))
    return w.notes.note(w.notes.unreadable, pending.path, "cannot open directory");
  ScannedDir dir;
  dir.path = std::move(pending.path);
  dir.mtime_ns = pending.mtime_ns;
  dir.mode = pending.mode;
  dir.uid = pending.uid;
  dir.gid = pending.gid;
  for (;;) {
    long n = ::syscall(SYS_getdents64, dfd.get(), w.buf.get(), kDirentBuffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      // What was listed so far stays; the report says the listing is short.
      w.notes.note(w.notes.unreadable, dir.path.empty() ? "." : dir.path, "cannot list directory");
      break;
    }
    for (long off = 0; off < n;) {
      const auto* e = reinterpret_cast<const dirent64*>(w.buf.get() + off);
      off += e->d_reclen;
      const char* name = e->d_name;
      if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
      add_entry(w, dfd.get(), dir, name, e->d_type);
    }
  }
  w.dirs.push_back(std::move(dir));
}

void work(int root, DirQueue& queue, Worker& w) {
  PendingDir next;
  while (queue.pop(next)) {
    list_dir(root, std::move(next), w);
    queue.done(w.found);
  }
}

}  // namespace

uint64_t ScanResult::file_count() const {
  uint64_t n = 0;
  for (const auto& d : dirs) n += d.files.size();
  return n;
}

unsigned default_scan_threads() {
  long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  return static_cast<unsigned>(std::clamp<long>(2 * cpus, 1, 8));
}

Result<ScanResult> scan_tree(const std::string& root, ScanReport& report, const ScanOptions& options) {
  const std::string what = "dataset root '" + root + "'";
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0) return Status::from_errno(errno, what);
  if (!S_ISDIR(st.st_mode)) return Status(ENOTDIR, what + " is not a directory");
  UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.valid()) return Status::from_errno(errno, what);
  // An unreadable root is an error, not an empty dataset.
  if (::access(root.c_str(), R_OK | X_OK) != 0) return Status::from_errno(errno, what);

  DirQueue queue(PendingDir{"", mtime_of(st), st.st_mode & 07777u, st.st_uid, st.st_gid});
  // Each worker holds a 128 KiB listing buffer: a bound keeps a silly request cheap.
  const unsigned want = std::min(options.threads ? options.threads : default_scan_threads(), 256u);
  std::vector<Worker> workers(want);
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < want; ++i) {
    try {
      threads.emplace_back(work, root_fd.get(), std::ref(queue), std::ref(workers[i]));
    } catch (const std::system_error&) {
      break;  // no more threads to be had: the ones running (and this one) do the work
    }
  }
  work(root_fd.get(), queue, workers[0]);
  for (auto& t : threads) t.join();

  ScanResult out;
  size_t total = 0;
  for (const auto& w : workers) total += w.dirs.size();
  out.dirs.reserve(total);
  for (auto& w : workers) {
    for (auto& d : w.dirs) out.dirs.push_back(std::move(d));
    w.notes.merge_into(report);
  }
  return out;
}

}  // namespace dlfs::provenance
