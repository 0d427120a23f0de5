// Where the values of an LMDB dataset are, decided once when the dataset is
// opened (LMDBIO sections 4.4-4.6), never by a B+tree seek per read:
//
//   1. the sidecar next to data.mdb (lmdb_sidecar.h), if there is one and its
//      validation key equals the database's newer meta page: its explicit
//      locations, or the replay of its provenance (whose predicted meta page
//      must match too);
//   2. spot checks of those locations against the file (lmdb_check.h);
//   3. otherwise, or on any mismatch, a one-time walk of the tree with a
//      cursor (lmdb_walk.h). A stale, foreign, corrupt or wrong sidecar costs
//      that walk and a log line, never a wrong byte.
#pragma once

#include <string>

#include "common/status.h"
#include "provenance/lmdb_check.h"
#include "provenance/lmdb_types.h"

namespace dlfs::provenance::lmdb {

enum class LayoutSource { sidecar_provenance, sidecar_explicit, walk };
const char* source_name(LayoutSource s);  // "sidecar (provenance)", "sidecar (explicit)", "tree walk"

struct Layout {
  MetaKey key;                // the database's newer meta page
  Locations locations;        // key order
  LayoutSource source = LayoutSource::walk;
  std::string why_walk;       // for walk: why the sidecar was not used ("" = there is none)
  SpotCheckReport checks;     // what the spot checks read (sidecar sources)
  double seconds = 0;         // time to get the locations
};

struct LayoutOptions {
  SpotCheckOptions checks;
  bool allow_walk = true;  // false: a sidecar problem is an error (dlfs-ctl lmdb verify)
};

// `dir` holds data.mdb (and maybe data.mdb.dlfs). Errors: data.mdb missing,
// unreadable or not LMDB; with allow_walk, a sidecar problem is not an error.
Result<Layout> open_layout(const std::string& dir, const LayoutOptions& options = {});

}  // namespace dlfs::provenance::lmdb
