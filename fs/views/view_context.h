// ViewContext: what a view's plan takes beyond (epoch, W, rank): the seed of
// its order (seeds/<s>/: another job's seed; else the configured one) and,
// for a resumed epoch, the consumed counts of the W ranks that read part of
// it (epochs/<e>/<W>/resume/<consumed>/<W'>/). docs/views.md describes the paths.
//
// Immutable once made, and shared by value: a ViewKey holds a pointer to
// one, and two keys are equal when their contexts' fields are. A null
// context is the configured seed and the whole epoch (every existing path).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "common/status.h"
#include "fs/views/resume_order.h"
#include "plan/plan_config.h"

namespace dlfs::fs {

// One seed's view traffic through the mount (stats "views.seeds", docs/stats.md).
struct SeedCounters {
  std::atomic<uint64_t> lookups{0};   // view files looked up (the kernel caches them)
  std::atomic<uint64_t> samples{0};   // samples of those views (.tar, .bin, .tfrecord and <r>/; not .index)
  std::atomic<uint64_t> requests{0};  // reads of view files
  std::atomic<uint64_t> bytes{0};     // bytes of those reads
};

class ViewContext {
 public:
  // seeded: named by seeds/<seed>/ (a different path, so a different view,
  // from the same seed under epochs/). resume_world 0: the whole epoch.
  // consumed: the counts of the resume_world ranks, and the path component
  // that named them (two names of the same counts are two directories).
  ViewContext(uint64_t seed, bool seeded, uint32_t resume_world = 0, std::vector<uint64_t> consumed = {},
              std::string consumed_name = {})
      : seed_(seed), seeded_(seeded), resume_world_(resume_world), consumed_(std::move(consumed)),
        consumed_name_(std::move(consumed_name)) {}

  uint64_t seed() const { return seed_; }
  bool seeded() const { return seeded_; }
  bool resumed() const { return resume_world_ != 0; }
  uint32_t resume_world() const { return resume_world_; }
  const std::vector<uint64_t>& consumed() const { return consumed_; }
  const std::string& consumed_name() const { return consumed_name_; }

  // The remainder of `epoch` after the consumed counts, for an epoch of
  // `samples` samples: computed once and shared while any view holds it
  // (the context keeps only a weak reference, so contexts cost no O(N)).
  Result<std::shared_ptr<const ResumeOrder>> remainder(uint32_t epoch, uint64_t samples, plan::Remainder rem) const;

  // This seed's counters (set by who made the context; may be null).
  SeedCounters* counters = nullptr;

  auto fields() const { return std::tie(seed_, seeded_, resume_world_, consumed_name_); }

 private:
  uint64_t seed_;
  bool seeded_;
  uint32_t resume_world_;
  std::vector<uint64_t> consumed_;
  std::string consumed_name_;
  mutable std::mutex mu_;
  mutable uint32_t cached_epoch_ = 0;
  mutable std::weak_ptr<const ResumeOrder> cached_;
};

// Null contexts compare as the configured seed's whole epoch.
inline bool same_context(const ViewContext* a, const ViewContext* b) {
  if (!a || !b) return a == b;
  return a->fields() == b->fields();
}
inline bool context_less(const ViewContext* a, const ViewContext* b) {
  if (!a || !b) return !a && b;
  return a->fields() < b->fields();
}

}  // namespace dlfs::fs
