// OpportunisticStream: one .tar stream in `opportunistic` order mode
// (DeepIO-Opp): within a window of the next `window` planned samples, the
// stream yields whichever is ready first (in memory, or already fetched into
// the stream's read-ahead ring) instead of waiting for the next planned one.
// Every sample of the view is still served exactly once.
//
// The served order is decided lazily as the stream is read and then fixed for
// this stream, so re-reads of a range return the same bytes (the kernel may
// read ahead, out of order, and cache pages); a member's name tells which
// sample it is. Each lookup of the view's name makes a new stream under a new
// inode number (fs/namespace/generated_files.h), and another may order it differently.
//
// Thread safety: reads of one stream are serialised by its mutex.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "cache/read_ring.h"
#include "fs/views/view_format.h"
#include "fs/views/tar_layout.h"

namespace dlfs::fs {

class OpportunisticStream final : public OpenFile {
 public:
  using Ready = std::function<bool(uint64_t k)>;
  // ready(k): whether planned position k can be served without waiting
  // (default: in memory, or ready in the ring).
  OpportunisticStream(std::shared_ptr<const EpochView> view, std::shared_ptr<cache::ReadRing> ring, uint64_t window,
                      Ready ready = nullptr);

  Status read(uint64_t offset, uint64_t size, cache::Gather& out) override;
  const Dataset* dataset() const override { return &view_->dataset(); }
  // The served order decided so far (planned positions), for tests and stats.
  std::vector<uint64_t> served() const;

 private:
  void decide_through(uint64_t byte_end);  // under mu_
  static constexpr int kMaxWaits = 20;     // 10 ms each: then read the planned one directly
  std::shared_ptr<const EpochView> view_;
  std::shared_ptr<const TarLayout> layout_;
  std::shared_ptr<cache::ReadRing> ring_;
  const uint64_t window_;
  Ready ready_;
  mutable std::mutex mu_;
  MemberOrder order_;         // decided so far
  std::vector<bool> taken_;   // planned positions already served
  uint64_t low_ = 0;          // the earliest planned position not yet served
};

}  // namespace dlfs::fs
