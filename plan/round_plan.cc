#include "plan/round_plan.h"

#include <algorithm>

#include "plan/randomization.h"
#include "plan/shuffle_rng.h"

namespace dlfs::plan {
namespace {

// Separate streams for the chunk shuffle and each round's sample shuffle, so
// that none of them repeats the full-shuffle stream of epoch_permutation().
constexpr uint64_t kChunkStream = 0x6a09e667f3bcc908ull;
constexpr uint64_t kRoundStream = 0xbb67ae8584caa73bull;

}  // namespace

uint64_t PlanShape::chunk_of(uint64_t sample) const {
  auto it = std::upper_bound(chunk_first.begin(), chunk_first.end() - 1, sample);
  return static_cast<uint64_t>(it - chunk_first.begin()) - 1;
}

std::vector<Round> epoch_rounds(const PlanShape& shape, uint64_t seed, uint64_t epoch) {
  std::vector<Round> rounds;
  const uint64_t chunks = shape.chunk_count();
  if (chunks == 0) return rounds;
  if (shape.single_round()) {
    Round r;
    r.samples = shape.samples;
    r.bytes = shape.total_bytes;
    r.chunks.resize(chunks);
    for (uint32_t c = 0; c < chunks; ++c) r.chunks[c] = c;
    rounds.push_back(std::move(r));
    return rounds;
  }
  std::vector<uint32_t> perm(chunks);
  for (uint32_t c = 0; c < chunks; ++c) perm[c] = c;
  shuffle_in_place(perm, mix(seed ^ kChunkStream, epoch));
  // Rounds never past round_bytes, cut two ways: greedily (full rounds and a
  // remainder) and, as few as fit, in about equal shares. DeepIO's RL weighs
  // the end of an epoch most, so a small last round lowers it (six rounds in
  // tests/integration/39_cluster_rounds.sh: 90.7% greedy, 92.5% even), and so
  // does one round more (chunks are whole: equal shares may need k + 1
  // rounds where the greedy cut needs k): the cut with the higher RL is kept.
  // k = 0: greedy.
  auto cut = [&](uint64_t k) {
    std::vector<Round> out;
    uint64_t position = 0, placed = 0;
    uint64_t share = k > 0 ? shape.total_bytes / k : shape.total_bytes;
    Round cur;
    auto close = [&] {
      cur.first_position = position;
      position += cur.samples;
      placed += cur.bytes;
      out.push_back(std::move(cur));
      cur = Round{};
      const uint64_t left = k > out.size() ? k - out.size() : 1;
      share = (shape.total_bytes - placed) / left;
    };
    for (uint32_t c : perm) {
      const uint64_t b = shape.chunk_bytes[c];
      // Closed at its share (to within half a chunk), never past round_bytes.
      if (!cur.chunks.empty() && (cur.bytes + b > shape.round_bytes || (k > 0 && cur.bytes + b / 2 > share))) close();
      cur.chunks.push_back(c);
      cur.bytes += b;
      cur.samples += shape.chunk_first[c + 1] - shape.chunk_first[c];
    }
    close();
    return out;
  };
  rounds = cut(0);
  std::vector<Round> even = cut(rounds.size());
  if (even.size() == rounds.size() &&
      randomization_level(even, chunks) >= randomization_level(rounds, chunks))
    rounds = std::move(even);
  return rounds;
}

std::shared_ptr<const EpochOrder> build_epoch_order(const PlanShape& shape, uint64_t seed, uint64_t epoch) {
  auto out = std::make_shared<EpochOrder>();
  out->epoch = epoch;
  out->rounds = epoch_rounds(shape, seed, epoch);
  if (out->rounds.size() <= 1) {
    // One round: the full shuffle, identical to epoch_permutation().
    out->order = epoch_permutation(seed, epoch, shape.samples);
    return out;
  }
  out->order.reserve(shape.samples);
  std::vector<uint64_t> round_samples;
  for (size_t j = 0; j < out->rounds.size(); ++j) {
    const Round& r = out->rounds[j];
    round_samples.clear();
    for (uint32_t c : r.chunks)
      for (uint64_t s = shape.chunk_first[c]; s < shape.chunk_first[c + 1]; ++s) round_samples.push_back(s);
    shuffle_in_place(round_samples, mix(seed ^ kRoundStream, epoch * 0x100000001b3ull + j));
    out->order.insert(out->order.end(), round_samples.begin(), round_samples.end());
  }
  return out;
}

uint32_t EpochOrder::round_of(uint64_t position) const {
  auto it = std::upper_bound(rounds.begin(), rounds.end(), position,
                             [](uint64_t p, const Round& r) { return p < r.first_position; });
  return static_cast<uint32_t>(it - rounds.begin()) - 1;
}

uint64_t round_slot_bytes(const PlanShape& shape) {
  if (shape.single_round()) return shape.total_bytes;
  uint64_t biggest_chunk = 0;
  for (uint64_t b : shape.chunk_bytes) biggest_chunk = std::max(biggest_chunk, b);
  return std::max(shape.round_bytes, biggest_chunk);
}

}  // namespace dlfs::plan
