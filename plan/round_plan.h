// RoundPlan: the epoch order when memory is short (DeepIO III-B/III-C).
//
// The dataset's samples are grouped into *chunks*: runs of consecutive
// samples (canonical order) of about `chunk_bytes`, the unit the backend is
// read in, with large sequential reads. Each epoch:
//   1. the chunks are shuffled (seeded by seed and epoch);
//   2. consecutive shuffled chunks are grouped into *rounds* holding at most
//      `round_bytes` (at least one chunk each): a round is what is resident
//      at once, R = round_bytes / dataset bytes. Full rounds and a
//      remainder, or as many rounds of about equal bytes, whichever has the
//      higher RL (a small last round lowers it);
//   3. each round's samples are shuffled among themselves;
//   4. the epoch order is the rounds, one after the other.
// With one round (R = 1) the order is exactly epoch_permutation(): a full
// shuffle. Everything is a pure function of (shape, seed, epoch).
//
// randomization_level() is DeepIO's RL (eq. 1-5) of an epoch's round
// structure: see randomization.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "plan/epoch_plan.h"

namespace dlfs::plan {

// The fixed, per-dataset part of a plan.
struct PlanShape {
  uint64_t samples = 0;                    // N
  std::vector<uint64_t> chunk_first;       // first sample of each chunk, plus N at the end
  std::vector<uint64_t> chunk_begin;       // byte-space offset of each chunk's first byte
  std::vector<uint64_t> chunk_bytes;       // byte-space length of each chunk (gaps included)
  std::vector<uint64_t> chunk_payload;     // bytes of its samples (what readers read of it: no gaps)
  uint64_t total_bytes = 0;                // sum of chunk_bytes
  uint64_t round_bytes = 0;                // 0: the whole dataset is one round (R = 1)

  uint64_t chunk_count() const { return chunk_bytes.size(); }
  uint64_t chunk_of(uint64_t sample) const;  // binary search
  bool single_round() const { return round_bytes == 0 || round_bytes >= total_bytes; }
  double ratio() const {                     // R
    return single_round() || total_bytes == 0 ? 1.0 : static_cast<double>(round_bytes) / total_bytes;
  }
};

// Builds the chunks: consecutive samples while the byte range covering them
// stays within chunk_bytes (a sample larger than that is a chunk alone).
// sample_begin(i) and sample_length(i) give sample i's place in the byte
// space. Samples need not be in byte order (LMDB values are not: a leaf page
// fills from its end, and pages are reused): a chunk is the smallest range
// holding its samples.
template <typename Begin, typename Length>
PlanShape make_plan_shape(uint64_t samples, uint64_t chunk_bytes, uint64_t round_bytes, Begin sample_begin,
                          Length sample_length) {
  PlanShape s;
  s.samples = samples;
  s.round_bytes = round_bytes;
  uint64_t i = 0;
  while (i < samples) {
    uint64_t begin = sample_begin(i);
    uint64_t end = begin + sample_length(i);
    uint64_t payload = sample_length(i);
    uint64_t j = i + 1;
    while (j < samples) {
      const uint64_t b = sample_begin(j), e = b + sample_length(j);
      const uint64_t lo = std::min(begin, b), hi = std::max(end, e);
      if (hi - lo > chunk_bytes) break;
      begin = lo;
      end = hi;
      payload += e - b;
      ++j;
    }
    s.chunk_first.push_back(i);
    s.chunk_begin.push_back(begin);
    s.chunk_bytes.push_back(end - begin);
    s.chunk_payload.push_back(payload);
    s.total_bytes += end - begin;
    i = j;
  }
  s.chunk_first.push_back(samples);
  return s;
}

// One round of one epoch.
struct Round {
  uint64_t first_position = 0;   // in the epoch order
  uint64_t samples = 0;          // n_j
  uint64_t bytes = 0;            // memory it needs
  std::vector<uint32_t> chunks;  // in load order
};

// The rounds of an epoch without the sample order (cheap: O(chunks)).
std::vector<Round> epoch_rounds(const PlanShape& shape, uint64_t seed, uint64_t epoch);

// One epoch, complete: the global order and its rounds.
struct EpochOrder {
  uint64_t epoch = 0;
  std::vector<uint64_t> order;   // sample id at each global position
  std::vector<Round> rounds;
  uint32_t round_of(uint64_t position) const;  // binary search
};

std::shared_ptr<const EpochOrder> build_epoch_order(const PlanShape& shape, uint64_t seed, uint64_t epoch);

// Largest memory any round of any epoch may need: the double buffer's slot size.
uint64_t round_slot_bytes(const PlanShape& shape);

}  // namespace dlfs::plan
