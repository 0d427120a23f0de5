// Randomization level (RL): DeepIO's cross-entropy measure, eq. 1-5.
//
// For the element at global position i of an epoch served in rounds, in
// round j (c_j chunks chosen out of the C_j chunks not yet used, n_j samples
// in memory, t = i's offset inside the round):
//
//   P(i) = c_j / C_j  x  1 / (n_j - t)        (eq. 4, generalised to uneven rounds)
//   Q(i) = 1 / (N - i)                        (a full shuffle)
//   H       = -sum_i Q(i) log2 P(i)           (eq. 1)
//   H_fully = -sum_i Q(i) log2 Q(i)
//   RL      = H / H_fully                     (eq. 5)
//
// With even rounds, c_j / C_j = N_c / (N_f - N_c r) as in the paper.
//
// Orientation of eq. 1: the paper writes H(P, Q) = -sum P log Q, but its
// reported figures (R = 0.5 -> 98.54 %, R = 0.25 -> 96.96 % on Caltech-101)
// are reproduced by -sum Q log P, which also stays within [0, 1] where the
// written form exceeds 1; we follow the figures. A unit test pins them.
// One round gives P = Q and RL = 1. A constant order has RL = 0 by definition.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/round_plan.h"

namespace dlfs::plan {

// RL of an epoch's rounds over `chunks` chunks and N samples (sum of the
// rounds' samples). 1.0 for one round or N <= 1.
double randomization_level(const std::vector<Round>& rounds, uint64_t chunks);

// The smallest round size (bytes) whose epoch-0 RL reaches `target`, found by
// bisection over [chunk, total]; total_bytes if only one round will do.
uint64_t round_bytes_for_level(const PlanShape& shape, uint64_t seed, double target);

}  // namespace dlfs::plan
