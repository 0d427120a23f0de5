#include "cache/epoch_plan.h"

#include <numeric>
#include <string>

namespace dlfs::cache {
namespace {

// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, well mixed; enough for
// shuffling. The stream is fixed by (seed, epoch) alone.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : s_(state) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Unbiased draw in [0, bound) (Lemire 2019, multiply-and-reject).
  uint64_t below(uint64_t bound) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * bound;
    auto low = static_cast<uint64_t>(m);
    if (low < bound) {
      uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * bound;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  uint64_t s_;
};

uint64_t mix(uint64_t seed, uint64_t epoch) {
  SplitMix64 a(seed);
  return a.next() ^ (epoch * 0xd1342543de82ef95ull + 0x2545f4914f6cdd1dull);
}

}  // namespace

Result<Remainder> parse_remainder(std::string_view text) {
  if (text == "drop") return Remainder::drop;
  if (text == "pad") return Remainder::pad;
  return Status(EINVAL, "remainder policy '" + std::string(text) + "' is not drop or pad");
}

std::vector<uint64_t> epoch_permutation(uint64_t seed, uint64_t epoch, uint64_t samples) {
  std::vector<uint64_t> p(samples);
  std::iota(p.begin(), p.end(), uint64_t{0});
  SplitMix64 rng(mix(seed, epoch));
  for (uint64_t i = samples; i > 1; --i) std::swap(p[i - 1], p[rng.below(i)]);
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
  for (uint64_t j = 0; j < n; ++j) out.push_back(perm[(rank + j * k.world_size) % k.samples]);
  return out;
}

}  // namespace dlfs::cache
