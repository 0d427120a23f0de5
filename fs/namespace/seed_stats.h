// SeedStats: one dataset's view traffic through the mount by seed (the
// configured one under epochs/, others under seeds/<s>/), for the stats'
// "views.seeds" (docs/stats.md): several jobs sharing one copy each see
// their own figures. Counters are made on a seed's first lookup and never
// freed (their addresses are kept by view contexts); past kMaxSeeds seeds,
// the rest share one "other" entry.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "fs/views/view_context.h"

namespace dlfs::fs {

class SeedStats {
 public:
  static constexpr size_t kMaxSeeds = 1024;

  // The configured seed's counters: no lock (every read of epochs/ counts here).
  SeedCounters& configured() { return configured_; }
  SeedCounters& of(uint64_t seed, uint64_t configured_seed) {
    if (seed == configured_seed) return configured_;
    std::lock_guard lk(mu_);
    if (auto it = seeds_.find(seed); it != seeds_.end()) return *it->second;
    if (seeds_.size() >= kMaxSeeds) return other_;
    return *seeds_.emplace(seed, std::make_unique<SeedCounters>()).first->second;
  }

  struct Row {
    std::optional<uint64_t> seed;  // none: the seeds past kMaxSeeds
    uint64_t lookups, samples, requests, bytes;
  };
  // The configured seed first, then the others by seed.
  std::vector<Row> rows(uint64_t configured_seed) const {
    std::lock_guard lk(mu_);
    std::vector<Row> out;
    auto row = [](std::optional<uint64_t> s, const SeedCounters& c) {
      return Row{s, c.lookups.load(std::memory_order_relaxed), c.samples.load(std::memory_order_relaxed),
                 c.requests.load(std::memory_order_relaxed), c.bytes.load(std::memory_order_relaxed)};
    };
    out.push_back(row(configured_seed, configured_));
    for (const auto& [seed, c] : seeds_) out.push_back(row(seed, *c));
    if (other_.lookups.load(std::memory_order_relaxed) || other_.requests.load(std::memory_order_relaxed))
      out.push_back(row(std::nullopt, other_));
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::map<uint64_t, std::unique_ptr<SeedCounters>> seeds_;  // other than the configured seed
  SeedCounters configured_;
  SeedCounters other_;
};

}  // namespace dlfs::fs
