#include "plan/epoch_plan.h"

#include <numeric>
#include <string>

#include "plan/shuffle_rng.h"

namespace dlfs::plan {
namespace {

}  // namespace

uint64_t mix(uint64_t seed, uint64_t epoch) {
  SplitMix64 a(seed);
  return a.next() ^ (epoch * 0xd1342543de82ef95ull + 0x2545f4914f6cdd1dull);
}

std::vector<uint64_t> epoch_permutation(uint64_t seed, uint64_t epoch, uint64_t samples) {
  std::vector<uint64_t> p(samples);
  std::iota(p.begin(), p.end(), uint64_t{0});
  shuffle_in_place(p, mix(seed, epoch));
  return p;
}

uint64_t samples_per_rank(const PlanKey& k) {
  if (k.world_size == 0) return 0;
  return k.remainder == Remainder::drop ? k.samples / k.world_size
                                        : (k.samples + k.world_size - 1) / k.world_size;
}

Result<std::vector<uint64_t>> rank_order(const PlanKey& k, uint32_t rank) {
  if (k.world_size == 0) return Status(EINVAL, "world size must be at least 1");
  if (rank >= k.world_size)
    return Status(EINVAL, "rank " + std::to_string(rank) + " is not below world size " + std::to_string(k.world_size));
  std::vector<uint64_t> out;
  const uint64_t n = samples_per_rank(k);
  if (n == 0 || k.samples == 0) return out;
  std::vector<uint64_t> perm = epoch_permutation(k.seed, k.epoch, k.samples);
  out.reserve(n);
  // Global position of the j-th sample of rank r: r + j*W, wrapping (pad).
  for (uint64_t j = 0; j < n; ++j) out.push_back(perm[global_position(k, rank, j)]);
  return out;
}

}  // namespace dlfs::plan
