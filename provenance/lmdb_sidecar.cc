// Encoding and decoding a whole sidecar (lmdb_sidecar.h): the fixed header,
// the optionally compressed body and the checksum trailer. The body forms are
// in lmdb_sidecar_body.cc, the consistency rules in lmdb_sidecar_validate.cc,
// files in lmdb_sidecar_file.cc, the choice of form in lmdb_sidecar_choose.cc.
#include "provenance/lmdb_sidecar.h"

#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "provenance/lmdb_sidecar_body.h"
#include "provenance/lmdb_sidecar_bytes.h"
#include "provenance/lmdb_sidecar_header.h"
#include "provenance/lmdb_sidecar_validate.h"

namespace dlfs::provenance::lmdb {
namespace {

using namespace sidecar_detail;

constexpr int kZstdLevelSmall = 19;  // bodies up to kZstdSmallBody: written once, read often
constexpr int kZstdLevelLarge = 9;   // multi-megabyte bodies (per-record sizes, shuffles): seconds at 19
constexpr size_t kZstdSmallBody = size_t{1} << 20;

// ---- the MetaKey in the header ----

void store_key(std::byte* k, const MetaKey& key) {
  store_le(k + 0, key.page_size, 4);
  store_le(k + 4, key.version, 4);
  store_le(k + 8, key.txnid, 8);
  store_le(k + 16, key.last_pgno, 8);
  store_le(k + 24, key.root, 8);
  store_le(k + 32, key.depth, 4);
  store_le(k + 36, key.flags, 4);
  store_le(k + 40, key.branch_pages, 8);
  store_le(k + 48, key.leaf_pages, 8);
  store_le(k + 56, key.overflow_pages, 8);
  store_le(k + 64, key.entries, 8);
}

MetaKey load_key(const std::byte* k) {
  MetaKey key;
  key.page_size = load_u32(k + 0);
  key.version = load_u32(k + 4);
  key.txnid = load_u64(k + 8);
  key.last_pgno = load_u64(k + 16);
  key.root = load_u64(k + 24);
  key.depth = load_u32(k + 32);
  key.flags = load_u32(k + 36);
  key.branch_pages = load_u64(k + 40);
  key.leaf_pages = load_u64(k + 48);
  key.overflow_pages = load_u64(k + 56);
  key.entries = load_u64(k + 64);
  return key;
}

// ---- encode ----

// `body` compressed into `packed` when that makes it smaller; says whether it did.
bool compress_body(const std::vector<std::byte>& body, std::vector<std::byte>& packed) {
  if (body.empty()) return false;
  packed.resize(ZSTD_compressBound(body.size()));
  int level = body.size() <= kZstdSmallBody ? kZstdLevelSmall : kZstdLevelLarge;
  size_t n = ZSTD_compress(packed.data(), packed.size(), body.data(), body.size(), level);
  // Compression is an optimisation: on failure or no gain, store the body as is.
  if (ZSTD_isError(n) || n >= body.size()) return false;
  packed.resize(n);
  return true;
}

// ---- decode ----

// Everything that does not need the header's fields beyond version and size.
// Order matters: magic and version come before the checksum, so a foreign
// file or a newer format is reported as such rather than as corruption.
Status check_envelope(std::span<const std::byte> bytes, const std::string& name) {
  const std::byte* h = bytes.data();
  const size_t size = bytes.size();
  if (size == 0) return bad(name, "empty file, not a sidecar");
  if (std::memcmp(h, kMagic, std::min(size, sizeof kMagic)) != 0)
    return bad(name, "not a DLFS LMDB sidecar (bad magic)");
  if (size >= kOffVersion + 4) {
    uint32_t version = load_u32(h + kOffVersion);
    if (version == 0) return bad(name, "format version 0 is invalid");
    if (version > kSidecarFormatVersion)
      return Status(ENOTSUP, name + ": format version " + num(version) + " is newer than this dlfsd understands (" +
                                 num(kSidecarFormatVersion) + ")");
  }
  if (size < kHeaderSize + kTrailerSize)
    return bad(name, "truncated: " + num(size) + " bytes, a sidecar has at least " +
                         num(kHeaderSize + kTrailerSize));
  uint64_t file_size = load_u64(h + kOffFileSize);
  if (file_size > size) return bad(name, "truncated: header says " + num(file_size) + " bytes but there are " + num(size));
  if (file_size < size)
    return bad(name, num(size - file_size) + " bytes after the end (header says the file has " + num(file_size) + ")");
  uint64_t stored_sum = load_u64(h + size - kTrailerSize), sum = XXH3_64bits(h, size - kTrailerSize);
  if (stored_sum != sum) return bad(name, "checksum mismatch (stored " + hex(stored_sum) + ", computed " + hex(sum) + ")");
  return Status::ok();
}

// The body as the header describes it: `stored` itself, or its decompression
// into `unpacked` (which the returned span then points into).
Result<std::span<const std::byte>> unpack_body(std::span<const std::byte> stored, bool zstd, uint64_t body_size,
                                               std::vector<std::byte>& unpacked, const std::string& name) {
  if (!zstd) {
    if (stored.size() != body_size)
      return bad(name, "body has " + num(stored.size()) + " bytes but the header says " + num(body_size));
    return stored;
  }
  unpacked.resize(body_size);
  size_t n = ZSTD_decompress(unpacked.data(), unpacked.size(), stored.data(), stored.size());
  if (ZSTD_isError(n)) return bad(name, std::string("body does not decompress: ") + ZSTD_getErrorName(n));
  if (n != body_size) return bad(name, "body decompresses to " + num(n) + " bytes but the header says " + num(body_size));
  return std::span<const std::byte>(unpacked);
}

// The form the flags name, read from the whole body into `s`.
Status decode_body(std::span<const std::byte> body, bool is_explicit, uint64_t records, const std::string& name,
                   Sidecar& s) {
  Reader r(body, name);
  if (is_explicit) {
    DLFS_ASSIGN_OR_RETURN(s.locations, decode_explicit_body(r, records, name));
  } else {
    DLFS_ASSIGN_OR_RETURN(s.provenance, decode_provenance_body(r, records, name));
  }
  if (r.remaining() != 0) return bad(name, num(r.remaining()) + " unread bytes at the end of the body");
  return Status::ok();
}

}  // namespace

std::vector<std::byte> encode_sidecar(const Sidecar& s, const EncodeOptions& options) {
  const bool is_explicit = !s.provenance.has_value();
  std::vector<std::byte> body;
  if (is_explicit) {
    static const Locations kNone;
    encode_explicit_body(s.locations ? *s.locations : kNone, body);
  } else {
    encode_provenance_body(*s.provenance, body);
  }
  uint64_t records = is_explicit ? (s.locations ? s.locations->size() : 0) : s.provenance->records;

  uint32_t flags = is_explicit ? kFlagExplicit : 0;
  std::vector<std::byte> packed;
  if (options.compress && compress_body(body, packed)) flags |= kFlagZstd;
  const std::vector<std::byte>& stored = (flags & kFlagZstd) ? packed : body;

  std::vector<std::byte> out(kHeaderSize + stored.size() + kTrailerSize);
  std::byte* h = out.data();
  std::memcpy(h, kMagic, sizeof kMagic);
  store_le(h + kOffVersion, kSidecarFormatVersion, 4);
  store_le(h + kOffFlags, flags, 4);
  store_le(h + kOffFileSize, out.size(), 8);
  store_le(h + kOffBodySize, body.size(), 8);
  store_le(h + kOffRecords, records, 8);
  store_key(h + kOffKey, s.key);
  if (!stored.empty()) std::memcpy(h + kHeaderSize, stored.data(), stored.size());
  store_le(h + out.size() - kTrailerSize, XXH3_64bits(h, out.size() - kTrailerSize), 8);
  return out;
}

Result<Sidecar> decode_sidecar(std::span<const std::byte> bytes, const std::string& name, const DecodeLimits& limits) {
  DLFS_RETURN_IF_ERROR(check_envelope(bytes, name));
  const std::byte* h = bytes.data();
  uint32_t flags = load_u32(h + kOffFlags);
  if (flags & ~kKnownFlags) return bad(name, "unknown flags " + hex(flags) + " (this dlfsd knows " + hex(kKnownFlags) + ")");
  uint64_t body_size = load_u64(h + kOffBodySize);
  uint64_t records = load_u64(h + kOffRecords);
  Sidecar s;
  s.key = load_key(h + kOffKey);
  // The key bounds `records` (== entries, <= limits) before anything is sized from it.
  auto file_bytes = check_key(s.key, records, limits, name);
  if (!file_bytes) return file_bytes.status();
  uint64_t max_body = max_body_bytes(records);
  if (body_size > max_body)
    return bad(name, "header says the body has " + num(body_size) + " bytes, more than " + num(records) +
                         " records can need (" + num(max_body) + ")");

  std::span<const std::byte> stored = bytes.subspan(kHeaderSize, bytes.size() - kHeaderSize - kTrailerSize);
  std::vector<std::byte> unpacked;
  DLFS_ASSIGN_OR_RETURN(std::span<const std::byte> body,
                        unpack_body(stored, (flags & kFlagZstd) != 0, body_size, unpacked, name));
  DLFS_RETURN_IF_ERROR(decode_body(body, (flags & kFlagExplicit) != 0, records, name, s));
  DLFS_RETURN_IF_ERROR(validate_sidecar(s, name, limits));
  return s;
}

}  // namespace dlfs::provenance::lmdb
