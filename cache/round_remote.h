// RoundRemote: reads of a round's chunks that another member holds, when
// rounds span the job's memory (issue 37; cache/round_pipeline.h, RoundMembers).
//
// Implemented by the transport: the member serves each loaded slot under a
// tag naming (dataset, epoch, round) and stops serving it before the slot is
// reused (SlotEvents), so a read asks for the round by its tag and gets that
// round's bytes or a refusal, never another round's bytes that took their
// place. A refusal, a dead peer or a late answer returns false: the caller
// reads the backend (slower, never wrong).
#pragma once

#include <cstdint>
#include <span>

namespace dlfs::cache {

// The tag a member serves round `round` of `epoch` of a dataset under: the
// same pure function on every member (the dataset's fingerprint names it).
// Never 0 (0 is an untagged range).
inline uint64_t round_tag(uint64_t dataset_fingerprint, uint64_t epoch, uint32_t round) {
  uint64_t h = dataset_fingerprint ^ 0x9e3779b97f4a7c15ull;
  for (uint64_t v : {epoch, static_cast<uint64_t>(round)}) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
  }
  return h | 1;
}

// A round of an epoch, and the rounds a member holds (its heartbeats say so:
// RoundPipeline::follow).
struct RoundAt {
  uint64_t epoch = 0;
  uint32_t round = 0;
  bool operator==(const RoundAt&) const = default;
};
struct RoundSpan {
  RoundAt oldest, newest;
  bool operator==(const RoundSpan&) const = default;
};

class RoundRemote {
 public:
  virtual ~RoundRemote() = default;
  // Reads dst.size() bytes at `offset` of `member`'s slot holding round
  // `round` of `epoch`. `slot_hint`: the slot this node holds that round in
  // (members load rounds in the same sequence, so most often the same one).
  virtual bool fetch_round(uint32_t member, uint64_t epoch, uint32_t round, int slot_hint, uint64_t offset,
                           std::span<std::byte> dst) = 0;
};

}  // namespace dlfs::cache
