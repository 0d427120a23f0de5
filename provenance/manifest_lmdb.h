// The lmdb part of a Manifest (internal to provenance/): the table of value
// locations, which a repair may replace while readers use it.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "provenance/lmdb_types.h"
#include "provenance/manifest.h"

namespace dlfs::provenance {

struct LmdbState {
  LmdbInfo info;
  std::string data_path;  // absolute path of data.mdb, for the repair walk and messages
  // The table sample() reads. Replaced tables are kept (a reader may still
  // hold the old pointer); a repair happens at most a few times per daemon.
  std::atomic<const lmdb::Locations*> current{nullptr};
  std::vector<std::unique_ptr<const lmdb::Locations>> tables;
  std::atomic<uint64_t> generation{0};
  std::mutex repair_mu;
  std::string broken;  // set when a repair could not fix the table: every read fails with it

  const lmdb::Locations& table() const { return *current.load(std::memory_order_acquire); }
};

// Opens the environment at `root` (data.mdb is file `data_file`, of
// `data_size` bytes in the scan) and gets every value's location
// (lmdb::open_layout: sidecar, spot checks, or one walk).
Result<std::unique_ptr<LmdbState>> open_lmdb_state(const std::string& root, uint32_t data_file, uint64_t data_size,
                                                   uint32_t spot_leaves);

}  // namespace dlfs::provenance
