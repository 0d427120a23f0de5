// The sidecar's consistency rules (lmdb_sidecar_validate.h): the MetaKey, the
// provenance form and the explicit locations.
#include "provenance/lmdb_sidecar_validate.h"

#include <vector>

#include "provenance/lmdb_sidecar_bytes.h"

namespace dlfs::provenance::lmdb {
namespace sidecar_detail {
namespace {

// LMDB facts used by the consistency checks (lmdb-layout.md; mdb.c).
constexpr uint32_t kMinPageSize = 512, kMaxPageSize = 65536;
constexpr uint64_t kMetaPages = 2;
constexpr uint64_t kMaxValueSize = 0xffffffffu;  // MDB_MAXDATASIZE
// A leaf entry costs at least an 8-byte node header plus a 2-byte index slot,
// so a leaf page holds fewer than page_size / 8 entries: a loose bound that
// ties the record count to the size of the database the key describes.
constexpr uint32_t kMinBytesPerEntry = 8;

bool power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace

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

namespace {

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
}  // namespace sidecar_detail

Status validate_sidecar(const Sidecar& s, const std::string& name, const DecodeLimits& limits) {
  using namespace sidecar_detail;
  if (s.provenance.has_value() == s.locations.has_value())
    return bad(name, s.provenance ? "both a provenance and explicit locations" : "neither a provenance nor locations");
  uint64_t records = s.provenance ? s.provenance->records : s.locations->size();
  auto file_bytes = check_key(s.key, records, limits, name);
  if (!file_bytes) return file_bytes.status();
  if (s.provenance) return check_provenance(*s.provenance, s.key, name);
  return check_locations(*s.locations, *file_bytes, s.key.page_size, name);
}

}  // namespace dlfs::provenance::lmdb
