// RoundPlacement: which member of the job holds each chunk of a round when
// rounds span the job's memory (DeepIO III-A: the shuffle buffer is the
// memory of all the job's nodes; each server loads its part of each round
// from the backend, and every worker reads any sample of the round from
// whichever server holds it).
//
// A pure function of the round, the chunks' sizes and the members' round
// slots, the same on every node: members take the round's chunks in load
// order, each a contiguous run of about its share of the round's bytes; a
// chunk goes to the member whose share its first byte falls in. Shares are
// proportional to each member's slot less one largest chunk, so a member
// overshoots its share by less than a chunk and never its slot, as long as
// the round is at most aggregate_round_bytes() (epoch_rounds() cuts rounds
// of at most that when the plan's round_bytes is set so). A member whose slot
// holds no chunk gets nothing. Within a member, chunks lie back to back in
// load order: a chunk's offset is the bytes placed there before it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "plan/round_plan.h"

namespace dlfs::plan {

struct RoundPlacement {
  std::vector<uint32_t> member;        // per chunk of the round, in Round::chunks order
  std::vector<uint64_t> offset;        // that chunk's first byte in its member's slot
  std::vector<uint64_t> member_bytes;  // per member: bytes of the round it holds
};

// The largest round that place_round() fits into slots of these sizes when
// no chunk is larger than `largest_chunk`: the sum of (slot - largest_chunk)
// over the members whose slot holds more than one largest chunk.
uint64_t aggregate_round_bytes(std::span<const uint64_t> slot_bytes, uint64_t largest_chunk);

// Places `round` of `shape` over members with these slot sizes. EINVAL when
// it does not fit (a round larger than aggregate_round_bytes(), or no member
// with room): never a placement that overruns a slot.
Result<RoundPlacement> place_round(const PlanShape& shape, const Round& round, std::span<const uint64_t> slot_bytes);

// The largest chunk of the shape (0 without chunks).
uint64_t largest_chunk(const PlanShape& shape);

}  // namespace dlfs::plan
