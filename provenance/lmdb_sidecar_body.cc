// The sidecar's two body forms (lmdb_sidecar_body.h).
#include "provenance/lmdb_sidecar_body.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

namespace dlfs::provenance::lmdb::sidecar_detail {
namespace {

// A body never needs more than this many bytes per record plus a constant:
// provenance: key size + value size (5 each) + rank (10) + a transaction (10);
// explicit: a length run and a residual run per record (two varints each).
constexpr uint64_t kBodyBytesPerRecord = 48;
constexpr uint64_t kBodyFixedBytes = 64;

// ---- provenance form ----

void put_u32s(std::vector<std::byte>& out, const std::vector<uint32_t>& v) {
  put_varint(out, v.size());
  for (uint32_t x : v) put_varint(out, x);
}

void put_u64s(std::vector<std::byte>& out, const std::vector<uint64_t>& v) {
  put_varint(out, v.size());
  for (uint64_t x : v) put_varint(out, x);
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

// ---- explicit form ----

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

}  // namespace

uint64_t max_body_bytes(uint64_t records) {
  uint64_t m = 0;
  if (__builtin_mul_overflow(records, kBodyBytesPerRecord, &m) || __builtin_add_overflow(m, kBodyFixedBytes, &m))
    return UINT64_MAX / 2;  // leaves room for the header in read_sidecar_file's sum
  return m;
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

}  // namespace dlfs::provenance::lmdb::sidecar_detail
