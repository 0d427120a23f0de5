// What `dlfs-ctl plan` and `dlfs-ctl shuffle-report` print, computed from a
// dataset's planner (pure functions of the plan; nothing is read).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "fs/dataset/dataset.h"

namespace dlfs::fs {

// The plan of one dataset: seed, remainder, R, rounds, RL, and for (epoch,
// world_size, rank) the view's size and its first `show` sample ids.
Result<nlohmann::json> plan_json(const Dataset& ds, uint64_t epoch, uint32_t world_size, uint32_t rank,
                                 uint64_t show);

// Measures `epochs` epochs of this configuration against a full shuffle and
// a constant order (cache/shuffle_quality.h). progress(done, total) per epoch.
nlohmann::json shuffle_report_json(const Dataset& ds, uint64_t epochs,
                                   const std::function<void(uint64_t, uint64_t)>& progress);

// The "plan" block of stats.
nlohmann::json plan_summary_json(const Dataset& ds);

}  // namespace dlfs::fs
