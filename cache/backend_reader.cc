#include "cache/backend_reader.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace dlfs::cache {
namespace {

// O_NONBLOCK: a file swapped for a FIFO after the scan must not hang the
// opener; it has no effect on reads of regular files.
constexpr int kFileFlags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;

int sys_openat2(int dirfd, const char* path, uint64_t flags, uint64_t resolve) {
  open_how how{};
  how.flags = flags;
  how.resolve = resolve;
  return static_cast<int>(::syscall(SYS_openat2, dirfd, path, &how, sizeof how));
}

// openat2 appeared in Linux 5.6; probe it once per reader on the root itself.
bool probe_openat2(int root) {
  int fd = sys_openat2(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH);
  if (fd < 0) return false;  // ENOSYS (old kernel) or blocked by a seccomp filter
  ::close(fd);
  return true;
}

// Pre-openat2 kernels: walk the path one component at a time, refusing
// symlinks at every step. Manifest paths are canonical (no "." or "..").
int open_by_walking(int root, const std::string& path, int file_flags) {
  UniqueFd dir;
  int at = root;
  size_t begin = 0;
  for (;;) {
    size_t slash = path.find('/', begin);
    std::string part = path.substr(begin, slash == std::string::npos ? std::string::npos : slash - begin);
    if (slash == std::string::npos) return ::openat(at, part.c_str(), file_flags);
    int fd = ::openat(at, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    dir.reset(fd);
    at = fd;
    begin = slash + 1;
  }
}

std::string quoted(const std::string& path) { return "backend file '" + path + "'"; }

// The error of every read of a file that changed since the scan.
Status changed_error(const std::string& path, const std::string& what) {
  return Status(EIO, quoted(path) + " changed since the scan (" + what +
                         "); reads that need its bytes from the backend fail");
}

}  // namespace

Result<std::unique_ptr<BackendReader>> BackendReader::open(const provenance::Manifest& manifest, unsigned max_requests,
                                                           std::string label) {
  int fd = ::open(manifest.root().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::from_errno(errno, "backend root " + manifest.root());
  UniqueFd root(fd);
  bool use_openat2 = probe_openat2(root.get());
  if (label.empty()) label = manifest.root();
  return std::unique_ptr<BackendReader>(
      new BackendReader(manifest, std::move(root), use_openat2, max_requests, std::move(label)));
}

Status BackendReader::changed(uint32_t file, const std::string& path, const std::string& what) const {
  changed_.mark(file, path, what);
  return changed_error(path, what);
}

Result<UniqueFd> BackendReader::open_file(uint32_t file, const std::string& path, bool direct) const {
  const int flags = kFileFlags | (direct ? O_DIRECT : 0);
  int fd = use_openat2_ ? sys_openat2(root_.get(), path.c_str(), flags, RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH)
                        : open_by_walking(root_.get(), path, flags);
  if (fd < 0) {
    int err = errno;
    // ELOOP: the file or a directory above it is a symlink now (O_NOFOLLOW /
    // RESOLVE_NO_SYMLINKS); ENOENT/ENOTDIR: it or a directory above it is gone.
    if (err == ELOOP || err == EXDEV)
      return changed(file, path, "it or a directory above it is a symlink now; not following it");
    if (err == ENOENT || err == ENOTDIR) return changed(file, path, "vanished");
    return Status::from_errno(err, quoted(path) + " cannot be opened");
  }
  UniqueFd f(fd);
  DLFS_RETURN_IF_ERROR(check_pin(file, path, fd));
  return f;
}

Status BackendReader::check_pin(uint32_t file, const std::string& path, int fd) const {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::from_errno(errno, quoted(path) + " cannot be stat'ed");
  if (!S_ISREG(st.st_mode)) return changed(file, path, "no longer a regular file");
  std::string what = describe_change(manifest_.file_identity(file), st);
  return what.empty() ? Status::ok() : changed(file, path, what);
}

bool BackendReader::direct_fits(uint64_t offset, std::span<std::byte> out) const {
  return direct_ok_.load(std::memory_order_relaxed) && out.size() >= kDirectAlign && offset % kDirectAlign == 0 &&
         reinterpret_cast<uintptr_t>(out.data()) % kDirectAlign == 0;
}

Result<size_t> BackendReader::pread_buffered(int fd, uint64_t offset, std::span<std::byte> out,
                                              const std::string& path) const {
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::from_errno(errno, quoted(path) + " read failed at offset " + std::to_string(offset + done));
    }
    if (n == 0) break;  // the file shrank under the read: the pin check names the change
    done += static_cast<size_t>(n);
  }
  return done;
}

// O_DIRECT: the whole aligned blocks straight into `out` (the device writes
// them there, no page-cache copy), the last partial block through a small
// aligned bounce. EINVAL: this file system refuses direct I/O here.
Result<size_t> BackendReader::pread_direct(int fd, uint64_t offset, std::span<std::byte> out,
                                            const std::string& path) const {
  const size_t body = out.size() / kDirectAlign * kDirectAlign;
  auto done = pread_buffered(fd, offset, out.first(body), path);
  if (!done || *done < body || body == out.size()) return done;
  alignas(kDirectAlign) std::byte block[kDirectAlign];
  auto tail = pread_buffered(fd, offset + body, std::span<std::byte>(block, kDirectAlign), path);
  if (!tail) return tail;
  const size_t n = std::min(*tail, out.size() - body);
  std::memcpy(out.data() + body, block, n);
  return body + n;
}

Result<UniqueFd> BackendReader::open_checked(uint32_t file) const {
  auto fd = open_checked_uncounted(file);
  if (!fd) errors_.fetch_add(1, std::memory_order_relaxed);
  return fd;
}

Status BackendReader::read_file(uint32_t file, uint64_t offset, std::span<std::byte> out, CacheUse use) const {
  Status s = read_file_uncounted(file, offset, out, use);
  if (!s) errors_.fetch_add(1, std::memory_order_relaxed);
  return s;
}

Result<UniqueFd> BackendReader::open_checked_uncounted(uint32_t file) const {
  std::string path = manifest_.file_path(file);
  if (changed_.contains(file)) return changed_error(path, changed_.what(file));
  RequestGate::Ticket ticket(gate_);  // a metadata request on a parallel FS
  return open_file(file, path, false);
}

Status BackendReader::read_file_uncounted(uint32_t file, uint64_t offset, std::span<std::byte> out,
                                          CacheUse use) const {
  if (out.empty()) return Status::ok();
  std::string path = manifest_.file_path(file);
  if (changed_.contains(file))  // known: no syscall, and never bytes of another version
    return changed_error(path, changed_.what(file));
  RequestGate::Ticket ticket(gate_);  // the open counts: on a parallel FS it is a metadata request
  // Bytes not to be kept in the page cache: read them past it where the
  // file system allows (the caller holds them; no copy, no pages to drop).
  bool direct = use == CacheUse::drop && direct_fits(offset, out);
  // EINVAL from the open or the read: the file system has no O_DIRECT (or
  // not at this alignment): the ordinary way, now and from now on.
  auto refused = [&](const Status& s) { return direct && s.err() == EINVAL; };
  auto give_up_direct = [&] {
    direct_ok_.store(false, std::memory_order_relaxed);
    direct = false;
    return open_file(file, path, false);
  };
  auto fd = open_file(file, path, direct);
  if (!fd && refused(fd.status())) fd = give_up_direct();
  if (!fd) return fd.status();
  auto done = direct ? pread_direct(fd->get(), offset, out, path) : pread_buffered(fd->get(), offset, out, path);
  if (!done && refused(done.status())) {
    fd = give_up_direct();
    if (!fd) return fd.status();
    done = pread_buffered(fd->get(), offset, out, path);
  }
  if (!done) return done.status();
  if (direct) direct_reads_.fetch_add(1, std::memory_order_relaxed);
  // A rewrite while we read moved mtime (or size) before its bytes landed:
  // what we read is the pinned version only if the file still matches.
  DLFS_RETURN_IF_ERROR(check_pin(file, path, fd->get()));
  // Advice only: a failure changes nothing about the bytes read.
  if (use != CacheUse::keep && !direct)
    (void)::posix_fadvise(fd->get(), static_cast<off_t>(offset), static_cast<off_t>(*done), POSIX_FADV_DONTNEED);
  if (*done < out.size())  // never hand out zero-filled bytes as data
    return Status(EIO, quoted(path) + " is shorter than when scanned (wanted " + std::to_string(out.size()) +
                           " bytes at offset " + std::to_string(offset) + ")");
  return Status::ok();
}

Status BackendReader::read(uint64_t data_offset, std::span<std::byte> out, CacheUse use) const {
  const uint64_t total = manifest_.total_bytes();
  if (data_offset > total || out.size() > total - data_offset)
    return Status(EINVAL, "backend read of " + std::to_string(out.size()) + " bytes at byte-space offset " +
                              std::to_string(data_offset) + " goes past the dataset end (" +
                              std::to_string(total) + " bytes)");
  size_t done = 0;
  while (done < out.size()) {
    uint64_t pos = data_offset + done;
    uint32_t f = manifest_.file_at(pos);  // never a zero-length file
    uint64_t in_file = pos - manifest_.file_data_offset(f);
    uint64_t n = std::min<uint64_t>(out.size() - done, manifest_.file_size(f) - in_file);
    DLFS_RETURN_IF_ERROR(read_file(f, in_file, out.subspan(done, n), use));
    done += n;
  }
  return Status::ok();
}

}  // namespace dlfs::cache
