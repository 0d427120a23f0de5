// One pass over the headers of a tar shard (WebDataset): where each regular
// member's data is, under its full name. Headers are read with pread, never
// the data: a shard costs one 512-byte read per header.
//
// Handled: ustar (name + prefix), GNU (magic "ustar  ", base-256 sizes, 'L'
// long names, 'K' long link names), pax ('x' records path= and size= for the
// next member; 'g' global records are ignored), v7 headers. Regular members
// are typeflags '0', '\0' and '7' (unless the name ends in '/', as old
// writers mark directories); directories, links and devices are skipped
// (a hard link has no data of its own); GNU sparse members ('S') are refused,
// their data is not one contiguous range. The archive ends at its first zero
// block.
//
// Refused, with the shard and the byte offset of the header in the error: a
// checksum that does not match, a size field that is not a number, a member
// whose data runs past the end of the file, a malformed pax record, an unsafe
// name (absolute or with a ".." component), and a shard that ends without the
// end-of-archive zero block (a truncated copy).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace dlfs::provenance {

struct TarShardMember {
  std::string name;            // pax path= or GNU long name if any; "./" prefixes removed
  uint64_t header_offset = 0;  // its first header block (pax or long-name records included)
  uint64_t data_offset = 0;
  uint64_t size = 0;
};

struct TarShardFacts {
  uint64_t members = 0;     // regular members
  uint64_t skipped = 0;     // other entries (directories, links, ...)
  uint64_t end_offset = 0;  // the end-of-archive zero block
};

// Whether a tree's file is a shard of format tar: its name ends in ".tar".
inline bool is_tar_shard_name(std::string_view basename) {
  return basename.size() > 4 && basename.ends_with(".tar");
}

// Scans the shard open as `fd` (`size` bytes; `label` names it in errors) and
// calls on_member for each regular member in archive order.
Result<TarShardFacts> scan_tar_shard(int fd, uint64_t size, const std::string& label,
                                     const std::function<void(TarShardMember&&)>& on_member);

}  // namespace dlfs::provenance
