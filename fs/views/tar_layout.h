// The .tar view's layout: rank r's samples in the epoch's order as a tar stream, one
// member per sample (name: the sample's member name), or one per file of a
// sample group, the group's members adjacent (sample_groups.h); headers generated
// (fs/views/tar_format.h), sample bytes from the one reader. Its layout, the
// member offsets, is a prefix sum over the samples' sizes, built once per
// view; a seek is a binary search.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cache/gather.h"
#include "cache/read_ring.h"
#include "fs/views/epoch_view.h"

namespace dlfs::fs {

// An order of a view's members other than the planned one (an opportunistic
// stream's): member j is planned position planned[j] and starts at begin[j]
// in the tar stream; begin has one more entry than planned (the end).
struct MemberOrder {
  std::vector<uint64_t> planned;
  std::vector<uint64_t> begin;
};

class TarLayout final : public ViewLayout {
 public:
  // The view's layout, built on first use and kept with the view.
  static std::shared_ptr<const TarLayout> of(const EpochView& view);

  uint64_t size() const;                              // the whole stream, trailer included
  uint64_t member_bytes(uint64_t k) const { return begin_[k + 1] - begin_[k]; }
  // What the .index gives for position k: the sample's data (offset, length)
  // or, for a sample group, all its tar members (first header to last padding).
  struct Span {
    uint64_t offset = 0, length = 0;
  };
  Span index_span(const EpochView& view, uint64_t k) const;

  // Appends up to `size` bytes at `offset`. `served` (opportunistic streams)
  // must cover every member the range touches; null: the planned order.
  Status read(const EpochView& view, uint64_t offset, uint64_t size, cache::Gather& out, cache::ReadRing* ring,
              const MemberOrder* served = nullptr) const;

 private:
  std::vector<uint64_t> begin_;  // offset of each member's first header byte, plus the end
};

}  // namespace dlfs::fs
