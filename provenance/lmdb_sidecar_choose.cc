// Choosing a sidecar's form (lmdb_sidecar.h): the canonical provenance and
// the smaller of the two exact forms.
#include "provenance/lmdb_sidecar.h"

#include <algorithm>

namespace dlfs::provenance::lmdb {

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

}  // namespace dlfs::provenance::lmdb
