#include "fs/kernel/wire/fuse_wire.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstring>


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
constexpr uint32_t kOverIoUringBit2 = 1u << 9;  // FUSE_OVER_IO_URING (1ULL << 41), in flags2 (fs/kernel/wire/fuse_uring.h)
constexpr size_t kInitOutFlags = 12;           // fuse_init_out.flags
constexpr size_t kInitOutFlags2 = 32;          // fuse_init_out.flags2
constexpr size_t kInitOutStackDepth = 36;      // fuse_init_out.max_stack_depth
constexpr size_t kOpenOutSize = 16;            // struct fuse_open_out
constexpr size_t kOpenOutFlags = 8;            // fuse_open_out.open_flags
constexpr size_t kOpenOutBackingId = 12;       // fuse_open_out.backing_id
constexpr uint32_t kOpenPassthrough = 1u << 7;  // FOPEN_PASSTHROUGH
// Backing files may not themselves be on a passthrough (stacked) mount.
constexpr uint32_t kStackDepth = 1;

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
    WireState& w = static_cast<WireUser*>(userdata)->wire;
    w.passthrough.offered.store((flags2 & kPassthroughBit2) != 0, std::memory_order_release);
    w.uring.offered.store((flags2 & kOverIoUringBit2) != 0, std::memory_order_release);
  }
  return n;
}

ssize_t write_reply(int fd, iovec* iov, int count, void* userdata) {
  WireState& w = static_cast<WireUser*>(userdata)->wire;
  // Replies with a payload are [fuse_out_header, payload]; error replies
  // have no payload and are never patched.
  if (count == 2 && (t_patch_init || t_patch_uring || t_patch_dirops) && iov[1].iov_len >= kInitOutStackDepth + 4) {
    const bool uring = t_patch_uring;
    void* out = iov[1].iov_base;
    store32(out, kInitOutFlags, load32(out, kInitOutFlags) | kInitExt | (t_patch_dirops ? kParallelDirops : 0));
    if (t_patch_init) {
      store32(out, kInitOutFlags2, load32(out, kInitOutFlags2) | kPassthroughBit2);
      store32(out, kInitOutStackDepth, kStackDepth);
      w.passthrough.negotiated.store(true, std::memory_order_release);
    }
    if (uring) store32(out, kInitOutFlags2, load32(out, kInitOutFlags2) | kOverIoUringBit2);
    t_patch_init = t_patch_uring = t_patch_dirops = false;
    const ssize_t n = ::writev(fd, iov, count);
    // The kernel has taken the reply and now holds requests until every
    // queue has an entry: start them.
    if (uring && n > 0) {
      w.uring.negotiated.store(true, std::memory_order_release);
      if (w.uring.on_negotiated) w.uring.on_negotiated();
    }
    return n;
  }
  if (count == 2 && t_open_backing_id > 0 && iov[1].iov_len == kOpenOutSize) {
    void* out = iov[1].iov_base;
    store32(out, kOpenOutFlags, load32(out, kOpenOutFlags) | kOpenPassthrough);
    store32(out, kOpenOutBackingId, static_cast<uint32_t>(t_open_backing_id));
  }
  // The answer to a request taken from an io_uring entry goes back there.
  if (FuseUring* u = w.queues.load(std::memory_order_acquire))
    if (const size_t delivered = u->deliver(iov, count)) return static_cast<ssize_t>(delivered);
  return ::writev(fd, iov, count);
}

}  // namespace

fuse_custom_io wire_io() {
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

}  // namespace dlfs::fs
