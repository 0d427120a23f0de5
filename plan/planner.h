// Planner: a dataset's epoch plan settings, made concrete.
//
// Decides at start whether the dataset is served whole (R = 1: the storage
// buffer holds it) or in rounds (R < 1: two round buffers, the raw tree read
// through from the backend), computes the randomization level, refuses a
// configuration below min_randomization with the memory that would reach it,
// and hands out epoch orders (built on demand, the last few kept). Pure plan
// math: the round buffers themselves are cache::RoundPipeline, which the
// dataset builds from this plan's shape.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plan/epoch_plan.h"
#include "plan/round_plan.h"
#include "plan/plan_config.h"
#include "provenance/manifest.h"

namespace dlfs::plan {

class Planner {
 public:
  // memory_budget: bytes this dataset may use on this node. held_bytes: the
  // bytes this node must hold (its stripe; the whole dataset on a cluster of
  // one): rounds are used only when they do not fit. nodes: the job's
  // members; with more than one, rounds span their memory (DeepIO III-A,
  // plan/round_placement.h): every member gives half its budget to each of
  // its two round slots, and R is the aggregate's. Every member must have
  // the same budget (round_key() tells members apart that do not). Errors
  // name the dataset. `name` names the dataset in errors and logs.
  static Result<std::unique_ptr<Planner>> create(const std::string& name, const PlanConfig& config,
                                                 const provenance::Manifest& manifest, uint64_t memory_budget,
                                                 uint64_t held_bytes, uint32_t nodes = 1);

  uint64_t seed() const { return seed_; }
  Remainder remainder() const { return remainder_; }
  bool opportunistic() const { return config_.order == Order::opportunistic; }
  std::string order_name() const { return std::string(name_of(config_.order)); }
  std::string remainder_name() const { return std::string(name_of(remainder_)); }
  const PlanShape& shape() const { return shape_; }
  bool rounds() const { return !shape_.single_round(); }
  double ratio() const { return shape_.ratio(); }
  double randomization_level() const { return rl_; }
  uint64_t rounds_per_epoch() const { return rounds_per_epoch_; }
  // Bytes the storage buffer may use (0 in round mode: memory goes to rounds).
  uint64_t storage_budget() const { return storage_budget_; }
  uint64_t round_memory() const;
  // Rounds span the job's members: each member's slot (index = rank), else empty.
  const std::vector<uint64_t>& member_slots() const { return member_slots_; }
  bool spread() const { return rounds() && !member_slots_.empty(); }
  // What members must agree on for one's round slot to mean the same bytes
  // to another: the plan's seed, chunking, round size and slots, with the
  // dataset's fingerprint (cache/round_remote.h, round_tag).
  uint64_t round_key(uint64_t dataset_fingerprint) const;
  const PlanConfig& config() const { return config_; }

  PlanKey key(uint64_t epoch, uint32_t world_size) const {
    return PlanKey{seed_, epoch, shape_.samples, world_size, remainder_};
  }
  std::shared_ptr<const EpochOrder> order(uint64_t epoch) const { return order(epoch, seed_); }
  // The order a planner with seed `seed` (and this one's shape) would give:
  // the views of another job's seed (docs/views.md, seeds/<s>/). Its rounds
  // are that seed's; the round buffers only ever hold this planner's seed's.
  std::shared_ptr<const EpochOrder> order(uint64_t epoch, uint64_t seed) const;
  // The randomization level of `seed`'s plan (of epoch 0, as randomization_level()).
  double randomization_level(uint64_t seed) const;
  // Rounds per epoch of `seed`'s plan (of epoch 0, as rounds_per_epoch()).
  uint64_t rounds_per_epoch(uint64_t seed) const;

 private:
  Planner() = default;
  PlanConfig config_;
  uint64_t seed_ = 0;
  Remainder remainder_ = Remainder::pad;
  PlanShape shape_;
  double rl_ = 1;
  uint64_t rounds_per_epoch_ = 1;
  uint64_t storage_budget_ = 0;
  std::vector<uint64_t> member_slots_;
  mutable std::mutex mu_;  // guards cache_ and seed_levels_
  struct CachedOrder {
    uint64_t seed;
    std::shared_ptr<const EpochOrder> order;
  };
  mutable std::list<CachedOrder> cache_;  // most recent first
  // Two jobs with their own seeds read one dataset's views: room for both
  // jobs' current and next epochs.
  static constexpr size_t kCachedEpochs = 8;
  struct SeedLevel {
    double rl;
    uint64_t rounds;
  };
  SeedLevel seed_level(uint64_t seed) const;
  mutable std::list<std::pair<uint64_t, SeedLevel>> seed_levels_;  // other seeds', most recent first
};

}  // namespace dlfs::plan
