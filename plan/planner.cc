#include "plan/planner.h"

#include <cmath>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "plan/randomization.h"
#include "plan/round_placement.h"
#include "plan/shuffle_rng.h"
#include "common/units.h"

namespace dlfs::plan {
namespace {

std::string percent(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f%%", v * 100);
  return b;
}

}  // namespace

Result<std::unique_ptr<Planner>> Planner::create(const std::string& name, const PlanConfig& plan,
                                                 const provenance::Manifest& m, uint64_t memory_budget,
                                                 uint64_t held_bytes, uint32_t nodes) {
  const std::string what = "dataset '" + name + "'";
  std::unique_ptr<Planner> p(new Planner());
  p->config_ = plan;
  p->seed_ = plan.seed;
  p->remainder_ = plan.remainder;
  p->shape_ = make_plan_shape(
      m.sample_count(), plan.round_chunk, 0,
      // An LMDB overflow value's chunk also holds the page header in front of
      // it, which every read of the value checks.
      [&](uint64_t i) { return m.sample_data_offset(i) - m.sample_check_bytes(i); },
      [&](uint64_t i) { return m.sample(i).length + m.sample_check_bytes(i); });
  // What readers read of each chunk (rounds over the nodes are released once
  // it was all read): nothing of an empty sample, whose read ends before its
  // check (a TFRecord record of no bytes still has a 12-byte header); of a
  // group (a WebDataset sample), its members' bytes, not the tar headers
  // between them.
  const bool grouped = m.samples_grouped();
  for (size_t c = 0; c < p->shape_.chunk_count(); ++c) {
    uint64_t payload = 0;
    for (uint64_t i = p->shape_.chunk_first[c]; i < p->shape_.chunk_first[c + 1]; ++i) {
      if (m.sample(i).length == 0) continue;
      uint64_t read = m.sample(i).length;
      if (grouped && m.sample_member_count(i) > 1) {
        read = 0;
        for (uint32_t j = 0; j < m.sample_member_count(i); ++j) read += m.sample_member(i, j).length;
      }
      payload += read + m.sample_check_bytes(i);
    }
    p->shape_.chunk_payload[c] = payload;
  }
  const uint64_t total = p->shape_.total_bytes;
  const double r = plan.shuffle_ratio;
  if (plan.round_span == RoundSpan::node) nodes = 1;  // each node's own memory: whole rounds on every node
  if (nodes > 1 && ((r > 0 && r < 1) || (r == 0 && held_bytes > memory_budget))) {
    // Rounds over the job's memory: each member's two slots hold half its budget each.
    p->member_slots_.assign(nodes, memory_budget / 2);
    const uint64_t fits = aggregate_round_bytes(p->member_slots_, largest_chunk(p->shape_));
    uint64_t want = fits;
    if (r > 0) {
      want = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(r * static_cast<double>(total))));
      if (want > fits)
        return Status(ENOMEM, what + ": shuffle_ratio " + std::to_string(r) + " needs rounds of " + format_size(want) +
                                  " over " + std::to_string(nodes) + " nodes, but their memory holds rounds of " +
                                  format_size(fits) + " (each node's budget of " + format_size(memory_budget) +
                                  " is two round slots, less one chunk each)");
      // Slots of what R needs, no more: the rest of the budget is the next
      // dataset's (before, every node's two slots took all of it).
      const uint64_t largest = largest_chunk(p->shape_);
      const uint64_t slot = std::min<uint64_t>(memory_budget / 2, (want + nodes - 1) / nodes + largest);
      p->member_slots_.assign(nodes, slot);
      if (aggregate_round_bytes(p->member_slots_, largest) < want) p->member_slots_.assign(nodes, memory_budget / 2);
    }
    p->shape_.round_bytes = want;
    if (want == 0) {
      spdlog::warn("[{}] memory budget {} per node is too small for rounds of {} chunks; epochs are fully shuffled "
                   "and mostly read from the backend (raise the budget, or lower round_chunk)",
                   name, format_size(memory_budget), format_size(plan.round_chunk));
      p->member_slots_.clear();
    }
  } else if (r > 0 && r < 1) {
    p->shape_.round_bytes = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(r * static_cast<double>(total))));
    const uint64_t need = 2 * round_slot_bytes(p->shape_);
    if (need > memory_budget)
      return Status(ENOMEM, what + ": shuffle_ratio " + std::to_string(r) + " needs " + format_size(need) +
                                " (two round buffers of " + format_size(need / 2) + ") but its memory budget is " +
                                format_size(memory_budget));
  } else if (r == 0 && held_bytes > memory_budget) {
    p->shape_.round_bytes = memory_budget / 2;  // double buffering: two rounds in memory
    if (p->shape_.round_bytes == 0 || 2 * round_slot_bytes(p->shape_) > memory_budget) {
      // Not even two chunks fit: no rounds. The full shuffle is served from
      // what fits in the storage buffer and the backend for the rest.
      spdlog::warn("[{}] memory budget {} is too small for rounds of {} chunks; epochs are fully shuffled and "
                   "mostly read from the backend (raise the budget, or lower round_chunk)",
                   name, format_size(memory_budget), format_size(plan.round_chunk));
      p->shape_.round_bytes = 0;
    }
  }
  p->storage_budget_ = p->rounds() ? 0 : memory_budget;
  auto rounds0 = epoch_rounds(p->shape_, p->seed_, 0);
  p->rounds_per_epoch_ = rounds0.size();
  p->rl_ = plan::randomization_level(rounds0, p->shape_.chunk_count());
  if (p->rl_ + 1e-12 < plan.min_randomization) {
    const uint64_t round = round_bytes_for_level(p->shape_, p->seed_, plan.min_randomization);
    return Status(EINVAL, what + ": randomization level " + percent(p->rl_) + " (R = " + std::to_string(p->ratio()) +
                              ") is below min_randomization " + percent(plan.min_randomization) +
                              "; a memory budget of at least " + format_size(2 * round) + " (two rounds of " +
                              format_size(round) + ", R = " +
                              std::to_string(static_cast<double>(round) / static_cast<double>(total)) +
                              ") would reach it");
  }
  if (p->spread())
    spdlog::info("[{}] epochs in rounds over the memory of {} nodes: R = {:.3f}, {} rounds of at most {} per epoch "
                 "(at most {} on each node), {} chunks of {}; randomization level {}",
                 name, nodes, p->ratio(), p->rounds_per_epoch_, format_size(p->shape_.round_bytes),
                 format_size(p->member_slots_[0]), p->shape_.chunk_count(), format_size(plan.round_chunk),
                 percent(p->rl_));
  else if (p->rounds())
    spdlog::info("[{}] epochs in rounds: R = {:.3f}, {} rounds of at most {} per epoch, {} chunks of {}; "
                 "randomization level {}",
                 name, p->ratio(), p->rounds_per_epoch_, format_size(p->shape_.round_bytes),
                 p->shape_.chunk_count(), format_size(plan.round_chunk), percent(p->rl_));
  return p;
}

uint64_t Planner::round_memory() const {
  if (!rounds()) return 0;
  return spread() ? 2 * member_slots_[0] : 2 * round_slot_bytes(shape_);
}

uint64_t Planner::round_key(uint64_t dataset_fingerprint) const {
  uint64_t h = dataset_fingerprint;
  auto mix_in = [&h](uint64_t v) { h = mix(h ^ v, 0x9e3779b97f4a7c15ull); };
  mix_in(seed_);
  mix_in(config_.round_chunk);
  mix_in(shape_.round_bytes);
  mix_in(shape_.chunk_count());
  for (uint64_t s : member_slots_) mix_in(s);
  return h;
}

std::shared_ptr<const EpochOrder> Planner::order(uint64_t epoch, uint64_t seed) const {
  {
    std::lock_guard lk(mu_);
    for (auto it = cache_.begin(); it != cache_.end(); ++it)
      if (it->seed == seed && it->order->epoch == epoch) {
        auto o = it->order;
        cache_.splice(cache_.begin(), cache_, it);
        return o;
      }
  }
  // Built outside the lock: other epochs stay available meanwhile. Two
  // threads may build the same epoch; both results are identical.
  auto built = build_epoch_order(shape_, seed, epoch);
  std::lock_guard lk(mu_);
  cache_.push_front({seed, built});
  if (cache_.size() > kCachedEpochs) cache_.pop_back();
  return built;
}

Planner::SeedLevel Planner::seed_level(uint64_t seed) const {
  if (seed == seed_) return {rl_, rounds_per_epoch_};
  {
    std::lock_guard lk(mu_);
    for (const auto& [s, level] : seed_levels_)
      if (s == seed) return level;
  }
  // O(chunks), as at start for the configured seed; a few seeds are kept.
  auto rounds = epoch_rounds(shape_, seed, 0);
  const SeedLevel level{plan::randomization_level(rounds, shape_.chunk_count()), rounds.size()};
  std::lock_guard lk(mu_);
  seed_levels_.emplace_front(seed, level);
  if (seed_levels_.size() > 16) seed_levels_.pop_back();
  return level;
}

double Planner::randomization_level(uint64_t seed) const { return seed_level(seed).rl; }

uint64_t Planner::rounds_per_epoch(uint64_t seed) const { return seed_level(seed).rounds; }

}  // namespace dlfs::plan
