// The vocabulary of LMDB datasets (LMDBIO, sections 3 and 4.3-4.6): where a
// value's bytes are in data.mdb, what identifies one database state, and the
// provenance of a build from which the locations can be recomputed.
//
// A dataset of format `lmdb` is the values of the main (unnamed) database in
// key order: sample i is the value of the i-th smallest key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlfs::provenance::lmdb {

// Every liblmdb page starts with this header (MDB_page: pgno, pad, flags, lower, upper).
inline constexpr uint64_t kPageHeaderBytes = 16;

// One value's bytes in data.mdb: [offset, offset + length). For a value in
// overflow pages, offset is 16 bytes past the start of its first page (the
// page header); for a value inside a leaf page, it points into that page.
struct ValueLocation {
  uint64_t offset = 0;
  uint64_t length = 0;
  bool operator==(const ValueLocation&) const = default;
};

// Every value's location, in key order.
using Locations = std::vector<ValueLocation>;

// The validation key: fields of the newer meta page (pages 0 and 1; the higher
// txnid wins). Any commit changes txnid; a foreign database differs in most
// fields. Equal keys mean "the database the sidecar was made for".
struct MetaKey {
  uint32_t page_size = 0;    // from the meta page (mm_dbs[FREE_DBI].md_pad)
  uint32_t version = 0;      // mm_version (the data format, 1 for 0.9.x)
  uint64_t txnid = 0;        // mm_txnid
  uint64_t last_pgno = 0;    // mm_last_pg
  // The main database's record (mm_dbs[MAIN_DBI]).
  uint64_t root = 0;
  uint32_t depth = 0;
  uint32_t flags = 0;
  uint64_t branch_pages = 0;
  uint64_t leaf_pages = 0;
  uint64_t overflow_pages = 0;
  uint64_t entries = 0;
  bool operator==(const MetaKey&) const = default;
};

// How an insert-only database was built, enough to replay liblmdb's page
// allocation exactly (../shared/notes/lmdb-layout.md). Vectors of sizes hold
// one element when every record has that size.
struct Provenance {
  uint32_t page_size = 4096;
  uint32_t lmdb_version = 0;  // the writer's MDB_VERSION_FULL (major << 24 | minor << 16 | patch)
  bool append = false;        // every put used MDB_APPEND
  uint64_t records = 0;
  std::vector<uint32_t> key_sizes;    // in insertion order (or one for all)
  std::vector<uint32_t> value_sizes;  // in insertion order (or one for all)
  // key_rank[i]: the key order position of the i-th record put. Empty: the
  // records were put in key order (key_rank[i] == i).
  std::vector<uint64_t> key_rank;
  // Records per write transaction, in commit order. One element n: a commit
  // every n records, the last transaction holding the remainder.
  std::vector<uint64_t> txn_records;
  bool operator==(const Provenance&) const = default;
};

}  // namespace dlfs::provenance::lmdb
