// Making the sidecar of an existing LMDB database (LMDBIO's one-time
// post-processing): one cursor pass gives every value's location and every
// key's size; then provenances that a Caffe-style build could have had are
// replayed, and the first that reproduces the database exactly is stored when
// it is smaller than the explicit locations (docs/lmdb-sidecar.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "provenance/lmdb_types.h"

namespace dlfs::ctl {

struct SidecarMade {
  std::string path;
  bool provenance_form = false;  // else explicit
  uint64_t bytes = 0;            // the sidecar file's size
  uint64_t records = 0;
  int candidates_tried = 0;      // provenance replays compared with the walk
  std::string build;             // the exact provenance found, e.g. "keys in order, a commit every 7 records"
  double walk_seconds = 0;       // the cursor pass
  double seconds = 0;            // the whole job
};

struct SidecarRequest {
  std::string dir;  // the environment directory (data.mdb inside)
  // The build's provenance when it is known (ingest); otherwise candidates
  // are derived from the database: keys put in key order, a constant commit
  // interval consistent with the meta page's transaction count, APPEND or not.
  std::optional<provenance::lmdb::Provenance> known;
  bool explicit_only = false;  // skip the provenance search
  bool force = false;          // overwrite an existing sidecar
};

Result<SidecarMade> make_sidecar(const SidecarRequest& request);

// The constant commit intervals c that give `txns` transactions for
// `records` records (ceil(records / c) == txns), a few of them: the smallest,
// the largest and round numbers in between. Empty when none does.
std::vector<uint64_t> candidate_intervals(uint64_t records, uint64_t txns);

}  // namespace dlfs::ctl
