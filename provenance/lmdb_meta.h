// Reading the validation key of an LMDB data file (data.mdb) without liblmdb:
// the two meta pages at the start of the file, the newer of which describes
// the committed database (LMDBIO section 4.5: the sidecar must be checked
// against the database it is used with).
#pragma once

#include <string>

#include "common/status.h"
#include "provenance/lmdb_types.h"

namespace dlfs::provenance::lmdb {

// The file's data-format magic and the format version liblmdb 0.9.x writes.
inline constexpr uint32_t kMagic = 0xBEEFC0DE;
inline constexpr uint32_t kDataVersion = 1;

// Reads meta pages 0 and 1 with pread and returns the fields of the one with
// the higher txnid (liblmdb's rule; a tie picks page 0). The page size is not
// known before reading: it is taken from meta page 0, which sits at offset 0.
// Errors name path_for_messages: a file too short to hold both meta pages,
// bad magic ("not an LMDB data file"), an unsupported format version, an
// implausible page size.
Result<MetaKey> read_meta_key(int fd, const std::string& path_for_messages);

// Same, opening the file (read-only) first.
Result<MetaKey> read_meta_key(const std::string& data_mdb_path);

// One line for messages: "txnid 7, last page 1234, 100000 entries, depth 3,
// root 55, page size 4096".
std::string describe(const MetaKey& key);

}  // namespace dlfs::provenance::lmdb
