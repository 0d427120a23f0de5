#include "plan/round_placement.h"

#include <algorithm>
#include <string>

namespace dlfs::plan {

uint64_t largest_chunk(const PlanShape& shape) {
  uint64_t most = 0;
  for (uint64_t b : shape.chunk_bytes) most = std::max(most, b);
  return most;
}

uint64_t aggregate_round_bytes(std::span<const uint64_t> slot_bytes, uint64_t largest_chunk) {
  uint64_t total = 0;
  for (uint64_t s : slot_bytes)
    if (s > largest_chunk) total += s - largest_chunk;
  return total;
}

Result<RoundPlacement> place_round(const PlanShape& shape, const Round& round, std::span<const uint64_t> slot_bytes) {
  const uint64_t most = largest_chunk(shape);
  const uint64_t room = aggregate_round_bytes(slot_bytes, most);
  if (round.bytes > room)
    return Status(EINVAL, "a round of " + std::to_string(round.bytes) + " bytes does not fit the members' slots (" +
                              std::to_string(room) + " bytes with a largest chunk of " + std::to_string(most) + ")");
  // Member m's share ends where the weights of members 0..m end, scaled to
  // the round: [end[m-1], end[m]) of the round's bytes in load order.
  const size_t members = slot_bytes.size();
  std::vector<uint64_t> end(members);
  unsigned __int128 weights = 0;
  for (size_t m = 0; m < members; ++m) {
    if (slot_bytes[m] > most) weights += slot_bytes[m] - most;
    end[m] = room == 0 ? 0 : static_cast<uint64_t>(weights * round.bytes / room);
  }
  RoundPlacement p;
  p.member.reserve(round.chunks.size());
  p.offset.reserve(round.chunks.size());
  p.member_bytes.assign(members, 0);
  uint64_t start = 0;  // of the chunk, in the round's bytes
  size_t m = 0;
  for (uint32_t c : round.chunks) {
    while (m < members && start >= end[m]) ++m;
    if (m == members) m = members - 1;  // rounding: the last share takes the tail
    const uint64_t b = shape.chunk_bytes[c];
    if (p.member_bytes[m] + b > slot_bytes[m])
      return Status(EINVAL, "chunk " + std::to_string(c) + " of " + std::to_string(b) + " bytes overruns member " +
                                std::to_string(m) + "'s slot of " + std::to_string(slot_bytes[m]) + " bytes");
    p.member.push_back(static_cast<uint32_t>(m));
    p.offset.push_back(p.member_bytes[m]);
    p.member_bytes[m] += b;
    start += b;
  }
  return p;
}

}  // namespace dlfs::plan
