// Where every value of an insert-only LMDB database is, computed from how the
// database was built instead of by reading its B+tree (LMDBIO, sections 4.3 to
// 4.6: "LMDB datasets without seeks").
//
// liblmdb's page allocation is deterministic given the sequence of puts and
// commits, so replaying it on a model of the pages reproduces every page
// number and every node's position inside its page. The model covers what a
// dataset builder does (Caffe's convert_imageset, LMDBIO's tools, most
// Python writers): puts of new keys into the main database of a fresh
// environment, with or without MDB_APPEND, committed in batches, and no reader
// holding an old snapshot while the writer commits. It does not cover deletes,
// overwrites, dupsort, nested transactions or named databases: a database
// built that way needs the cursor walk (lmdb_walk.h).
#pragma once

#include "common/status.h"
#include "provenance/lmdb_types.h"

namespace dlfs::provenance::lmdb {

// liblmdb versions whose writer the model follows (the allocator, the split
// rules and the free-list save are the same from 0.9.24 to 0.9.31).
inline constexpr uint32_t kVersionFull(uint32_t major, uint32_t minor, uint32_t patch) {
  return major << 24 | minor << 16 | patch;
}
inline constexpr uint32_t kOldestModeled = kVersionFull(0, 9, 24);
inline constexpr uint32_t kNewestModeled = kVersionFull(0, 9, 31);
// The page size the model is verified for. liblmdb's split threshold and node
// limits depend on it; other sizes are refused rather than guessed.
inline constexpr uint32_t kModeledPageSize = 4096;

struct ReplayResult {
  Locations locations;  // key order
  // The meta page the build must have left: compare with read_meta_key() to
  // catch provenance that does not describe this file.
  MetaKey meta;
};

// Replays the build. Refuses (EINVAL/ENOTSUP, with the reason) provenance it
// cannot model: an unsupported page size or liblmdb version, size vectors of
// the wrong length, key_rank that is not a permutation, APPEND with unsorted
// insertion, transaction sizes that do not add up to the record count, keys
// longer than liblmdb's 511-byte limit. Cost: O(records x log records) time,
// O(records) memory.
Result<ReplayResult> replay(const Provenance& p);

// The locations alone.
Result<Locations> replay_locations(const Provenance& p);

}  // namespace dlfs::provenance::lmdb
