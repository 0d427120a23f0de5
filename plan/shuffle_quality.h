// Shuffle quality, measured: what the orders a configuration produces look
// like over many epochs, next to a full shuffle and a constant order. This
// checks the randomization level (a formula) against data.
//
// Metrics (each averaged over the epochs measured):
//  - position_spread: over samples, the standard deviation of a sample's mean
//    position (0..1) across E epochs, divided by what independent uniform
//    positions give (sqrt(1/(12 E))). About 1 for a full shuffle; large for
//    a constant order (every sample always at the same place).
//  - neighbours_adjacent: share of canonical neighbours (i, i+1) that are
//    next to each other in the epoch. About 2/N for a full shuffle.
//  - neighbours_within_1pct: share of canonical neighbours placed within 1 %
//    of the epoch of each other. About 0.02 for a full shuffle; rounds raise
//    it (neighbours share a chunk, so a round).
//  - rank_correlation_canonical: |Spearman rho| between position and canonical
//    index. About 0 for a full shuffle, 1 for the canonical order.
//  - rank_correlation_next_epoch: |Spearman rho| between a sample's positions
//    in consecutive epochs. About 0 for a full shuffle, 1 for a constant order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace dlfs::plan {

struct ShuffleQuality {
  uint64_t samples = 0;
  uint64_t epochs = 0;
  double position_spread = 0;
  double neighbours_adjacent = 0;
  double neighbours_within_1pct = 0;
  double rank_correlation_canonical = 0;
  double rank_correlation_next_epoch = 0;
};

// order(e) returns epoch e's global order (a permutation of [0, N)).
// epochs >= 2.
ShuffleQuality measure_shuffle(uint64_t samples, uint64_t epochs,
                               const std::function<std::vector<uint64_t>(uint64_t epoch)>& order);

}  // namespace dlfs::plan
