#include "plan/randomization.h"

#include <algorithm>
#include <cmath>

namespace dlfs::plan {

double randomization_level(const std::vector<Round>& rounds, uint64_t chunks) {
  uint64_t n = 0;
  for (const Round& r : rounds) n += r.samples;
  if (rounds.size() <= 1 || n <= 1) return 1.0;
  double h = 0, h_fully = 0;
  uint64_t i = 0, chunks_left = chunks;
  for (const Round& r : rounds) {
    const double pick = static_cast<double>(r.chunks.size()) / static_cast<double>(chunks_left);
    for (uint64_t t = 0; t < r.samples; ++t, ++i) {
      const double q = 1.0 / static_cast<double>(n - i);
      const double p = pick / static_cast<double>(r.samples - t);
      h -= q * std::log2(p);
      h_fully -= q * std::log2(q);
    }
    chunks_left -= r.chunks.size();
  }
  return h_fully > 0 ? h / h_fully : 1.0;
}

uint64_t round_bytes_for_level(const PlanShape& shape, uint64_t seed, double target) {
  auto level = [&](uint64_t round_bytes) {
    PlanShape s = shape;
    s.round_bytes = round_bytes;
    return randomization_level(epoch_rounds(s, seed, 0), s.chunk_count());
  };
  uint64_t lo = 1, hi = shape.total_bytes;  // level(hi) == 1 >= target
  if (hi == 0 || level(lo) >= target) return lo;
  // RL grows with the round size (not strictly: chunk boundaries make small
  // steps), so bisection finds a size that reaches the target.
  while (hi - lo > std::max<uint64_t>(1, shape.total_bytes / 4096)) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (level(mid) >= target) hi = mid; else lo = mid;
  }
  return hi;
}

}  // namespace dlfs::plan
