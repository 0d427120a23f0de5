// The sidecar's body, uncompressed (docs/lmdb-sidecar.md, "Provenance body"
// and "Explicit body"): the two forms to and from varint bytes. Internal to
// the sidecar code (lmdb_sidecar*.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "provenance/lmdb_sidecar_bytes.h"
#include "provenance/lmdb_types.h"

namespace dlfs::provenance::lmdb::sidecar_detail {

// The most bytes a body of `records` records can need (saturating): checked
// before the body is allocated, so a corrupt size cannot make us allocate more
// than the record count (itself bounded by DecodeLimits) justifies.
uint64_t max_body_bytes(uint64_t records);

void encode_provenance_body(const Provenance& p, std::vector<std::byte>& out);
Result<Provenance> decode_provenance_body(Reader& r, uint64_t records, const std::string& name);

void encode_explicit_body(const Locations& locs, std::vector<std::byte>& out);
Result<Locations> decode_explicit_body(Reader& r, uint64_t records, const std::string& name);

}  // namespace dlfs::provenance::lmdb::sidecar_detail
