// PlanConfig: how a dataset's epoch views are planned (docs/views.md), the
// plan keys of a [[dataset]] (a key list: common/key_list.h). fs/config fills
// them from TOML and flags, plan/Planner makes them concrete against the
// manifest and the memory budget.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "common/enum_names.h"
#include "common/key_list.h"

namespace dlfs::plan {

// When N is not a multiple of W (plan/epoch_plan.h).
enum class Remainder { pad, drop };
constexpr std::array<std::string_view, 2> enum_names(Remainder) { return {"pad", "drop"}; }

// How a tar stream walks the plan: exactly, or the first ready of a window
// of planned samples (DeepIO's opportunistic ordering, fs/views/opportunistic_stream.h).
enum class Order { ordered, opportunistic };
constexpr std::array<std::string_view, 2> enum_names(Order) { return {"ordered", "opportunistic"}; }

// Whose memory rounds are cut from on a cluster (plan/round_placement.h):
// every node's together (DeepIO III-A), or each node's own.
enum class RoundSpan { cluster, node };
constexpr std::array<std::string_view, 2> enum_names(RoundSpan) { return {"cluster", "node"}; }

#define DLFS_PLAN_KEYS(KEY)                                                                                            \
  KEY(seed, uint64_t, 0, "--seed", "Job seed of the epoch views: same seed, same orders on every node and restart",    \
      .range(0))                                                                                                       \
  KEY(remainder, Remainder, Remainder::pad, "--remainder",                                                             \
      "When samples do not divide by W: pad (wrap, as DistributedSampler) or drop")                                    \
  KEY(shuffle_ratio, double, 0, "--shuffle-ratio", "R: share of the dataset resident per round (0 < R <= 1)",          \
      .within(0, 1).note("0 (from the memory budget)"))                                                                \
  KEY(round_span, RoundSpan, RoundSpan::cluster, "--round-span",                                                       \
      "On a cluster, rounds over every node's memory (cluster: R is the nodes' together, each node loads its part "   \
      "and reads the others' from them) or over each node's own (node: every node loads whole rounds)")               \
  KEY(round_chunk, uint64_t, 1ull << 20, "--round-chunk",                                                              \
      "Unit rounds are built and loaded in (chunks of whole samples)", .bytes(1))                                      \
  KEY(min_randomization, double, 0, "--min-randomization", "Refuse to start if the randomization level is below this", \
      .within(0, 1))                                                                                                   \
  KEY(world_size, uint32_t, 1, "--world-size", "World size shown in epoch listings (any can be opened)",               \
      .range(1, 65535))                                                                                                \
  KEY(epochs_listed, uint32_t, 1, "--epochs-listed", "Epochs shown in listings (any can be opened)",                   \
      .range(1, 1000000))                                                                                              \
  KEY(order, Order, Order::ordered, "--order",                                                                         \
      "ordered (exactly the plan) or opportunistic (tar streams yield whichever of the next "                          \
      "opportunistic_window planned samples is ready first)")                                                          \
  KEY(opportunistic_window, uint64_t, 256, "--opportunistic-window", "Samples an opportunistic stream may look ahead", \
      .range(1, int64_t{1} << 30))                                                                                     \
  KEY(readahead, bool, true, "--no-readahead", "Per-stream read-ahead rings for samples that are not resident",        \
      .flag_sets(false, "No read-ahead rings: samples that are not resident are read when asked for"))

struct PlanConfig {
  DLFS_PLAN_KEYS(DLFS_KEY_MEMBER)
};

}  // namespace dlfs::plan
