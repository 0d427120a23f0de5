// Writes a seed corpus for sidecar_fuzz: small valid sidecars of both forms,
// each compressed and not (uncompressed bodies let the mutator reach the body
// parser directly). Deterministic, so a fuzz run from these seeds with a fixed
// -seed is reproducible. Usage: make_seeds <output directory>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <string>

#include "provenance/lmdb_sidecar.h"

using namespace dlfs::provenance::lmdb;

namespace {

constexpr uint32_t kPage = 4096;

MetaKey key_for(uint64_t records, uint64_t last_pgno) {
  MetaKey k;
  k.page_size = kPage;
  k.version = 1;
  k.txnid = 9;
  k.last_pgno = last_pgno;
  k.root = last_pgno - 1;
  k.depth = 2;
  k.leaf_pages = records / 100 + 1;
  k.branch_pages = 1;
  k.overflow_pages = records;
  k.entries = records;
  return k;
}

// Values of `size` bytes back to back in one-page overflow runs, a leaf page
// every 100 values, a recycled page now and then.
Locations layout(uint64_t n, const std::vector<uint32_t>& sizes, uint64_t& last_pgno) {
  Locations out;
  uint64_t next = 3;
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t size = sizes.size() == 1 ? sizes[0] : sizes[i];
    if (i % 100 == 99) ++next;
    uint64_t pages = (15 + uint64_t{size}) / kPage + 1;
    if (i % 37 == 36 && pages == 1) {
      out.push_back({(next / 2) * kPage + 16, size});
      continue;
    }
    out.push_back({next * kPage + 16, size});
    next += pages;
  }
  last_pgno = next + 4;
  return out;
}

void write(const std::string& dir, const std::string& name, const Sidecar& s) {
  if (auto st = validate_sidecar(s, name); !st) {
    std::fprintf(stderr, "make_seeds: %s\n", st.message().c_str());
    std::exit(1);
  }
  for (bool compress : {true, false}) {
    auto bytes = encode_sidecar(s, {.compress = compress});
    std::ofstream(dir + "/" + name + (compress ? "_z" : "_raw") + ".dlfs", std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds <output directory>\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::mt19937_64 rng(7);
  uint64_t last = 0;

  for (uint64_t n : {0u, 1u, 40u}) {
    Provenance p;
    p.page_size = kPage;
    p.lmdb_version = 0x00090018;
    p.records = n;
    p.key_sizes = {8};
    p.value_sizes = {3072};
    p.txn_records = {10};
    layout(n, p.value_sizes, last);
    write(dir, "prov_const_" + std::to_string(n), {key_for(n, std::max<uint64_t>(last, n + 8)), p, std::nullopt});

    if (n < 2) continue;
    p.append = true;
    p.key_sizes.resize(n);
    p.value_sizes.resize(n);
    for (auto& k : p.key_sizes) k = 1 + rng() % 64;
    for (auto& v : p.value_sizes) v = 2100 + rng() % 9000;
    p.key_rank.resize(n);
    std::iota(p.key_rank.begin(), p.key_rank.end(), 0);
    std::shuffle(p.key_rank.begin(), p.key_rank.end(), rng);
    p.txn_records = {7, 13, n - 20};
    write(dir, "prov_var_" + std::to_string(n), {key_for(n, n + 8), p, std::nullopt});

    Locations fixed = layout(n, {3072}, last);
    write(dir, "explicit_const_" + std::to_string(n), {key_for(n, last), std::nullopt, fixed});
    std::vector<uint32_t> sizes(n);
    for (auto& v : sizes) v = 100 + rng() % 20000;
    Locations var = layout(n, sizes, last);
    write(dir, "explicit_var_" + std::to_string(n), {key_for(n, last + n * 5), std::nullopt, var});
  }
  return 0;
}
