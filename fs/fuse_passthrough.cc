#include "fs/fuse_passthrough.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "fs/fuse_adapter.h"

namespace dlfs::fs {
namespace {

// The FUSE protocol bits of 7.40 (Linux 6.9) that libfuse 3.14's headers
// lack (include/uapi/linux/fuse.h). Offsets are into the structs as sent.
constexpr uint32_t kOpInit = 26;               // FUSE_INIT
constexpr size_t kInHeaderSize = 40;           // struct fuse_in_header
constexpr size_t kInitInFlags = 12;            // fuse_init_in.flags
constexpr size_t kInitInFlags2 = 16;           // fuse_init_in.flags2
constexpr uint32_t kInitExt = 1u << 30;        // FUSE_INIT_EXT: flags2 is valid
constexpr uint32_t kParallelDirops = 1u << 18;  // FUSE_PARALLEL_DIROPS, in flags
constexpr uint32_t kPassthroughBit2 = 1u << 5;  // FUSE_PASSTHROUGH (1ULL << 37), in flags2
constexpr uint32_t kOverIoUringBit2 = 1u << 9;  // FUSE_OVER_IO_URING (1ULL << 41), in flags2 (fs/fuse_uring.h)
constexpr size_t kInitOutFlags = 12;           // fuse_init_out.flags
constexpr size_t kInitOutFlags2 = 32;          // fuse_init_out.flags2
constexpr size_t kInitOutStackDepth = 36;      // fuse_init_out.max_stack_depth
constexpr size_t kOpenOutSize = 16;            // struct fuse_open_out
constexpr size_t kOpenOutFlags = 8;            // fuse_open_out.open_flags
constexpr size_t kOpenOutBackingId = 12;       // fuse_open_out.backing_id
constexpr uint32_t kOpenPassthrough = 1u << 7;  // FOPEN_PASSTHROUGH
// Backing files may not themselves be on a passthrough (stacked) mount.
constexpr uint32_t kStackDepth = 1;

struct BackingMap {  // struct fuse_backing_map
  int32_t fd;
  uint32_t flags;
  uint64_t padding;
};
constexpr unsigned long kIocBackingOpen = _IOW(229, 1, BackingMap);  // FUSE_DEV_IOC_BACKING_OPEN
constexpr unsigned long kIocBackingClose = _IOW(229, 2, uint32_t);   // FUSE_DEV_IOC_BACKING_CLOSE

uint32_t load32(const void* base, size_t off) {
  uint32_t v;
  std::memcpy(&v, static_cast<const char*>(base) + off, sizeof v);
  return v;
}
void store32(void* base, size_t off, uint32_t v) { std::memcpy(static_cast<char*>(base) + off, &v, sizeof v); }

// Which reply this thread is about to write needs a patch (see the header).
thread_local bool t_patch_init = false;
thread_local bool t_patch_uring = false;
thread_local bool t_patch_dirops = false;
thread_local int32_t t_open_backing_id = 0;

ssize_t read_request(int fd, void* buf, size_t len, void* userdata) {
  const ssize_t n = ::read(fd, buf, len);
  if (n >= static_cast<ssize_t>(kInHeaderSize + kInitInFlags2 + 4) && load32(buf, 4) == kOpInit) {
    const void* in = static_cast<const char*>(buf) + kInHeaderSize;
    const bool ext = (load32(in, kInitInFlags) & kInitExt) != 0;
    const uint32_t flags2 = ext ? load32(in, kInitInFlags2) : 0;
    auto& c = *static_cast<FuseContext*>(userdata);
    c.passthrough.offered.store((flags2 & kPassthroughBit2) != 0, std::memory_order_release);
    c.uring_wire.offered.store((flags2 & kOverIoUringBit2) != 0, std::memory_order_release);
  }
  return n;
}

ssize_t write_reply(int fd, iovec* iov, int count, void* userdata) {
  auto& c = *static_cast<FuseContext*>(userdata);
  // Replies with a payload are [fuse_out_header, payload]; error replies
  // have no payload and are never patched.
  if (count == 2 && (t_patch_init || t_patch_uring || t_patch_dirops) && iov[1].iov_len >= kInitOutStackDepth + 4) {
    const bool uring = t_patch_uring;
    void* out = iov[1].iov_base;
    store32(out, kInitOutFlags, load32(out, kInitOutFlags) | kInitExt | (t_patch_dirops ? kParallelDirops : 0));
    if (t_patch_init) {
      store32(out, kInitOutFlags2, load32(out, kInitOutFlags2) | kPassthroughBit2);
      store32(out, kInitOutStackDepth, kStackDepth);
      c.passthrough.negotiated.store(true, std::memory_order_release);
    }
    if (uring) store32(out, kInitOutFlags2, load32(out, kInitOutFlags2) | kOverIoUringBit2);
    t_patch_init = t_patch_uring = t_patch_dirops = false;
    const ssize_t n = ::writev(fd, iov, count);
    // The kernel has taken the reply and now holds requests until every
    // queue has an entry: start them.
    if (uring && n > 0) {
      c.uring_wire.negotiated.store(true, std::memory_order_release);
      if (c.uring_wire.on_negotiated) c.uring_wire.on_negotiated();
    }
    return n;
  }
  if (count == 2 && t_open_backing_id > 0 && iov[1].iov_len == kOpenOutSize) {
    void* out = iov[1].iov_base;
    store32(out, kOpenOutFlags, load32(out, kOpenOutFlags) | kOpenPassthrough);
    store32(out, kOpenOutBackingId, static_cast<uint32_t>(t_open_backing_id));
  }
  // The answer to a request taken from an io_uring entry goes back there.
  if (FuseUring* u = c.uring.load(std::memory_order_acquire))
    if (const size_t delivered = u->deliver(iov, count)) return static_cast<ssize_t>(delivered);
  return ::writev(fd, iov, count);
}

}  // namespace

fuse_custom_io passthrough_io() {
  fuse_custom_io io{};
  io.read = read_request;
  io.writev = write_reply;
  return io;
}

void ask_passthrough_in_init_reply() { t_patch_init = true; }
void ask_uring_in_init_reply() { t_patch_uring = true; }
void ask_parallel_dirops_in_init_reply() { t_patch_dirops = true; }

int reply_open_passthrough(fuse_req_t req, const fuse_file_info* fi, int32_t backing_id) {
  t_open_backing_id = backing_id;
  const int rc = fuse_reply_open(req, fi);
  t_open_backing_id = 0;
  return rc;
}

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
