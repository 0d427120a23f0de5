// Replaying an insert-only LMDB build (lmdb_replay.h) on the Writer model of
// liblmdb's write path (lmdb_replay_writer.h).
#include "provenance/lmdb_replay.h"

#include <algorithm>
#include <string>

#include "provenance/lmdb_replay_writer.h"

namespace dlfs::provenance::lmdb {
namespace {

using replay_model::kMaxKeySize;
using replay_model::Writer;
std::string version_text(uint32_t v) {
  return std::to_string(v >> 24) + "." + std::to_string((v >> 16) & 0xff) + "." + std::to_string(v & 0xffff);
}

Status validate(const Provenance& p) {
  if (p.page_size != kModeledPageSize) {
    return Status(ENOTSUP, "LMDB replay: page size " + std::to_string(p.page_size) + " is not modeled (only " +
                               std::to_string(kModeledPageSize) + ")");
  }
  if (p.lmdb_version < kOldestModeled || p.lmdb_version > kNewestModeled) {
    return Status(ENOTSUP, "LMDB replay: liblmdb version " +
                               (p.lmdb_version ? version_text(p.lmdb_version) : std::string("(not recorded)")) +
                               " is not modeled (supported: " + version_text(kOldestModeled) + " to " +
                               version_text(kNewestModeled) + ")");
  }
  const uint64_t n = p.records;
  auto check_sizes = [n](const std::vector<uint32_t>& v, const char* what) -> Status {
    if (n == 0 && v.empty()) return Status::ok();
    if (v.size() != 1 && v.size() != n) {
      return Status(EINVAL, std::string("LMDB replay: ") + what + " has " + std::to_string(v.size()) +
                                " entries; expected 1 or " + std::to_string(n));
    }
    return Status::ok();
  };
  DLFS_RETURN_IF_ERROR(check_sizes(p.key_sizes, "key_sizes"));
  DLFS_RETURN_IF_ERROR(check_sizes(p.value_sizes, "value_sizes"));
  for (uint32_t k : p.key_sizes) {
    if (k == 0 || k > kMaxKeySize) {
      return Status(EINVAL, "LMDB replay: key size " + std::to_string(k) + " is outside liblmdb's 1.." +
                                std::to_string(kMaxKeySize));
    }
  }
  if (!p.key_rank.empty()) {
    if (p.key_rank.size() != n) {
      return Status(EINVAL, "LMDB replay: key_rank has " + std::to_string(p.key_rank.size()) + " entries; expected " +
                                std::to_string(n));
    }
    std::vector<bool> seen(n, false);
    for (uint64_t r : p.key_rank) {
      if (r >= n || seen[r]) {
        return Status(EINVAL, "LMDB replay: key_rank is not a permutation of 0.." + std::to_string(n - 1) +
                                  " (rank " + std::to_string(r) + ")");
      }
      seen[r] = true;
    }
    if (p.append) {
      for (uint64_t i = 0; i < n; ++i) {
        if (p.key_rank[i] != i) {
          return Status(EINVAL, "LMDB replay: MDB_APPEND requires insertion in key order, but record " +
                                    std::to_string(i) + " has key rank " + std::to_string(p.key_rank[i]));
        }
      }
    }
  }
  if (p.txn_records.empty()) return Status(EINVAL, "LMDB replay: txn_records is empty");
  if (p.txn_records.size() == 1) {
    if (p.txn_records[0] == 0) return Status(EINVAL, "LMDB replay: a commit every 0 records");
  } else {
    uint64_t sum = 0;
    for (uint64_t t : p.txn_records) sum += t;
    if (sum != n) {
      return Status(EINVAL, "LMDB replay: transactions hold " + std::to_string(sum) + " records in total; expected " +
                                std::to_string(n));
    }
  }
  return Status::ok();
}

}  // namespace

Result<ReplayResult> replay(const Provenance& p) {
  DLFS_RETURN_IF_ERROR(validate(p));
  Writer w(p.page_size);
  const uint64_t n = p.records;
  const bool one_ksize = p.key_sizes.size() == 1, one_vsize = p.value_sizes.size() == 1;
  const bool sorted = p.key_rank.empty();
  uint64_t i = 0;
  auto run_txn = [&](uint64_t count) -> Status {
    w.begin();
    for (uint64_t end = i + count; i < end; ++i) {
      uint64_t rank = sorted ? i : p.key_rank[i];
      uint16_t ks = static_cast<uint16_t>(one_ksize ? p.key_sizes[0] : p.key_sizes[i]);
      uint32_t vs = one_vsize ? p.value_sizes[0] : p.value_sizes[i];
      DLFS_RETURN_IF_ERROR(w.put_main(rank, ks, vs, p.append));
    }
    return w.commit();
  };
  if (p.txn_records.size() == 1) {
    const uint64_t every = p.txn_records[0];
    while (i < n) DLFS_RETURN_IF_ERROR(run_txn(std::min(every, n - i)));
  } else {
    for (uint64_t t : p.txn_records) DLFS_RETURN_IF_ERROR(run_txn(t));
  }
  ReplayResult r;
  DLFS_RETURN_IF_ERROR(w.locations(&r.locations));
  r.meta = w.meta();
  return r;
}

Result<Locations> replay_locations(const Provenance& p) {
  auto r = replay(p);
  if (!r) return r.status();
  return std::move(r->locations);
}

}  // namespace dlfs::provenance::lmdb
