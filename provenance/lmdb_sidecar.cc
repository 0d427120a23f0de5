#include "provenance/lmdb_sidecar.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <utility>

#include "common/unique_fd.h"

namespace dlfs::provenance::lmdb {
namespace {

// ---- the fixed header (docs/lmdb-sidecar.md, "Byte layout") ----

constexpr unsigned char kMagic[8] = {'D', 'L', 'F', 'S', 'L', 'M', 'D', 'B'};
constexpr uint32_t kFlagExplicit = 1u << 0;  // form 2 (else form 1, provenance)
constexpr uint32_t kFlagZstd = 1u << 1;      // the body is zstd-compressed
constexpr uint32_t kKnownFlags = kFlagExplicit | kFlagZstd;

constexpr size_t kOffVersion = 8, kOffFlags = 12, kOffFileSize = 16, kOffBodySize = 24, kOffRecords = 32,
                 kOffKey = 40;
constexpr size_t kKeyBytes = 72;
constexpr size_t kHeaderSize = kOffKey + kKeyBytes;  // 112
constexpr size_t kTrailerSize = 8;                   // xxh3-64 of every byte before it

// A body never needs more than this many bytes per record plus a constant:
// provenance: key size + value size (5 each) + rank (10) + a transaction (10);
// explicit: a length run and a residual run per record (two varints each).
// Checked before the body is allocated, so a corrupt size cannot make us
// allocate more than the record count (itself bounded by DecodeLimits) justifies.
constexpr uint64_t kBodyBytesPerRecord = 48;
constexpr uint64_t kBodyFixedBytes = 64;
uint64_t max_body_bytes(uint64_t records) {
  uint64_t m = 0;
  if (__builtin_mul_overflow(records, kBodyBytesPerRecord, &m) || __builtin_add_overflow(m, kBodyFixedBytes, &m))
    return UINT64_MAX / 2;  // leaves room for the header in read_sidecar_file's sum
  return m;
}

// LMDB facts used by the consistency checks (lmdb-layout.md; mdb.c).
constexpr uint32_t kMinPageSize = 512, kMaxPageSize = 65536;
constexpr uint64_t kMetaPages = 2;
constexpr uint64_t kMaxValueSize = 0xffffffffu;  // MDB_MAXDATASIZE
// A leaf entry costs at least an 8-byte node header plus a 2-byte index slot,
// so a leaf page holds fewer than page_size / 8 entries: a loose bound that
// ties the record count to the size of the database the key describes.
constexpr uint32_t kMinBytesPerEntry = 8;

constexpr int kZstdLevelSmall = 19;  // bodies up to kZstdSmallBody: written once, read often
constexpr int kZstdLevelLarge = 9;   // multi-megabyte bodies (per-record sizes, shuffles): seconds at 19
constexpr size_t kZstdSmallBody = size_t{1} << 20;

Status bad(const std::string& name, const std::string& what) { return Status(EBADMSG, name + ": " + what); }

std::string num(uint64_t v) { return std::to_string(v); }

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
  return buf;
}

uint64_t load_le(const std::byte* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | std::to_integer<uint64_t>(p[i]);
  return v;
}
uint64_t load_u64(const std::byte* p) { return load_le(p, 8); }
uint32_t load_u32(const std::byte* p) { return static_cast<uint32_t>(load_le(p, 4)); }

void store_le(std::byte* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}

// ---- varints (unsigned LEB128) and zigzag ----

void put_varint(std::vector<std::byte>& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<std::byte>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<std::byte>(v));
}

// Offsets are residuals against "right after the previous value", which is
// usually 0 or a small positive jump but negative for a recycled page.
uint64_t zigzag(uint64_t residual) { return (residual << 1) ^ (0 - (residual >> 63)); }
uint64_t unzigzag(uint64_t z) { return (z >> 1) ^ (0 - (z & 1)); }

// Bounds-checked cursor over the (decompressed) body. Every read says what it
// was reading, so a truncated body is reported as "key sizes run past ...".
class Reader {
 public:
  Reader(std::span<const std::byte> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  size_t remaining() const { return bytes_.size() - pos_; }

  Status varint(uint64_t& v, const char* what) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= bytes_.size()) return bad(name_, std::string("truncated: body ends inside ") + what);
      uint64_t b = std::to_integer<uint64_t>(bytes_[pos_++]);
      if (shift == 63 && b > 1) return bad(name_, std::string(what) + ": varint exceeds 64 bits");
      v |= (b & 0x7f) << shift;
      if (!(b & 0x80)) return Status::ok();
    }
    return bad(name_, std::string(what) + ": varint longer than 10 bytes");
  }

  Status varint32(uint32_t& v, const char* what) {
    uint64_t w = 0;
    DLFS_RETURN_IF_ERROR(varint(w, what));
    if (w > UINT32_MAX) return bad(name_, std::string(what) + " " + num(w) + " does not fit 32 bits");
    v = static_cast<uint32_t>(w);
    return Status::ok();
  }

  // A count of varint elements: each takes at least one byte, so a count larger
  // than the bytes left is a corrupt field and must not size an allocation.
  Status element_count(uint64_t count, uint64_t min_bytes_each, const std::string& what) const {
    if (count > remaining() / min_bytes_each)
      return bad(name_, "truncated: body says " + num(count) + " " + what + " but " + num(remaining()) +
                            " bytes remain");
    return Status::ok();
  }

 private:
  std::span<const std::byte> bytes_;
  size_t pos_ = 0;
  const std::string& name_;
};

// ---- body: provenance form ----

void put_u32s(std::vector<std::byte>& out, const std::vector<uint32_t>& v) {
  put_varint(out, v.size());
  for (uint32_t x : v) put_varint(out, x);
}

void put_u64s(std::vector<std::byte>& out, const std::vector<uint64_t>& v) {
  put_varint(out, v.size());
  for (uint64_t x : v) put_varint(out, x);
}

void encode_provenance_body(const Provenance& p, std::vector<std::byte>& out) {
  put_varint(out, p.page_size);
  put_varint(out, p.lmdb_version);
  put_varint(out, p.append ? 1 : 0);
  put_u32s(out, p.key_sizes);
  put_u32s(out, p.value_sizes);
  put_u64s(out, p.key_rank);
  put_u64s(out, p.txn_records);
}

// `allowed` lists the element counts the field may have (checked before the
// bytes-left bound, so a plain mismatch is reported as such).
template <typename T>
Status read_vector(Reader& r, std::vector<T>& v, std::initializer_list<uint64_t> allowed, uint64_t max_count,
                   const std::string& what, const std::string& name) {
  uint64_t count = 0;
  DLFS_RETURN_IF_ERROR(r.varint(count, what.c_str()));
  bool ok = allowed.size() == 0 ? count <= max_count
                                : std::find(allowed.begin(), allowed.end(), count) != allowed.end();
  if (!ok) {
    std::string expect;
    for (uint64_t a : allowed) expect += (expect.empty() ? "" : " or ") + num(a);
    if (expect.empty()) expect = "at most " + num(max_count);
    return bad(name, what + " has " + num(count) + " elements; expected " + expect);
  }
  DLFS_RETURN_IF_ERROR(r.element_count(count, 1, what));
  v.resize(count);
  for (auto& x : v) {
    if constexpr (sizeof(T) == 4) {
      DLFS_RETURN_IF_ERROR(r.varint32(x, what.c_str()));
    } else {
      DLFS_RETURN_IF_ERROR(r.varint(x, what.c_str()));
    }
  }
  return Status::ok();
}

Result<Provenance> decode_provenance_body(Reader& r, uint64_t records, const std::string& name) {
  Provenance p;
  p.records = records;
  uint64_t append = 0;
  DLFS_RETURN_IF_ERROR(r.varint32(p.page_size, "page size"));
  DLFS_RETURN_IF_ERROR(r.varint32(p.lmdb_version, "lmdb version"));
  DLFS_RETURN_IF_ERROR(r.varint(append, "append flag"));
  if (append > 1) return bad(name, "append flag is " + num(append) + ", not 0 or 1");
  p.append = append == 1;
  DLFS_RETURN_IF_ERROR(read_vector(r, p.key_sizes, {1, records}, 0, "key sizes", name));
  DLFS_RETURN_IF_ERROR(read_vector(r, p.value_sizes, {1, records}, 0, "value sizes", name));
  DLFS_RETURN_IF_ERROR(read_vector(r, p.key_rank, {0, records}, 0, "key ranks", name));
  // One element (a commit interval) or one per transaction: at most `records`.
  DLFS_RETURN_IF_ERROR(read_vector(r, p.txn_records, {}, std::max<uint64_t>(records, 1), "transactions", name));
  return p;
}

// ---- body: explicit form ----

// Equal neighbours collapse into (count, value) runs. Lengths are constant for
// fixed-size datasets; residuals are 0 for values back to back in overflow
// pages and repeat the same few jumps (page padding, a leaf page) otherwise.
using Runs = std::vector<std::pair<uint64_t, uint64_t>>;  // (count >= 1, value)

void add_to_runs(Runs& runs, uint64_t value) {
  if (!runs.empty() && runs.back().second == value)
    ++runs.back().first;
  else
    runs.emplace_back(1, value);
}

void put_runs(std::vector<std::byte>& out, const Runs& runs) {
  put_varint(out, runs.size());
  for (const auto& [count, value] : runs) {
    put_varint(out, count);
    put_varint(out, value);
  }
}

void encode_explicit_body(const Locations& locs, std::vector<std::byte>& out) {
  Runs lengths, residuals;
  uint64_t expected = 0;  // right after the previous value (wrapping arithmetic: exact mod 2^64)
  for (const auto& l : locs) {
    add_to_runs(lengths, l.length);
    add_to_runs(residuals, zigzag(l.offset - expected));
    expected = l.offset + l.length;
  }
  put_runs(out, lengths);
  put_runs(out, residuals);
}

Status read_runs(Reader& r, Runs& runs, uint64_t records, const std::string& what, const std::string& name) {
  uint64_t n = 0;
  DLFS_RETURN_IF_ERROR(r.varint(n, (what + " run count").c_str()));
  if (n > records) return bad(name, num(n) + " " + what + " runs for " + num(records) + " records");
  DLFS_RETURN_IF_ERROR(r.element_count(n, 2, what + " runs"));
  runs.resize(n);
  uint64_t covered = 0;
  for (auto& [count, value] : runs) {
    DLFS_RETURN_IF_ERROR(r.varint(count, (what + " run length").c_str()));
    DLFS_RETURN_IF_ERROR(r.varint(value, what.c_str()));
    if (count == 0 || count > records - covered)
      return bad(name, what + " runs cover more than " + num(records) + " records (or a run is empty)");
    covered += count;
  }
  if (covered != records) return bad(name, what + " runs cover " + num(covered) + " of " + num(records) + " records");
  return Status::ok();
}

Result<Locations> decode_explicit_body(Reader& r, uint64_t records, const std::string& name) {
  Runs lengths, residuals;
  DLFS_RETURN_IF_ERROR(read_runs(r, lengths, records, "length", name));
  DLFS_RETURN_IF_ERROR(read_runs(r, residuals, records, "offset residual", name));
  // Both run lists now provably cover `records` (bounded by DecodeLimits): only
  // now is allocating the table justified.
  Locations locs(records);
  size_t i = 0;
  for (const auto& [count, value] : lengths)
    for (uint64_t k = 0; k < count; ++k) locs[i++].length = value;
  i = 0;
  uint64_t expected = 0;
  for (const auto& [count, value] : residuals) {
    uint64_t residual = unzigzag(value);
    for (uint64_t k = 0; k < count; ++k, ++i) {
      locs[i].offset = expected + residual;
      expected = locs[i].offset + locs[i].length;
    }
  }
  return locs;
}

// ---- validation ----

bool power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// The database's size in bytes, for bounds on locations; checks the key first.
Result<uint64_t> check_key(const MetaKey& k, uint64_t records, const DecodeLimits& limits, const std::string& name) {
  if (!power_of_two(k.page_size) || k.page_size < kMinPageSize || k.page_size > kMaxPageSize)
    return bad(name, "meta key: page size " + num(k.page_size) + " is not a power of two between " +
                         num(kMinPageSize) + " and " + num(kMaxPageSize));
  if (k.last_pgno < kMetaPages - 1) return bad(name, "meta key: last page " + num(k.last_pgno) + " is a meta page");
  uint64_t file_pages = 0, file_bytes = 0;
  if (__builtin_add_overflow(k.last_pgno, uint64_t{1}, &file_pages) ||
      __builtin_mul_overflow(file_pages, uint64_t{k.page_size}, &file_bytes))
    return bad(name, "meta key: last page " + num(k.last_pgno) + " puts the file beyond 2^64 bytes");
  uint64_t used = 0;
  if (__builtin_add_overflow(k.branch_pages, k.leaf_pages, &used) ||
      __builtin_add_overflow(used, k.overflow_pages, &used) || used > file_pages - kMetaPages)
    return bad(name, "meta key: branch + leaf + overflow pages exceed the " + num(file_pages - kMetaPages) +
                         " non-meta pages of the file");
  if (k.entries > k.leaf_pages * (k.page_size / kMinBytesPerEntry))  // no overflow: leaf_pages < 2^64 / page_size
    return bad(name, "meta key: " + num(k.entries) + " entries cannot fit in " + num(k.leaf_pages) + " leaf pages");
  if (records != k.entries)
    return bad(name, "sidecar has " + num(records) + " records but the meta key says the database has " +
                         num(k.entries) + " entries");
  if (records > limits.max_records)
    return bad(name, num(records) + " records exceed the limit of " + num(limits.max_records));
  return file_bytes;
}

Status check_provenance(const Provenance& p, const MetaKey& k, const std::string& name) {
  const uint64_t n = p.records;
  if (p.page_size != k.page_size)
    return bad(name, "provenance page size " + num(p.page_size) + " differs from the database's " + num(k.page_size));
  auto one_or_n = [&](size_t size, const char* what) -> Status {
    if (size == 1 || size == n) return Status::ok();
    return bad(name, std::string(what) + " has " + num(size) + " elements; expected 1 or " + num(n));
  };
  DLFS_RETURN_IF_ERROR(one_or_n(p.key_sizes.size(), "key sizes"));
  DLFS_RETURN_IF_ERROR(one_or_n(p.value_sizes.size(), "value sizes"));
  // LMDB rejects empty keys; its largest key is below half a page whatever MDB_MAXKEYSIZE is.
  for (size_t i = 0; i < p.key_sizes.size(); ++i)
    if (p.key_sizes[i] == 0 || p.key_sizes[i] > k.page_size / 2)
      return bad(name, "key size " + num(p.key_sizes[i]) + " (element " + num(i) + ") is not between 1 and " +
                           num(k.page_size / 2));
  if (!p.key_rank.empty()) {
    if (p.key_rank.size() != n)
      return bad(name, "key ranks has " + num(p.key_rank.size()) + " elements; expected 0 or " + num(n));
    // A permutation of 0..n-1: every rank in range and seen once (one bit each).
    std::vector<uint64_t> seen((n + 63) / 64, 0);
    for (size_t i = 0; i < n; ++i) {
      uint64_t r = p.key_rank[i];
      if (r >= n) return bad(name, "key rank " + num(r) + " (record " + num(i) + ") is not below " + num(n));
      uint64_t bit = uint64_t{1} << (r % 64);
      if (seen[r / 64] & bit) return bad(name, "key rank " + num(r) + " appears twice (record " + num(i) + ")");
      seen[r / 64] |= bit;
    }
  }
  const auto& t = p.txn_records;
  if (t.empty()) return bad(name, "no transactions");
  if (t.size() == 1) {
    if (t[0] == 0) return bad(name, "commit interval is 0");
  } else {
    uint64_t sum = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] == 0) return bad(name, "transaction " + num(i) + " has 0 records");
      if (t[i] > n - sum) return bad(name, "transactions hold more than the " + num(n) + " records");
      sum += t[i];
    }
    if (sum != n) return bad(name, "transactions hold " + num(sum) + " of the " + num(n) + " records");
  }
  return Status::ok();
}

Status check_locations(const Locations& locs, uint64_t file_bytes, uint32_t page_size, const std::string& name) {
  const uint64_t first = kMetaPages * page_size;
  for (size_t i = 0; i < locs.size(); ++i) {
    const auto& l = locs[i];
    uint64_t end = 0;
    if (l.offset < first)
      return bad(name, "location " + num(i) + ": offset " + num(l.offset) + " is inside the meta pages (the first " +
                           num(first) + " bytes)");
    if (l.length > kMaxValueSize)
      return bad(name, "location " + num(i) + ": length " + num(l.length) + " exceeds LMDB's largest value");
    if (__builtin_add_overflow(l.offset, l.length, &end) || end > file_bytes)
      return bad(name, "location " + num(i) + ": [" + num(l.offset) + ", +" + num(l.length) +
                           ") runs past the end of the database (" + num(file_bytes) + " bytes)");
  }
  return Status::ok();
}

}  // namespace

Status validate_sidecar(const Sidecar& s, const std::string& name, const DecodeLimits& limits) {
  if (s.provenance.has_value() == s.locations.has_value())
    return bad(name, s.provenance ? "both a provenance and explicit locations" : "neither a provenance nor locations");
  uint64_t records = s.provenance ? s.provenance->records : s.locations->size();
  auto file_bytes = check_key(s.key, records, limits, name);
  if (!file_bytes) return file_bytes.status();
  if (s.provenance) return check_provenance(*s.provenance, s.key, name);
  return check_locations(*s.locations, *file_bytes, s.key.page_size, name);
}

// ---- encode ----

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
  if (options.compress && !body.empty()) {
    packed.resize(ZSTD_compressBound(body.size()));
    int level = body.size() <= kZstdSmallBody ? kZstdLevelSmall : kZstdLevelLarge;
    size_t n = ZSTD_compress(packed.data(), packed.size(), body.data(), body.size(), level);
    // Compression is an optimisation: on failure or no gain, store the body as is.
    if (!ZSTD_isError(n) && n < body.size()) {
      packed.resize(n);
      flags |= kFlagZstd;
    }
  }
  const std::vector<std::byte>& stored = (flags & kFlagZstd) ? packed : body;

  std::vector<std::byte> out(kHeaderSize + stored.size() + kTrailerSize);
  std::byte* h = out.data();
  std::memcpy(h, kMagic, sizeof kMagic);
  store_le(h + kOffVersion, kSidecarFormatVersion, 4);
  store_le(h + kOffFlags, flags, 4);
  store_le(h + kOffFileSize, out.size(), 8);
  store_le(h + kOffBodySize, body.size(), 8);
  store_le(h + kOffRecords, records, 8);
  std::byte* k = h + kOffKey;
  store_le(k + 0, s.key.page_size, 4);
  store_le(k + 4, s.key.version, 4);
  store_le(k + 8, s.key.txnid, 8);
  store_le(k + 16, s.key.last_pgno, 8);
  store_le(k + 24, s.key.root, 8);
  store_le(k + 32, s.key.depth, 4);
  store_le(k + 36, s.key.flags, 4);
  store_le(k + 40, s.key.branch_pages, 8);
  store_le(k + 48, s.key.leaf_pages, 8);
  store_le(k + 56, s.key.overflow_pages, 8);
  store_le(k + 64, s.key.entries, 8);
  if (!stored.empty()) std::memcpy(h + kHeaderSize, stored.data(), stored.size());
  store_le(h + out.size() - kTrailerSize, XXH3_64bits(h, out.size() - kTrailerSize), 8);
  return out;
}

// ---- decode ----

Result<Sidecar> decode_sidecar(std::span<const std::byte> bytes, const std::string& name, const DecodeLimits& limits) {
  const std::byte* h = bytes.data();
  const size_t size = bytes.size();
  // Order matters: magic and version come before the checksum, so a foreign
  // file or a newer format is reported as such rather than as corruption.
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

  uint32_t flags = load_u32(h + kOffFlags);
  if (flags & ~kKnownFlags) return bad(name, "unknown flags " + hex(flags) + " (this dlfsd knows " + hex(kKnownFlags) + ")");
  uint64_t body_size = load_u64(h + kOffBodySize);
  uint64_t records = load_u64(h + kOffRecords);
  Sidecar s;
  const std::byte* k = h + kOffKey;
  s.key.page_size = load_u32(k + 0);
  s.key.version = load_u32(k + 4);
  s.key.txnid = load_u64(k + 8);
  s.key.last_pgno = load_u64(k + 16);
  s.key.root = load_u64(k + 24);
  s.key.depth = load_u32(k + 32);
  s.key.flags = load_u32(k + 36);
  s.key.branch_pages = load_u64(k + 40);
  s.key.leaf_pages = load_u64(k + 48);
  s.key.overflow_pages = load_u64(k + 56);
  s.key.entries = load_u64(k + 64);
  // The key bounds `records` (== entries, <= limits) before anything is sized from it.
  auto file_bytes = check_key(s.key, records, limits, name);
  if (!file_bytes) return file_bytes.status();
  uint64_t max_body = max_body_bytes(records);
  if (body_size > max_body)
    return bad(name, "header says the body has " + num(body_size) + " bytes, more than " + num(records) +
                         " records can need (" + num(max_body) + ")");

  std::span<const std::byte> stored = bytes.subspan(kHeaderSize, size - kHeaderSize - kTrailerSize);
  std::vector<std::byte> unpacked;
  std::span<const std::byte> body = stored;
  if (flags & kFlagZstd) {
    unpacked.resize(body_size);
    size_t n = ZSTD_decompress(unpacked.data(), unpacked.size(), stored.data(), stored.size());
    if (ZSTD_isError(n)) return bad(name, std::string("body does not decompress: ") + ZSTD_getErrorName(n));
    if (n != body_size)
      return bad(name, "body decompresses to " + num(n) + " bytes but the header says " + num(body_size));
    body = unpacked;
  } else if (stored.size() != body_size) {
    return bad(name, "body has " + num(stored.size()) + " bytes but the header says " + num(body_size));
  }

  Reader r(body, name);
  if (flags & kFlagExplicit) {
    auto locs = decode_explicit_body(r, records, name);
    if (!locs) return locs.status();
    s.locations = std::move(*locs);
  } else {
    auto p = decode_provenance_body(r, records, name);
    if (!p) return p.status();
    s.provenance = std::move(*p);
  }
  if (r.remaining() != 0) return bad(name, num(r.remaining()) + " unread bytes at the end of the body");
  DLFS_RETURN_IF_ERROR(validate_sidecar(s, name, limits));
  return s;
}

// ---- choosing a form ----

Provenance canonical(Provenance p) {
  auto collapse = [](std::vector<uint32_t>& v) {
    if (v.size() > 1 && std::all_of(v.begin(), v.end(), [&](uint32_t x) { return x == v[0]; })) v.resize(1);
  };
  collapse(p.key_sizes);
  collapse(p.value_sizes);
  bool identity = true;
  for (size_t i = 0; i < p.key_rank.size() && identity; ++i) identity = p.key_rank[i] == i;
  if (identity) p.key_rank.clear();
  auto& t = p.txn_records;
  if (t.size() > 1) {
    const uint64_t n = t[0];
    bool constant = std::all_of(t.begin(), t.end() - 1, [&](uint64_t x) { return x == n; });
    if (constant && t.back() > 0 && t.back() <= n) t.assign(1, n);
  }
  return p;
}

Sidecar choose_smaller(const MetaKey& key, const std::optional<Provenance>& provenance, bool provenance_exact,
                       const Locations& locations) {
  Sidecar explicit_form{key, std::nullopt, locations};
  if (!provenance || !provenance_exact) return explicit_form;
  Sidecar provenance_form{key, canonical(*provenance), std::nullopt};
  // Ties go to the explicit form: reading it needs no replay at all.
  if (encode_sidecar(provenance_form).size() < encode_sidecar(explicit_form).size()) return provenance_form;
  return explicit_form;
}

// ---- files ----

Result<Sidecar> read_sidecar_file(const std::string& path, const DecodeLimits& limits) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::from_errno(errno, path);
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) return Status::from_errno(errno, path);
  if (!S_ISREG(st.st_mode)) return Status(EINVAL, path + ": not a regular file");
  // The largest file a valid sidecar within `limits` can be: refuse to read more.
  uint64_t max_size = kHeaderSize + kTrailerSize + max_body_bytes(limits.max_records);
  if (static_cast<uint64_t>(st.st_size) > max_size)
    return bad(path, num(st.st_size) + " bytes, larger than any sidecar of at most " + num(limits.max_records) +
                         " records");
  std::vector<std::byte> bytes(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::pread(fd.get(), bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::from_errno(errno, path);
    if (n == 0) break;  // shrank under us: decode reports the truncation
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  return decode_sidecar(bytes, path, limits);
}

namespace {

Status write_all(int fd, const std::vector<std::byte>& bytes, const std::string& what) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::from_errno(errno, what);
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

std::string parent_dir(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Status write_sidecar_file(const std::string& path, const Sidecar& s) {
  DLFS_RETURN_IF_ERROR(validate_sidecar(s, path));
  std::vector<std::byte> bytes = encode_sidecar(s);
  // Same directory, so the rename is atomic: a reader sees the old file or the
  // new one, never a partial write.
  std::string tmp = path + ".tmp.XXXXXX";
  UniqueFd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (!fd.valid()) return Status::from_errno(errno, "cannot create a temporary file for " + path);
  auto fail = [&](Status st) {
    ::unlink(tmp.c_str());
    return st;
  };
  // mkostemp creates 0600; a sidecar is as readable as the database next to it.
  if (::fchmod(fd.get(), 0644) != 0) return fail(Status::from_errno(errno, tmp));
  if (Status st = write_all(fd.get(), bytes, tmp); !st) return fail(st);
  if (::fsync(fd.get()) != 0) return fail(Status::from_errno(errno, tmp + ": fsync"));
  if (::close(fd.release()) != 0) return fail(Status::from_errno(errno, tmp + ": close"));
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail(Status::from_errno(errno, "rename to " + path));
  // Make the rename itself durable.
  std::string dir = parent_dir(path);
  UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dfd.valid() || ::fsync(dfd.get()) != 0) return Status::from_errno(errno, dir + ": fsync after writing " + path);
  return Status::ok();
}

}  // namespace dlfs::provenance::lmdb
