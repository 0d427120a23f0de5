// The LMDB provenance sidecar: a small file next to data.mdb that lets the
// daemon compute every value's offset without walking the B+tree (LMDBIO,
// section 4.4). Byte layout, versioning and error behaviour: docs/lmdb-sidecar.md.
//
// Two forms, exactly one per file:
//  - provenance: how the database was built; the locations come from a replay
//    of liblmdb's allocator (lmdb_replay.h). Tiny for regular builds.
//  - explicit: the locations themselves, residual + run-length + varint coded
//    and zstd-compressed. Exact for any database, no replay needed.
// Both carry the MetaKey of the database they describe, so a stale or foreign
// sidecar is recognised at open.
//
// The decoder treats its input as hostile: every read is length-checked, no
// allocation is sized from a field before that field is bounded by the input
// left and by DecodeLimits, and a decoded Sidecar is internally consistent
// (validate_sidecar) or an error naming the file and what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "provenance/lmdb_types.h"

namespace dlfs::provenance::lmdb {

// The sidecar of `<dir>/data.mdb` is `<dir>/data.mdb.dlfs`.
inline constexpr std::string_view kSidecarSuffix = ".dlfs";
inline constexpr std::string_view kSidecarFileName = "data.mdb.dlfs";

// The format version this code writes and the newest it reads.
inline constexpr uint32_t kSidecarFormatVersion = 1;

struct Sidecar {
  MetaKey key;                            // validation key of the database it was made for
  std::optional<Provenance> provenance;   // form 1: replay input
  std::optional<Locations> locations;     // form 2: explicit, exact for any database
  bool operator==(const Sidecar&) const = default;
};  // exactly one of the two forms is set

// Sane maxima for decoding. The default admits 2^30 records (16 GiB of
// Locations): beyond that the daemon's per-record tables are the problem, not
// the sidecar. Tests and the fuzzer lower it to keep allocations small.
struct DecodeLimits {
  uint64_t max_records = uint64_t{1} << 30;
};

struct EncodeOptions {
  // Compress the body with zstd when that makes it smaller. Off only for
  // fuzzer seeds, which want the body parser reachable without zstd in between.
  bool compress = true;
};

// Precondition: validate_sidecar(s) succeeds (write_sidecar_file checks it).
// An inconsistent Sidecar encodes to bytes that decode_sidecar rejects.
std::vector<std::byte> encode_sidecar(const Sidecar& s, const EncodeOptions& options = {});

// Parses and validates. Errors (EBADMSG; ENOTSUP for a newer format version)
// begin with `name_for_messages` and say what is wrong.
Result<Sidecar> decode_sidecar(std::span<const std::byte> bytes, const std::string& name_for_messages,
                               const DecodeLimits& limits = {});

// The consistency rules decode_sidecar enforces (docs/lmdb-sidecar.md,
// "Validation"): exactly one form, counts match the MetaKey's entries, sizes
// one-or-per-record, key_rank a permutation, txn_records well formed,
// locations inside the file and clear of the meta pages.
Status validate_sidecar(const Sidecar& s, const std::string& name_for_messages,
                        const DecodeLimits& limits = {});

// Reads and decodes a whole file; errors name `path`.
Result<Sidecar> read_sidecar_file(const std::string& path, const DecodeLimits& limits = {});

// Validates, then writes atomically: a temporary file in the same directory,
// fsync, rename over `path`, fsync of the directory. On failure `path` is
// unchanged and the temporary file is removed.
Status write_sidecar_file(const std::string& path, const Sidecar& s);

// The same build described with the fewest elements: sizes that are all equal
// stored once, an identity key_rank dropped, a constant commit interval (every
// transaction n records, the last 1..n) as the single element n. Replays to
// the same locations by the definitions in lmdb_types.h.
Provenance canonical(Provenance p);

// The smaller exact form: the (canonical) provenance if it is given, the
// caller verified that its replay equals `locations` (`provenance_exact`), and
// it encodes strictly smaller than the explicit form; otherwise explicit.
Sidecar choose_smaller(const MetaKey& key, const std::optional<Provenance>& provenance, bool provenance_exact,
                       const Locations& locations);

}  // namespace dlfs::provenance::lmdb
