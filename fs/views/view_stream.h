// Read-ahead for a view stream (.tar, .bin): a ring of slots filled along
// the stream's known order by the dataset's prefetcher (cache/read_ring.h),
// with the samples that are not in memory. In a cluster a ring batches, so
// that a prefetch thread keeps several gets to peers in flight.
#pragma once

#include <memory>

#include "cache/read_ring.h"
#include "fs/views/epoch_view.h"

namespace dlfs::fs {

// A ring for one open stream of `view`, registered with the dataset's
// prefetcher; null when the dataset's plan turns read-ahead off.
std::shared_ptr<cache::ReadRing> make_read_ring(const std::shared_ptr<const EpochView>& view);

// The reader is at position k of the stream: the ring drops what is behind
// and the prefetcher looks for work.
void advance_ring(const EpochView& view, cache::ReadRing* ring, uint64_t k);

}  // namespace dlfs::fs
