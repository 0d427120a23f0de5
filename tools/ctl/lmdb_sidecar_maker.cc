#include "tools/ctl/lmdb_sidecar_maker.h"

#include <lmdb.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>

#include "provenance/lmdb_meta.h"
#include "provenance/lmdb_replay.h"
#include "provenance/lmdb_sidecar.h"
#include "provenance/lmdb_walk.h"

namespace dlfs::ctl {

namespace lm = provenance::lmdb;

std::vector<uint64_t> candidate_intervals(uint64_t records, uint64_t txns) {
  std::vector<uint64_t> out;
  if (records == 0 || txns == 0 || txns > records) return out;
  if (txns == 1) return {records};  // a single transaction
  // ceil(n / c) == k  <=>  n / k <= c < n / (k - 1)
  const uint64_t lo = (records + txns - 1) / txns;
  const uint64_t hi = (records - 1) / (txns - 1);
  if (lo > hi) return out;
  out.push_back(lo);
  for (uint64_t round : {10ull, 100ull, 1000ull, 10000ull}) {
    uint64_t c = (lo + round - 1) / round * round;
    if (c <= hi) out.push_back(c);
  }
  out.push_back(hi);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {

uint32_t running_lmdb_version() {
  int maj = 0, min = 0, patch = 0;
  mdb_version(&maj, &min, &patch);
  return lm::kVersionFull(static_cast<uint32_t>(maj), static_cast<uint32_t>(min), static_cast<uint32_t>(patch));
}

// For the report: which build the stored provenance describes.
std::string describe_build(const lm::Provenance& p) {
  std::string s = p.key_rank.empty() ? "keys put in order" : "keys put out of order";
  if (p.txn_records.size() == 1)
    s += p.txn_records[0] >= p.records ? ", one transaction"
         : p.txn_records[0] == 1       ? ", a commit after every record"
                                       : ", a commit every " + std::to_string(p.txn_records[0]) + " records";
  else
    s += ", " + std::to_string(p.txn_records.size()) + " transactions of varying size";
  if (p.append) s += ", MDB_APPEND";
  return s;
}

bool reproduces(const lm::Provenance& p, const lm::MetaKey& key, const lm::Locations& walked) {
  auto r = lm::replay(p);
  return r && r->meta == key && r->locations == walked;
}

}  // namespace

Result<SidecarMade> make_sidecar(const SidecarRequest& req) {
  const auto t0 = std::chrono::steady_clock::now();
  SidecarMade made;
  made.path = req.dir + "/" + std::string(lm::kSidecarFileName);
  struct stat st{};
  if (!req.force && ::stat(made.path.c_str(), &st) == 0)
    return Status(EEXIST, made.path + " exists (use --force to replace it)");
  auto key = lm::read_meta_key(req.dir + "/data.mdb");
  if (!key) return key.status();
  std::vector<uint32_t> key_sizes;
  auto walked = lm::walk_locations(req.dir, &key_sizes);
  if (!walked) return walked.status();
  made.records = walked->size();
  made.walk_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::optional<lm::Provenance> exact;
  if (req.known) {
    ++made.candidates_tried;
    if (reproduces(*req.known, *key, *walked)) exact = req.known;
  } else if (!req.explicit_only && !walked->empty()) {
    lm::Provenance base;
    base.page_size = key->page_size;
    base.lmdb_version = running_lmdb_version();
    base.records = walked->size();
    base.key_sizes = std::move(key_sizes);
    base.value_sizes.reserve(walked->size());
    for (const auto& v : *walked) base.value_sizes.push_back(static_cast<uint32_t>(v.length));
    base = lm::canonical(std::move(base));
    // A fresh environment's txnid counts its write transactions.
    for (uint64_t c : candidate_intervals(base.records, key->txnid)) {
      for (bool append : {false, true}) {
        lm::Provenance p = base;
        p.append = append;
        p.txn_records = {c};
        ++made.candidates_tried;
        if (reproduces(p, *key, *walked)) {
          exact = std::move(p);
          break;
        }
      }
      if (exact) break;
    }
  }
  std::optional<lm::Provenance> canon;
  if (exact) canon = lm::canonical(*exact);
  lm::Sidecar s = lm::choose_smaller(*key, canon, exact.has_value(), *walked);
  DLFS_RETURN_IF_ERROR(lm::write_sidecar_file(made.path, s));
  made.provenance_form = s.provenance.has_value();
  if (made.provenance_form) made.build = describe_build(*s.provenance);
  if (::stat(made.path.c_str(), &st) == 0) made.bytes = static_cast<uint64_t>(st.st_size);
  made.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return made;
}

}  // namespace dlfs::ctl
