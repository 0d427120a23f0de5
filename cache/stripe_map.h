// StripeMap: which node holds which bytes of a dataset. A pure function of
// (dataset size, node count): every node computes the same map, so finding a
// sample's owner is arithmetic, never a lookup (no metadata server).
//
// Stripe i is the contiguous byte-space range [begin(i), begin(i + 1)) with
// begin(i) = floor(total * i / nodes): balanced to within a byte, and each
// node loads its part with large sequential reads.
#pragma once

#include <cstdint>

namespace dlfs::cache {

class StripeMap {
 public:
  StripeMap() = default;
  StripeMap(uint64_t total_bytes, uint32_t nodes) : total_(total_bytes), nodes_(nodes ? nodes : 1) {}

  uint64_t total() const { return total_; }
  uint32_t nodes() const { return nodes_; }
  uint64_t begin(uint32_t i) const {
    return static_cast<uint64_t>(static_cast<unsigned __int128>(total_) * i / nodes_);
  }
  uint64_t end(uint32_t i) const { return begin(i + 1); }
  // The node whose stripe holds byte-space offset `off` (off < total).
  uint32_t owner(uint64_t off) const {
    if (total_ == 0) return 0;
    auto i = static_cast<uint32_t>(static_cast<unsigned __int128>(off) * nodes_ / total_);
    // The floor division above can be one off in either direction: settle it.
    while (i + 1 < nodes_ && begin(i + 1) <= off) ++i;
    while (i > 0 && begin(i) > off) --i;
    return i;
  }

 private:
  uint64_t total_ = 0;
  uint32_t nodes_ = 1;
};

}  // namespace dlfs::cache
