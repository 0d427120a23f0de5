// GivenRanges: the bytes of not-yet-loaded extents that readers have already
// read from the backend and written into the buffer (StorageBuffer::give),
// so that the loader reads only the rest of each extent.
//
// Why: while a dataset loads, a reader that misses reads its bytes from the
// backend, and the loader later reads the same bytes again for the buffer.
// On a backend whose capacity both share (a network file system, where the
// client and the server's CPU or the link bound them), that second read is
// capacity taken from the readers. Keeping what the reader read removes it.
//
// Ranges are per extent, relative to the extent's first byte, kept sorted and
// merged (a run of small files read in order is one range). Only extents with
// gifts have an entry; take() removes it.
//
// Thread safety: a caller holds lock_of(e) around add(e, ...) and take(e),
// and around its own check of the extent's state (StorageBuffer does both).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace dlfs::cache {

class GivenRanges {
 public:
  struct Range {
    uint64_t begin = 0;  // relative to the extent
    uint64_t end = 0;
  };

  std::mutex& lock_of(uint64_t e) const { return shards_[e % kShards].mu; }
  // Records [begin, end) of extent e, merging it with the ranges it touches.
  void add(uint64_t e, uint64_t begin, uint64_t end);
  // The ranges of e (sorted, disjoint, not adjacent), and forgets them.
  std::vector<Range> take(uint64_t e);

 private:
  // Extents spread over several locks: readers giving bytes of different
  // extents do not wait on each other.
  static constexpr size_t kShards = 64;
  struct Shard {
    std::mutex mu;
    std::unordered_map<uint64_t, std::vector<Range>> by_extent;
  };
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace dlfs::cache
