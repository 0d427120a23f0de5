// EpochPlan: which samples rank r of W reads in epoch e, in which order.
//
// A pure function of (seed, epoch, sample count, world size, remainder
// policy): every node, every process and every restart computes the same
// order, with no coordination. The shuffle is Fisher-Yates driven by
// SplitMix64 with unbiased bounded draws (Lemire), written out here rather
// than taken from <random>, whose distributions differ between standard
// libraries: the order must not depend on the compiler.
//
// Ranks take a strided slice of the epoch's permutation, as PyTorch's
// DistributedSampler does: rank r gets positions r, r+W, r+2W, ...
// When N is not a multiple of W:
//  - drop: the last N mod W positions of the permutation are not served;
//  - pad:  the permutation is extended by wrapping around to its start, so
//          every rank gets ceil(N / W) samples and a few appear twice.
// Rounds for datasets larger than memory (DeepIO's opportunistic ordering)
// are in round_plan.h; the rank slicing here applies to their order too.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "plan/plan_config.h"

namespace dlfs::plan {

struct PlanKey {
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t samples = 0;     // N
  uint32_t world_size = 1;  // W >= 1
  Remainder remainder = Remainder::pad;
};

// The whole epoch's permutation of [0, N): element k is the sample id at
// global position k.
std::vector<uint64_t> epoch_permutation(uint64_t seed, uint64_t epoch, uint64_t samples);

// Number of samples rank r reads in an epoch (the same for every rank).
uint64_t samples_per_rank(const PlanKey& key);

// Global position of rank r's k-th sample: r + k*W, wrapping around N (pad).
inline uint64_t global_position(const PlanKey& key, uint32_t rank, uint64_t k) {
  return (rank + k * key.world_size) % key.samples;
}

// Rank r's samples in reading order. Errors name the bad parameter.
Result<std::vector<uint64_t>> rank_order(const PlanKey& key, uint32_t rank);

}  // namespace dlfs::plan
