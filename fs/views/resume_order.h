// ResumeOrder: what is left of an epoch once a job with W ranks read part of
// it, for the same job restarted with W' ranks (docs/views.md, "Resuming an
// epoch on another world size").
//
// The consumed part is what a checkpoint holds: how many samples each of the
// W ranks had read (DDP reads in lockstep: often one count for all). Rank r
// read positions r, r+W, ..., r+(c_r-1)W of the epoch order; with the pad
// policy a position p >= N is the wrap, sample order[p mod N]. The remainder
// is every sample of the epoch not consumed, each once, in the order of its
// position in the epoch order (a dataset in rounds keeps reading round by
// round), so it is a pure function of the seed like the order itself. The W'
// ranks take its positions r', r'+W', ... with the same remainder policy:
// pad wraps around the remainder, drop leaves its last M mod W' out.
//
// Pure functions of (N, W, counts, policy): no dataset, no planner.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "plan/plan_config.h"

namespace dlfs::fs {

struct ResumeOrder {
  // Positions of the epoch order not consumed, ascending: position q of the
  // remainder is epoch position positions[q].
  std::vector<uint64_t> positions;
  uint64_t size() const { return positions.size(); }
};

// Samples each rank of a world of `world` reads in an epoch of `samples`
// samples (plan/epoch_plan.h's samples_per_rank).
uint64_t per_rank(uint64_t samples, uint64_t world, plan::Remainder rem);

// Parses the `<consumed>` component of a resume path for `world` ranks:
// one count ("120": every rank read 120), or `world` counts separated by
// commas ("120,119,119,119"), where "c*k" stands for k ranks in a row that
// read c ("120*1,119*3"; a name is at most 255 bytes). Decimal without sign
// or leading zeros. EINVAL naming what is wrong; the result has `world` counts.
Result<std::vector<uint64_t>> parse_consumed(std::string_view text, uint32_t world);

// The counts as a path component: one count when they are all equal, else
// runs of equal counts as "c*k" (k > 1) or "c", comma-separated.
std::string consumed_name(std::span<const uint64_t> counts);

// Checks `counts` (one per rank of `world`) against an epoch of `samples`:
// EINVAL naming the first rank whose count is above its view's size.
Status check_consumed(uint64_t samples, uint32_t world, std::span<const uint64_t> counts, plan::Remainder rem);

// The remainder of the epoch after `counts` (checked as above).
Result<std::shared_ptr<const ResumeOrder>> remaining_positions(uint64_t samples, uint32_t world,
                                                               std::span<const uint64_t> counts,
                                                               plan::Remainder rem);

// Samples rank r' of W' reads of a remainder of M samples (the same for every rank).
inline uint64_t resume_per_rank(uint64_t remaining, uint32_t new_world, plan::Remainder rem) {
  return per_rank(remaining, new_world, rem);
}

// Position q in the remainder of rank r's k-th sample: r + k*W', wrapping (pad).
inline uint64_t resume_position(uint64_t remaining, uint32_t new_world, uint32_t rank, uint64_t k) {
  return (rank + k * new_world) % remaining;
}

}  // namespace dlfs::fs
