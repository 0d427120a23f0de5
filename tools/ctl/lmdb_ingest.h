// `dlfs-ctl lmdb ingest`: an LMDB database built from a `files` or `fixed`
// dataset the way Caffe's convert_imageset / convert_cifar_data build one
// (sequential keys, a commit every N records, optionally MDB_APPEND; values
// raw or Caffe Datum records), with its provenance recorded as it goes and
// written as the sidecar at the end.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "provenance/manifest.h"
#include "tools/ctl/lmdb_sidecar_maker.h"

namespace dlfs::ctl {

enum class KeyStyle { index, index_name };  // "00000042" | "00000042_class/img.jpg"
enum class ValueStyle { raw, datum };

struct IngestOptions {
  std::string src;   // dataset directory
  std::string dest;  // environment directory (created)
  provenance::FormatOptions format;  // files | fixed (record_size, header_bytes)
  KeyStyle keys = KeyStyle::index;
  ValueStyle values = ValueStyle::raw;
  uint64_t commit_every = 1000;  // 0: one transaction
  bool append = false;
  uint32_t label_bytes = 1;              // fixed + datum: leading label bytes (little-endian), 0..4
  std::array<uint32_t, 3> shape{0, 0, 0};  // fixed + datum: C, H, W (0: 1, 1, data length)
  bool force = false;                    // replace an existing data.mdb
  bool progress = true;                  // progress lines on stderr
};

struct IngestSummary {
  uint64_t records = 0;
  uint64_t value_bytes = 0;
  uint64_t commits = 0;
  double seconds = 0;
  SidecarMade sidecar;
};

Result<IngestSummary> ingest(const IngestOptions& options);

}  // namespace dlfs::ctl
