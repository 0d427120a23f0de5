// Checking computed value locations against data.mdb itself, cheaply
// (LMDBIO section 4.5; ../shared/notes/lmdb-layout.md, "What that means for a
// sidecar"): a matching validation key proves the sidecar was made for this
// database state, not that its provenance was right (a commit interval off by
// one passes the meta check and misplaces a fraction of the records). So:
//
//  - spot_check: descends the B+tree from the root to some leaf pages (the
//    first, the last, and random ones) with pread, and requires every node of
//    those leaves to be where the locations say: a leaf's nodes are
//    consecutive keys, so they must be consecutive entries of the key-ordered
//    locations, with the same lengths; an overflow value's page header must
//    name its own page, the overflow flag and the right page count.
//  - check_overflow_header: the 16 bytes before an overflow value (same page)
//    are its page header; a free check on every read of such a value.
//
// Page layout read here (liblmdb 0.9, little-endian, 64-bit page numbers): a
// 16-byte header (page number, pad, flags, lower/upper bounds or the overflow
// page count), an array of 2-byte node offsets, nodes of an 8-byte header
// (data size or child page, flags, key size) then the key, then the data or,
// for F_BIGDATA, the 8-byte number of the first overflow page.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "provenance/lmdb_types.h"

namespace dlfs::provenance::lmdb {

// True when a value of `length` bytes lives in overflow pages: liblmdb moves
// a node's data out of the leaf when 8 + key + data exceeds the node limit.
// Only the location tells it without the key size: an overflow value starts
// 16 bytes into a page.
inline bool is_overflow_location(const ValueLocation& v, uint32_t page_size) {
  return page_size != 0 && v.offset % page_size == kPageHeaderBytes;
}

// The page header before an overflow value: its own page number, P_OVERFLOW,
// and enough pages for `length`. OK or EBADMSG naming what differs.
Status check_overflow_header(std::span<const std::byte, 16> header, const ValueLocation& value, uint32_t page_size);

struct SpotCheckOptions {
  unsigned random_leaves = 32;  // besides the first and the last leaf
  uint64_t seed = 1;
  // Records (key order) checked where the locations put them: an overflow
  // value's page header, or the whole leaf page holding an in-leaf value.
  // open_layout passes the first record of some transactions of a
  // provenance, where a wrong commit boundary shows first.
  std::vector<uint64_t> records;
};

struct SpotCheckReport {
  uint64_t pages_read = 0;
  uint64_t leaves = 0;
  uint64_t records = 0;           // leaf nodes compared with the locations
  uint64_t overflow_headers = 0;  // overflow page headers compared
};

// Reads pages of `fd` (data.mdb, described by `key`) and compares them with
// `locations` (key order). EBADMSG with the first mismatch ("record 1234:
// the leaf at page 77 has it at offset X, the locations say Y") when they
// disagree; EIO when the file cannot be read. `name` is used in messages.
Status spot_check(int fd, const std::string& name, const MetaKey& key, const Locations& locations,
                  const SpotCheckOptions& options = {}, SpotCheckReport* report = nullptr);

}  // namespace dlfs::provenance::lmdb
