#include "fs/views/opportunistic_stream.h"

#include <algorithm>

#include "fs/dataset/dataset.h"
#include "fs/views/view_stream.h"

namespace dlfs::fs {

OpportunisticStream::OpportunisticStream(std::shared_ptr<const EpochView> view, std::shared_ptr<cache::ReadRing> ring,
                                         uint64_t window, Ready ready)
    : view_(std::move(view)),
      layout_(TarLayout::of(*view_)),
      ring_(std::move(ring)),
      window_(std::max<uint64_t>(1, window)),
      ready_(std::move(ready)) {
  if (!ready_) {
    ready_ = [v = view_.get(), r = ring_.get()](uint64_t k) { return v->in_memory(k) || (r && r->ready(k)); };
  }
  taken_.assign(view_->count(), false);
  order_.begin.push_back(0);
}

void OpportunisticStream::decide_through(uint64_t byte_end) {
  const uint64_t n = view_->count();
  while (order_.planned.size() < n && order_.begin.back() < byte_end) {
    // The first ready sample among the next `window` planned ones not yet
    // served. If none is ready and the ring is fetching them, wait a little
    // for whichever lands first; otherwise take the earliest planned one (the
    // request then reads it itself).
    const uint64_t limit = std::min(n, low_ + window_);
    uint64_t pick = n;
    for (int attempt = 0; pick == n; ++attempt) {
      for (uint64_t k = low_; k < limit; ++k)
        if (!taken_[k] && ready_(k)) {
          pick = k;
          break;
        }
      if (pick != n) break;
      if (!ring_ || attempt == kMaxWaits || low_ >= ring_->window_end()) {
        pick = low_;
        break;
      }
      ring_->wait_fill(std::chrono::milliseconds(10));
    }
    taken_[pick] = true;
    order_.planned.push_back(pick);
    order_.begin.push_back(order_.begin.back() + layout_->member_bytes(pick));
    while (low_ < n && taken_[low_]) ++low_;
  }
}

Status OpportunisticStream::read(uint64_t offset, uint64_t size, cache::Gather& out) {
  std::lock_guard lk(mu_);
  advance_ring(*view_, ring_.get(), low_);  // prefetch from the earliest sample still owed
  decide_through(offset + size);
  Status s = layout_->read(*view_, offset, size, out, ring_.get(), &order_);
  // Read to its end: the ring's slots (megabytes) go now, not when the kernel
  // forgets this stream's inode, which may be much later (fs/namespace/generated_files.h).
  // Every position is decided, so ready_ (which looks at the ring) is not
  // called again; the bytes gathered from the ring were copied out of it.
  if (ring_ && order_.planned.size() == view_->count() && offset + size >= layout_->size()) ring_.reset();
  return s;
}

std::vector<uint64_t> OpportunisticStream::served() const {
  std::lock_guard lk(mu_);
  return order_.planned;
}

}  // namespace dlfs::fs
