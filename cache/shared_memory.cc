#include "cache/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/units.h"

namespace dlfs::cache {
namespace {

// A memfd of `len` bytes mapped read-write, or an error; `flags` adds MFD_HUGETLB.
Status map_memfd(const std::string& name, uint64_t len, unsigned flags, UniqueFd& fd, void*& p) {
  fd.reset(::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING | flags));
  if (!fd.valid()) return Status::from_errno(errno, "memfd_create " + name);
  if (::ftruncate(fd.get(), static_cast<off_t>(len)) != 0)
    return Status::from_errno(errno, "cannot size " + name + " to " + format_size(len));
  if (len == 0) return Status::ok();
  p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) {
    p = nullptr;
    return Status::from_errno(errno, "cannot map " + format_size(len) + " of " + name);
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<SharedMemory>> SharedMemory::create(const std::string& name, uint64_t bytes,
                                                           bool huge_pages) {
  std::unique_ptr<SharedMemory> m(new SharedMemory());
  m->bytes_ = bytes;
  void* p = nullptr;
  Status st = Status(ENOMEM, "no huge pages tried");
  if (huge_pages && bytes != 0) {
    // Shared hugetlb mappings reserve their pages at mmap: a shortage fails
    // here (not with SIGBUS later), and ordinary pages are used instead.
    m->map_len_ = round_up(bytes, kHugePageBytes);
    st = map_memfd(name, m->map_len_, MFD_HUGETLB, m->fd_, p);
    m->huge_ = st.is_ok();
  }
  if (!m->huge_) {
    m->map_len_ = bytes == 0 ? 0 : round_up(bytes, static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
    DLFS_RETURN_IF_ERROR(map_memfd(name, m->map_len_, 0, m->fd_, p));
    if (huge_pages && p != nullptr) ::madvise(p, m->map_len_, MADV_HUGEPAGE);  // harmless if refused
  }
  m->base_ = static_cast<std::byte*>(p);
  // Sealed after the daemon's own writable mapping: that one keeps working,
  // any later writable use of the file (by anyone) fails.
  if (::fcntl(m->fd_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0)
    return Status::from_errno(errno, "cannot seal " + name + " against writes");
  return m;
}

SharedMemory::~SharedMemory() {
  if (base_ != nullptr) ::munmap(base_, map_len_);
}

}  // namespace dlfs::cache
