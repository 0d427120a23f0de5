#include "fs/kernel/backing_files.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace dlfs::fs {
namespace {

// FUSE_DEV_IOC_BACKING_OPEN's argument (include/uapi/linux/fuse.h; not in libfuse 3.14's headers).
struct BackingMap {  // struct fuse_backing_map
  int32_t fd;
  uint32_t flags;
  uint64_t padding;
};
constexpr unsigned long kIocBackingOpen = _IOW(229, 1, BackingMap);  // FUSE_DEV_IOC_BACKING_OPEN
constexpr unsigned long kIocBackingClose = _IOW(229, 2, uint32_t);   // FUSE_DEV_IOC_BACKING_CLOSE

}  // namespace

bool BackingFiles::join_locked(Entry& e, Open& out) {
  if (e.passthrough_opens > 0) {
    ++e.passthrough_opens;
    out = Open{OpenMode::passthrough, e.backing_id, UniqueFd()};
    return true;
  }
  if (e.cached_opens > 0) {
    ++e.cached_opens;
    out = Open{OpenMode::cached, 0, UniqueFd()};
    return true;
  }
  return false;
}

BackingFiles::Open BackingFiles::open_passthrough(uint64_t ino, const std::function<UniqueFd()>& source,
                                                  Status* why) {
  Open out;
  {
    std::lock_guard lk(mu_);
    if (join_locked(by_ino_[ino], out)) return out;
  }
  // Outside the lock: opening a backend file may wait on a disk or a server.
  int32_t id = 0;
  UniqueFd fd = source();
  if (fd.valid()) {
    auto r = registrar_.open(fd.get());
    if (r) {
      id = *r;
      registered_.fetch_add(1, std::memory_order_relaxed);
    } else if (why) {
      *why = r.status();
    }
  }
  int32_t unused = 0;
  {
    std::lock_guard lk(mu_);
    Entry& e = by_ino_[ino];
    if (join_locked(e, out)) {  // another open of it came first
      unused = id;
    } else if (id > 0) {
      e.backing_id = id;
      e.passthrough_opens = 1;
      // The kernel holds its own reference; the caller may still use this one.
      out = Open{OpenMode::passthrough, id, std::move(fd)};
    } else {
      e.cached_opens = 1;
      out = Open{OpenMode::cached, 0, UniqueFd()};
    }
  }
  if (unused > 0) registrar_.close(unused);
  return out;
}

BackingFiles::Open BackingFiles::open_cached(uint64_t ino) {
  std::lock_guard lk(mu_);
  Open out;
  Entry& e = by_ino_[ino];
  if (!join_locked(e, out)) e.cached_opens = 1;
  return out;
}

void BackingFiles::release(uint64_t ino, OpenMode mode) {
  if (mode == OpenMode::plain) return;
  int32_t close_id = 0;
  {
    std::lock_guard lk(mu_);
    auto it = by_ino_.find(ino);
    if (it == by_ino_.end()) return;
    Entry& e = it->second;
    if (mode == OpenMode::passthrough && e.passthrough_opens > 0 && --e.passthrough_opens == 0) {
      close_id = e.backing_id;
      e.backing_id = 0;
    }
    if (mode == OpenMode::cached && e.cached_opens > 0) --e.cached_opens;
    if (e.passthrough_opens == 0 && e.cached_opens == 0) by_ino_.erase(it);
  }
  // The kernel took its reference at each open; the id is only for new ones.
  if (close_id > 0) registrar_.close(close_id);
}

uint64_t BackingFiles::live_ids() const {
  std::lock_guard lk(mu_);
  uint64_t n = 0;
  for (const auto& [ino, e] : by_ino_) n += e.backing_id > 0 ? 1 : 0;
  return n;
}

BackingRegistrar kernel_registrar(int fuse_fd) {
  BackingRegistrar r;
  r.open = [fuse_fd](int fd) -> Result<int32_t> {
    BackingMap map{fd, 0, 0};
    const int id = ::ioctl(fuse_fd, kIocBackingOpen, &map);
    if (id < 0)
      return Status::from_errno(errno, "the kernel refused a FUSE passthrough backing file (FUSE_DEV_IOC_BACKING_OPEN" +
                                           std::string(errno == EPERM ? ", which needs CAP_SYS_ADMIN)" : ")"));
    return static_cast<int32_t>(id);
  };
  r.close = [fuse_fd](int32_t id) {
    uint32_t arg = static_cast<uint32_t>(id);
    (void)::ioctl(fuse_fd, kIocBackingClose, &arg);  // fails only for an unknown id: nothing to undo
  };
  return r;
}

BackingFiles::BackingFiles() {
  registrar_.open = [](int) -> Result<int32_t> { return Status(ENODEV, "no FUSE session to register with"); };
  registrar_.close = [](int32_t) {};
}

void PrefetchedFiles::put(uint64_t ino, UniqueFd fd) {
  UniqueFd evicted;  // closed outside the lock
  std::lock_guard lk(mu_);
  if (capacity_ == 0) return;
  if (fifo_.size() >= capacity_) {
    evicted = std::move(fifo_.front().second);
    fifo_.pop_front();
  }
  fifo_.emplace_back(ino, std::move(fd));
}

UniqueFd PrefetchedFiles::take(uint64_t ino) {
  std::lock_guard lk(mu_);
  // Newest first: the OPEN follows its LOOKUP closely.
  for (auto it = fifo_.rbegin(); it != fifo_.rend(); ++it) {
    if (it->first != ino) continue;
    UniqueFd fd = std::move(it->second);
    fifo_.erase(std::next(it).base());
    return fd;
  }
  return UniqueFd();
}

void PrefetchedFiles::clear() {
  std::deque<std::pair<uint64_t, UniqueFd>> gone;
  std::lock_guard lk(mu_);
  gone.swap(fifo_);
}

size_t PrefetchedFiles::size() const {
  std::lock_guard lk(mu_);
  return fifo_.size();
}

}  // namespace dlfs::fs
