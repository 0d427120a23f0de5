#include "fs/daemon/plan_report.h"

#include "plan/shuffle_quality.h"

namespace dlfs::fs {
namespace {

nlohmann::json quality_json(const plan::ShuffleQuality& q) {
  return {{"position_spread", q.position_spread},
          {"neighbours_adjacent", q.neighbours_adjacent},
          {"neighbours_within_1pct", q.neighbours_within_1pct},
          {"rank_correlation_canonical", q.rank_correlation_canonical},
          {"rank_correlation_next_epoch", q.rank_correlation_next_epoch}};
}

}  // namespace

nlohmann::json plan_summary_json(const Dataset& ds) {
  const plan::Planner& p = ds.planner();
  return {{"seed", p.seed()},
          {"remainder", p.remainder_name()},
          {"order", p.order_name()},
          {"opportunistic_window", p.config().opportunistic_window},
          {"readahead", p.config().readahead},
          {"shuffle_ratio", p.ratio()},
          {"rounds_per_epoch", p.rounds_per_epoch()},
          {"chunks", p.shape().chunk_count()},
          {"round_chunk_bytes", p.config().round_chunk},
          {"round_memory_bytes", p.round_memory()},
          // Rounds over the job's memory: how many nodes' slots a round spans (1: this node's alone).
          {"round_nodes", p.spread() ? p.member_slots().size() : 1},
          {"randomization_level", p.randomization_level()},
          {"min_randomization", p.config().min_randomization},
          {"world_size", p.config().world_size}};
}

Result<nlohmann::json> plan_json(const Dataset& ds, uint64_t epoch, uint32_t world_size, uint32_t rank,
                                 uint64_t show) {
  if (world_size == 0 || world_size > 65535) return Status(EINVAL, "world size must be from 1 to 65535");
  if (rank >= world_size)
    return Status(EINVAL, "rank " + std::to_string(rank) + " is not below world size " + std::to_string(world_size));
  const plan::Planner& p = ds.planner();
  nlohmann::json j = plan_summary_json(ds);
  j["name"] = ds.name();
  j["samples"] = p.shape().samples;
  j["epoch"] = epoch;
  j["world_size"] = world_size;
  j["rank"] = rank;
  auto key = p.key(epoch, world_size);
  const uint64_t per_rank = p.shape().samples ? plan::samples_per_rank(key) : 0;
  j["samples_per_rank"] = per_rank;
  auto order = p.order(epoch);
  j["rounds"] = order->rounds.size();
  nlohmann::json ids = nlohmann::json::array();
  for (uint64_t k = 0; k < std::min(show, per_rank); ++k) ids.push_back(order->order[plan::global_position(key, rank, k)]);
  j["first_samples"] = ids;
  return j;
}

nlohmann::json shuffle_report_json(const Dataset& ds, uint64_t epochs,
                                   const std::function<void(uint64_t, uint64_t)>& progress) {
  const plan::Planner& p = ds.planner();
  const uint64_t n = p.shape().samples;
  uint64_t done = 0;
  const uint64_t total = 2 * epochs;
  auto step = [&] {
    if (progress) progress(++done, total);
  };
  auto config = plan::measure_shuffle(n, epochs, [&](uint64_t e) {
    step();
    return plan::build_epoch_order(p.shape(), p.seed(), e)->order;
  });
  auto full = plan::measure_shuffle(n, epochs, [&](uint64_t e) {
    step();
    return plan::epoch_permutation(p.seed(), e, n);
  });
  auto constant_order = plan::epoch_permutation(p.seed(), 0, n);
  auto constant = plan::measure_shuffle(n, epochs, [&](uint64_t) { return constant_order; });
  return {{"name", ds.name()},
          {"samples", n},
          {"epochs", epochs},
          {"shuffle_ratio", p.ratio()},
          {"rounds_per_epoch", p.rounds_per_epoch()},
          {"randomization_level", p.randomization_level()},
          {"this_config", quality_json(config)},
          {"full_shuffle", quality_json(full)},
          {"constant_order", quality_json(constant)}};
}

}  // namespace dlfs::fs
