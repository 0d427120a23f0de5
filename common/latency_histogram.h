// LatencyHistogram: how long something took, counted in fixed log-scale
// buckets from 10 us to 10 s (1, 2.5, 5 per decade), for stats and
// Prometheus (docs/metrics.md). Recording is two relaxed atomic adds and a
// binary search over 19 bounds: cheap enough for every FUSE request and
// every peer get, from any thread, with no lock.
//
// A snapshot reads the buckets one by one while others record, so it may be
// a few observations behind its sum; its count is always the sum of its
// buckets (what Prometheus wants: the +Inf bucket equals _count).
//
// In JSON (stats): {"count": n, "sum_s": seconds,
//                   "buckets": [[le_s, cumulative count], ...]} for the 19
// finite bounds; observations above the last bound are in count only.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

namespace dlfs {

class LatencyHistogram {
 public:
  // Upper bounds (inclusive) in nanoseconds: 10 us .. 10 s.
  static constexpr std::array<uint64_t, 19> kBoundsNs = {
      10'000,      25'000,      50'000,        100'000,       250'000,       500'000,        1'000'000,
      2'500'000,   5'000'000,   10'000'000,    25'000'000,    50'000'000,    100'000'000,    250'000'000,
      500'000'000, 1'000'000'000, 2'500'000'000, 5'000'000'000, 10'000'000'000};
  // One per bound, and the last for everything above 10 s.
  static constexpr size_t kBuckets = kBoundsNs.size() + 1;
  static constexpr double bound_seconds(size_t i) { return static_cast<double>(kBoundsNs[i]) / 1e9; }

  void observe_ns(uint64_t ns) noexcept {
    const auto i = static_cast<size_t>(std::lower_bound(kBoundsNs.begin(), kBoundsNs.end(), ns) - kBoundsNs.begin());
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(ns, std::memory_order_relaxed);
  }
  void observe(std::chrono::steady_clock::duration d) noexcept {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
    observe_ns(ns > 0 ? static_cast<uint64_t>(ns) : 0);
  }

  struct Snapshot {
    std::array<uint64_t, kBuckets> counts{};  // per bucket (not cumulative)
    uint64_t sum_ns = 0;
    uint64_t count() const {
      uint64_t n = 0;
      for (uint64_t c : counts) n += c;
      return n;
    }
    // Observations at or below bound i.
    uint64_t cumulative(size_t i) const {
      uint64_t n = 0;
      for (size_t k = 0; k <= i && k < kBuckets; ++k) n += counts[k];
      return n;
    }
    double sum_seconds() const { return static_cast<double>(sum_ns) / 1e9; }
  };

  Snapshot snapshot() const noexcept {
    Snapshot s;
    for (size_t i = 0; i < kBuckets; ++i) s.counts[i] = counts_[i].load(std::memory_order_relaxed);
    s.sum_ns = sum_ns_.load(std::memory_order_relaxed);
    return s;
  }

 private:
  std::array<std::atomic<uint64_t>, kBuckets> counts_{};
  std::atomic<uint64_t> sum_ns_{0};
};

// The JSON of the top of this file.
inline nlohmann::json histogram_json(const LatencyHistogram::Snapshot& s) {
  nlohmann::json buckets = nlohmann::json::array();
  uint64_t cumulative = 0;
  for (size_t i = 0; i < LatencyHistogram::kBoundsNs.size(); ++i) {
    cumulative += s.counts[i];
    buckets.push_back(nlohmann::json::array({LatencyHistogram::bound_seconds(i), cumulative}));
  }
  return {{"count", s.count()}, {"sum_s", s.sum_seconds()}, {"buckets", std::move(buckets)}};
}

// That JSON back into a snapshot; nullopt if it is not one (other bounds, a
// count below a bucket, a bucket count that decreases).
inline std::optional<LatencyHistogram::Snapshot> histogram_from_json(const nlohmann::json& j) {
  using H = LatencyHistogram;
  if (!j.is_object() || !j.contains("count") || !j.contains("sum_s") || !j.contains("buckets")) return std::nullopt;
  const auto& count = j["count"];
  const auto& sum = j["sum_s"];
  const auto& buckets = j["buckets"];
  if (!count.is_number_unsigned() || !sum.is_number() || !buckets.is_array() || buckets.size() != H::kBoundsNs.size())
    return std::nullopt;
  H::Snapshot s;
  uint64_t previous = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    const auto& b = buckets[i];
    if (!b.is_array() || b.size() != 2 || !b[0].is_number() || !b[1].is_number_unsigned()) return std::nullopt;
    if (b[0].get<double>() != H::bound_seconds(i)) return std::nullopt;
    const auto c = b[1].get<uint64_t>();
    if (c < previous) return std::nullopt;
    s.counts[i] = c - previous;
    previous = c;
  }
  const auto total = count.get<uint64_t>();
  if (total < previous) return std::nullopt;
  s.counts[H::kBoundsNs.size()] = total - previous;
  const double sum_s = sum.get<double>();
  s.sum_ns = sum_s > 0 ? static_cast<uint64_t>(sum_s * 1e9 + 0.5) : 0;
  return s;
}

}  // namespace dlfs
