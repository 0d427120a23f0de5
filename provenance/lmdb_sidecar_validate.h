// The sidecar's consistency rules (docs/lmdb-sidecar.md, "Validation"); the
// public entry point is validate_sidecar (lmdb_sidecar.h). Internal to the
// sidecar code (lmdb_sidecar*.cc).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "provenance/lmdb_sidecar.h"
#include "provenance/lmdb_types.h"

namespace dlfs::provenance::lmdb::sidecar_detail {

// Checks the MetaKey and that it describes `records` records within `limits`;
// returns the database's size in bytes, for bounds on locations. The decoder
// calls it before anything is sized from `records`.
Result<uint64_t> check_key(const MetaKey& k, uint64_t records, const DecodeLimits& limits, const std::string& name);

}  // namespace dlfs::provenance::lmdb::sidecar_detail
