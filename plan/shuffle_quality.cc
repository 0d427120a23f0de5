#include "plan/shuffle_quality.h"

#include <cmath>
#include <cstdlib>

namespace dlfs::plan {
namespace {

// Spearman's rho of two rankings of n items given as positions (0..n-1, no ties).
double spearman(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  const double n = static_cast<double>(a.size());
  if (a.size() < 2) return 0;
  double d2 = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    d2 += d * d;
  }
  return 1.0 - 6.0 * d2 / (n * (n * n - 1.0));
}

}  // namespace

ShuffleQuality measure_shuffle(uint64_t n, uint64_t epochs,
                               const std::function<std::vector<uint64_t>(uint64_t epoch)>& order) {
  ShuffleQuality q;
  q.samples = n;
  q.epochs = epochs;
  if (n < 2 || epochs < 2) return q;
  std::vector<double> mean_pos(n, 0.0);
  std::vector<uint64_t> canonical(n), pos(n), prev(n);
  for (uint64_t i = 0; i < n; ++i) canonical[i] = i;
  const uint64_t window = std::max<uint64_t>(1, n / 100);
  for (uint64_t e = 0; e < epochs; ++e) {
    std::vector<uint64_t> o = order(e);
    for (uint64_t p = 0; p < n; ++p) pos[o[p]] = p;
    uint64_t adjacent = 0, near = 0;
    for (uint64_t i = 0; i + 1 < n; ++i) {
      const uint64_t d = pos[i] > pos[i + 1] ? pos[i] - pos[i + 1] : pos[i + 1] - pos[i];
      adjacent += d == 1;
      near += d <= window;
    }
    q.neighbours_adjacent += static_cast<double>(adjacent) / static_cast<double>(n - 1);
    q.neighbours_within_1pct += static_cast<double>(near) / static_cast<double>(n - 1);
    q.rank_correlation_canonical += std::fabs(spearman(pos, canonical));
    if (e > 0) q.rank_correlation_next_epoch += std::fabs(spearman(pos, prev));
    for (uint64_t i = 0; i < n; ++i) mean_pos[i] += static_cast<double>(pos[i]) / static_cast<double>(n - 1);
    prev.swap(pos);
  }
  const double E = static_cast<double>(epochs);
  q.neighbours_adjacent /= E;
  q.neighbours_within_1pct /= E;
  q.rank_correlation_canonical /= E;
  q.rank_correlation_next_epoch /= E - 1;
  double sum = 0, sum2 = 0;
  for (double m : mean_pos) {
    m /= E;
    sum += m;
    sum2 += m * m;
  }
  const double mean = sum / static_cast<double>(n);
  const double sd = std::sqrt(std::max(0.0, sum2 / static_cast<double>(n) - mean * mean));
  q.position_spread = sd / std::sqrt(1.0 / (12.0 * E));
  return q;
}

}  // namespace dlfs::plan
