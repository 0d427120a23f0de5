// PlanConfig: how a dataset's epoch views are planned (docs/views.md). Plain
// values; fs/config fills them from TOML and flags, plan/Planner makes them
// concrete against the manifest and the memory budget.
#pragma once

#include <cstdint>
#include <string>

namespace dlfs::plan {

struct PlanConfig {
  uint64_t seed = 0;                 // the job seed: same seed, same orders everywhere
  std::string remainder = "pad";     // "pad" | "drop" when N is not a multiple of W
  double shuffle_ratio = 0;          // R in (0, 1]; 0 = from the memory budget
  uint64_t round_chunk = 1ull << 20; // bytes per chunk: the unit rounds are built and loaded in
  double min_randomization = 0;      // refuse to start below this RL (0..1)
  uint32_t world_size = 1;           // W shown in listings (any W can be looked up)
  uint32_t epochs_listed = 1;        // epochs shown in listings (any epoch can be looked up)
  std::string order = "ordered";     // "ordered" | "opportunistic" (tar streams, DeepIO-Opp)
  uint64_t opportunistic_window = 256;  // samples a stream may look ahead for a ready one
  bool readahead = true;             // per-stream read-ahead rings for samples not resident
};

}  // namespace dlfs::plan
