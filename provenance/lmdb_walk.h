// The reference for where LMDB values are: one cursor walk of the main
// database with liblmdb itself (LMDBIO's "one-time walk of the tree"). Used by
// the tests to check the replay, and by the daemon when no provenance is given.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "provenance/lmdb_types.h"

namespace dlfs::provenance::lmdb {

// Opens the environment read-only without a lock file (so it works on a
// read-only mount and never creates lock.mdb), walks the main database in key
// order and returns each value's [offset, offset + length) in data.mdb.
// `env_dir_or_data_mdb` is the environment directory or its data file.
// Errors (naming the path): not an LMDB environment, the main database uses
// dupsort, or it holds named sub-databases (neither is a dataset of values).
// With `key_sizes`, the same pass also collects every key's length in key
// order (what a provenance needs besides the value sizes).
Result<Locations> walk_locations(const std::string& env_dir_or_data_mdb,
                                 std::vector<uint32_t>* key_sizes = nullptr);

}  // namespace dlfs::provenance::lmdb
