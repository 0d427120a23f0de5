// The random stream behind every DLFS shuffle.
//
// SplitMix64 (Steele, Lea, Flood 2014) with unbiased bounded draws (Lemire
// 2019, multiply-and-reject), written out rather than taken from <random>,
// whose distributions differ between standard libraries: an epoch's order is
// part of the product's contract and must not depend on the compiler.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace dlfs::plan {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : s_(state) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Unbiased draw in [0, bound), bound > 0.
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

// Fisher-Yates over v, driven by SplitMix64(stream).
template <typename T>
void shuffle_in_place(std::vector<T>& v, uint64_t stream) {
  SplitMix64 rng(stream);
  for (uint64_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

// The stream of (seed, epoch): distinct epochs give unrelated orders.
uint64_t mix(uint64_t seed, uint64_t epoch);

}  // namespace dlfs::plan
