// Sidecar files (lmdb_sidecar.h): a bounded read, and an atomic, durable write.
#include "provenance/lmdb_sidecar.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/unique_fd.h"
#include "provenance/lmdb_sidecar_body.h"
#include "provenance/lmdb_sidecar_bytes.h"
#include "provenance/lmdb_sidecar_header.h"

namespace dlfs::provenance::lmdb {

Result<Sidecar> read_sidecar_file(const std::string& path, const DecodeLimits& limits) {
  using namespace sidecar_detail;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::from_errno(errno, path);
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) return Status::from_errno(errno, path);
  if (!S_ISREG(st.st_mode)) return Status(EINVAL, path + ": not a regular file");
  // The largest file a valid sidecar within `limits` can be: refuse to read more.
  uint64_t max_size = kHeaderSize + kTrailerSize + max_body_bytes(limits.max_records);
  if (static_cast<uint64_t>(st.st_size) > max_size)
    return bad(path, num(st.st_size) + " bytes, larger than any sidecar of at most " + num(limits.max_records) +
                         " records");
  std::vector<std::byte> bytes(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::pread(fd.get(), bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::from_errno(errno, path);
    if (n == 0) break;  // shrank under us: decode reports the truncation
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  return decode_sidecar(bytes, path, limits);
}

namespace {

Status write_all(int fd, const std::vector<std::byte>& bytes, const std::string& what) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::from_errno(errno, what);
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

std::string parent_dir(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Status write_sidecar_file(const std::string& path, const Sidecar& s) {
  DLFS_RETURN_IF_ERROR(validate_sidecar(s, path));
  std::vector<std::byte> bytes = encode_sidecar(s);
  // Same directory, so the rename is atomic: a reader sees the old file or the
  // new one, never a partial write.
  std::string tmp = path + ".tmp.XXXXXX";
  UniqueFd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (!fd.valid()) return Status::from_errno(errno, "cannot create a temporary file for " + path);
  auto fail = [&](Status st) {
    ::unlink(tmp.c_str());
    return st;
  };
  // mkostemp creates 0600; a sidecar is as readable as the database next to it.
  if (::fchmod(fd.get(), 0644) != 0) return fail(Status::from_errno(errno, tmp));
  if (Status st = write_all(fd.get(), bytes, tmp); !st) return fail(st);
  if (::fsync(fd.get()) != 0) return fail(Status::from_errno(errno, tmp + ": fsync"));
  if (::close(fd.release()) != 0) return fail(Status::from_errno(errno, tmp + ": close"));
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail(Status::from_errno(errno, "rename to " + path));
  // Make the rename itself durable.
  std::string dir = parent_dir(path);
  UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dfd.valid() || ::fsync(dfd.get()) != 0) return Status::from_errno(errno, dir + ": fsync after writing " + path);
  return Status::ok();
}

}  // namespace dlfs::provenance::lmdb
