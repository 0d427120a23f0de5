// Stats: the JSON documents behind /.dlfs/stats, `dlfs-ctl status` and
// `dlfs-ctl stats` (schema: docs/stats.md). Built from live counters on demand.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fs/dataset/dataset.h"
#include "fs/dataset/dataset_slot.h"
#include "fs/namespace/namespace.h"

namespace dlfs::fs {

struct DaemonFacts {
  std::string version;
  std::string mountpoint;
  int pid = 0;
  double uptime_s = 0;
  uint64_t budget_bytes = 0;
};

// detailed = false: the status subset (no served/views counters). Every
// dataset has a "state" (scanning, joining, ready, failed); one that is not
// ready has only name, backend, format, state (and error when failed), and
// counts in no total.
// With `ns`, each ready dataset's "views" gives the view ids it handed out.
// With `reader` (who opens /.dlfs/stats), a dataset it may not read shows
// only its name, state and access, and one not scanned yet no backend path
// (unless the reader is root or the daemon's user); daemon-wide totals stay.
nlohmann::json build_stats(const DaemonFacts& facts, const DatasetSlots& datasets, bool detailed,
                           const Namespace* ns = nullptr, const Reader* reader = nullptr);
// Over datasets that are all ready.
nlohmann::json build_stats(const DaemonFacts& facts, const std::vector<std::unique_ptr<Dataset>>& datasets,
                           bool detailed);

// Backend files changed since the scan: {"count": n, "files": [{"path", "what"}]}
// (`files` lists the first few; `count` is all of them).
nlohmann::json changed_files_json(uint64_t count, const std::vector<cache::ChangedFile>& files);
inline constexpr size_t kStatusChangedListed = 20;

// Resident set of this process in bytes (from /proc/self/statm), 0 if unknown.
uint64_t process_rss_bytes();

}  // namespace dlfs::fs
