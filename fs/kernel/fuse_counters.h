// FuseCounters: how many requests of each kind the kernel sent, for stats
// ("fuse" in /.dlfs/stats, docs/stats.md). They show what a reader's
// open/read/close costs in round trips to the daemon: after the first
// epoch a raw file should cost none, and every open, flush or release the
// kernel can skip is one it does skip (fs/kernel/fuse_ops.cc, op_init).
// Each kind also has a latency histogram (common/latency_histogram.h): the
// time from the callback receiving the request to its reply, a parked
// request's wait for its dataset included ("fuse.latency" in the stats,
// dlfs_fuse_request_duration_seconds in docs/metrics.md).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/latency_histogram.h"

namespace dlfs::fs {

// Every kind of request DLFS answers; `write` counts all the refused
// modifying ones (setattr, mknod, write, ...).
#define DLFS_FUSE_OPS(X) \
  X(lookup)              \
  X(forget)              \
  X(getattr)             \
  X(open)                \
  X(read)                \
  X(flush)               \
  X(release)             \
  X(opendir)             \
  X(readdir)             \
  X(readdirplus)         \
  X(releasedir)          \
  X(statfs)              \
  X(getxattr)            \
  X(ioctl)               \
  X(listxattr)           \
  X(write)

enum class FuseOp : uint8_t {
#define DLFS_FUSE_OP_ENUM(name) name,
  DLFS_FUSE_OPS(DLFS_FUSE_OP_ENUM)
#undef DLFS_FUSE_OP_ENUM
      count_
};

class FuseCounters {
 public:
  void add(FuseOp op) { counts_[static_cast<size_t>(op)].fetch_add(1, std::memory_order_relaxed); }
  uint64_t get(FuseOp op) const { return counts_[static_cast<size_t>(op)].load(std::memory_order_relaxed); }
  // A request of kind `op` was answered `d` after it arrived.
  void observe(FuseOp op, std::chrono::steady_clock::duration d) { latency_[static_cast<size_t>(op)].observe(d); }
  LatencyHistogram::Snapshot latency(FuseOp op) const { return latency_[static_cast<size_t>(op)].snapshot(); }
  // {"lookup": n, "open": n, ...}: every kind, zeros included.
  nlohmann::json to_json() const {
    nlohmann::json j = nlohmann::json::object();
#define DLFS_FUSE_OP_JSON(name) j[#name] = get(FuseOp::name);
    DLFS_FUSE_OPS(DLFS_FUSE_OP_JSON)
#undef DLFS_FUSE_OP_JSON
    return j;
  }
  // {"read": histogram, ...} (common/latency_histogram.h): the kinds answered at least once.
  nlohmann::json latency_json() const {
    nlohmann::json j = nlohmann::json::object();
#define DLFS_FUSE_OP_LATENCY(name)                          \
  if (auto s = latency(FuseOp::name); s.count() > 0) j[#name] = histogram_json(s);
    DLFS_FUSE_OPS(DLFS_FUSE_OP_LATENCY)
#undef DLFS_FUSE_OP_LATENCY
    return j;
  }

 private:
  std::array<std::atomic<uint64_t>, static_cast<size_t>(FuseOp::count_)> counts_{};
  std::array<LatencyHistogram, static_cast<size_t>(FuseOp::count_)> latency_{};
};

}  // namespace dlfs::fs
