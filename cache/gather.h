// Gather: the bytes of one reply, as iovecs for fuse_reply_iov.
//
// A read interleaves bytes referenced in place (resident extents, a pinned
// round buffer, static zeros: the reply's one copy is the kernel's) with
// bytes that had to be produced (tar headers, bytes read from a peer or the
// backend), which go to an arena owned by the gather. The arena is sized for
// the whole request up front (reset), so pointers into it never move while a
// reply is built. Past kMaxIov segments (the kernel's UIO_MAXIOV) the rest is
// copied into the arena: correct, one more copy, only for very small pieces.
//
// Round buffers the reply points into stay pinned until release(), which the
// FUSE adapter calls once the reply is sent.
//
// One Gather per FUSE worker thread: no allocation per request once warm.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "cache/round_pipeline.h"

namespace dlfs::cache {

class Gather {
 public:
  static constexpr size_t kMaxIov = 1000;

  // Starts a reply of at most `size` bytes (drops the previous one's pins).
  void reset(size_t size) {
    release();
    iov_.clear();
    used_ = 0;
    padding_ = 0;
    bytes_ = 0;
    if (cap_ < size + 4096) {
      cap_ = size + 4096;
      // 2 x kArenaAlign more: room to start the arena aligned, and for the
      // padding of alloc_aligned (kArenaAlign at most per reply).
      arena_ = std::make_unique_for_overwrite<std::byte[]>(cap_ + 2 * kArenaAlign);
      base_ = arena_.get() + (kArenaAlign - reinterpret_cast<uintptr_t>(arena_.get()) % kArenaAlign) % kArenaAlign;
    }
    if (iov_.capacity() < kMaxIov) iov_.reserve(kMaxIov);
  }
  // References n bytes at p (they must outlive the reply).
  void add_ref(const void* p, size_t n) {
    if (n == 0) return;
    if (iov_.size() + 1 >= kMaxIov) return add_copy(p, n);
    push(p, n);
  }
  // Copies n bytes into the arena.
  void add_copy(const void* p, size_t n) {
    if (n != 0) std::memcpy(alloc(n), p, n);
  }
  // n bytes of arena to fill in place (added to the reply now).
  std::byte* alloc(size_t n) {
    std::byte* dst = base_ + used_;
    used_ += n;
    push(dst, n);
    return dst;
  }

  // The same, starting at a kArenaAlign boundary (a direct backend read can
  // land there, cache/backend_reader.h); unaligned when the padding does not
  // fit (then the read takes the ordinary path).
  std::byte* alloc_aligned(size_t n) {
    const size_t pad = (kArenaAlign - used_ % kArenaAlign) % kArenaAlign;
    if (padding_ + pad > kArenaAlign) return alloc(n);  // the arena has kArenaAlign spare for padding
    padding_ += pad;
    used_ += pad;
    return alloc(n);
  }

  // The pin of round `round` of `epoch` if this reply holds it: consecutive
  // samples of one round cost no lock.
  const RoundPipeline::Pin* pinned(uint64_t epoch, uint32_t round) const {
    return !pins_.empty() && pin_epoch_ == epoch && pin_round_ == round ? &pins_.back() : nullptr;
  }
  const RoundPipeline::Pin& hold(RoundPipeline::Pin pin, uint64_t epoch, uint32_t round) {
    pin_epoch_ = epoch;
    pin_round_ = round;
    pins_.push_back(std::move(pin));
    return pins_.back();
  }
  void release() { pins_.clear(); }
  bool holds_pins() const { return !pins_.empty(); }

  const iovec* iov() const { return iov_.data(); }
  int count() const { return static_cast<int>(iov_.size()); }
  size_t bytes() const { return bytes_; }

 private:
  void push(const void* p, size_t n) {
    bytes_ += n;
    if (!iov_.empty()) {
      iovec& last = iov_.back();
      if (static_cast<const std::byte*>(last.iov_base) + last.iov_len == p) {
        last.iov_len += n;
        return;
      }
    }
    iov_.push_back(iovec{const_cast<void*>(p), n});  // iovec is non-const by API; never written through
  }
  std::vector<iovec> iov_;
  std::vector<RoundPipeline::Pin> pins_;
  uint64_t pin_epoch_ = 0;
  uint32_t pin_round_ = 0;
  static constexpr size_t kArenaAlign = 4096;
  std::unique_ptr<std::byte[]> arena_;
  std::byte* base_ = nullptr;  // arena_, rounded up to kArenaAlign
  size_t cap_ = 0, used_ = 0, bytes_ = 0;
  size_t padding_ = 0;  // arena bytes skipped by alloc_aligned in this reply
};

}  // namespace dlfs::cache
