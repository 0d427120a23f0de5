// The TFRecord files of a scanned tree and their records: what format
// "tfrecord" serves and what `dlfs-ctl tfrecord` shows, verifies and indexes.
//
// Every regular file is a TFRecord file, except "<name>.idx" beside a file
// "<name>": that is the file's DALI-style index. An index that tiles its file
// locates the records without reading them; one that does not (stale, or not
// an index) is reported and the file is scanned instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "provenance/manifest.h"
#include "provenance/tfrecord.h"

namespace dlfs::provenance::tfrecord {

struct File {
  uint32_t file = 0;            // tree file id
  std::string path;             // absolute path
  std::vector<Record> records;  // in file order
  bool indexed = false;         // located by its index
  std::string why_scanned;      // the index's problem, when it has one that was not used
};

// Whether file f of the tree is the index of another file of it.
bool is_index(const Manifest& tree, uint32_t f);

// Locates the records of every TFRecord file of the tree, in canonical order
// (by their indexes if `use_indexes`). A bad length CRC or a truncated record
// is an error naming the file and the record's offset; with `skipped`, such a
// file is left out and its error appended there instead.
Result<std::vector<File>> locate_files(const Manifest& tree, bool use_indexes,
                                       std::vector<std::string>* skipped = nullptr);

}  // namespace dlfs::provenance::tfrecord
