#include "fs/kernel/raw_push.h"

#include <span>

namespace dlfs::fs {

void RawPush::push(uint64_t ino) {
  fuse_session* se = session_.load(std::memory_order_acquire);
  if (max_size_ == 0 || !se || window_.open()) return;
  if (pushing_.fetch_add(1, std::memory_order_acquire) >= slots_) {
    pushing_.fetch_sub(1, std::memory_order_release);
    return;
  }
  try {
    const std::span<const std::byte> bytes = raw_.claim_push(ino, max_size_);
    if (!bytes.empty()) {
      fuse_bufvec buf = FUSE_BUFVEC_INIT(bytes.size());
      buf.buf[0].mem = const_cast<std::byte*>(bytes.data());  // libfuse only reads it
      // On failure the read reaches dlfsd, as without a push.
      if (fuse_lowlevel_notify_store(se, ino, 0, &buf, fuse_buf_copy_flags{}) == 0) raw_.count_push(ino, bytes.size());
    }
  } catch (...) {  // a push is an optimisation: the reader's read works without it
  }
  pushing_.fetch_sub(1, std::memory_order_release);
}

}  // namespace dlfs::fs
