// FormatOptions: what a dataset's format is told, the format-related keys of
// a [[dataset]] (a key list: common/key_list.h). Each format declares the
// options it reads (DatasetFormat::options(), provenance/dataset_format.h);
// the others must stay at their defaults, which check_format_options() checks
// for every format in one place.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/enum_names.h"
#include "common/key_list.h"

namespace dlfs::provenance {

// Which files make one sample (provenance/sample_groups.h).
enum class GroupRule {
  none,       // a file a sample
  first_dot,  // key: the path up to the first dot of the basename (WebDataset)
  last_dot,   // key: the path up to the last dot of the basename
};
constexpr std::array<std::string_view, 3> enum_names(GroupRule) { return {"none", "first-dot", "last-dot"}; }

// `format`'s help and choices come from the registry (dataset_formats.cc).
// lmdb_spot_checks: besides the first and the last leaf (lmdb_check.h); reads
// check overflow headers whatever it is.
#define DLFS_FORMAT_KEYS(KEY)                                                                                     \
  KEY(format, std::string, "files", "--format", provenance::dataset_format_help(),                                \
      .choices(provenance::dataset_format_names()))                                                               \
  KEY(record_size, uint64_t, 0, "--record-size", "Bytes per record, e.g. 3073", .bytes())                         \
  KEY(header_bytes, uint64_t, 0, "--header-bytes", "Bytes to skip at the start of every file", .bytes())          \
  KEY(group_by, GroupRule, GroupRule::none, "--group-by",                                                         \
      "Consecutive files (tar members) with one key are one sample (first-dot: the WebDataset key, n0153/x of "   \
      "n0153/x.jpg and n0153/x.cls; tar: first-dot unless last-dot)")                                                              \
  KEY(lmdb_spot_checks, uint32_t, 32, "", "Random leaf pages compared with the sidecar's locations at open",      \
      .range(0, 1000000))                                                                                         \
  KEY(tfrecord_skip_bad_files, bool, false, "",                                                                   \
      "A TFRecord file with a bad length CRC or a truncated record is left out of the samples (logged with file " \
      "and offset; still in raw/) instead of failing the load")

struct FormatOptions {
  DLFS_FORMAT_KEYS(DLFS_KEY_MEMBER)
};

}  // namespace dlfs::provenance
