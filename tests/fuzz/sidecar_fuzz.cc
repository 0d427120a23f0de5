// Fuzz target: the LMDB sidecar decoder (provenance/lmdb_sidecar*.cc;
// `tools/fuzz.sh sidecar`). Each input is decoded twice: as is, which mostly
// exercises the magic, version, size and checksum checks, and with its trailing checksum
// recomputed, so mutations reach the body parser and the consistency checks
// instead of dying at the checksum. Whatever decodes must re-encode to bytes
// that decode to the same sidecar, compressed or not.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <xxhash.h>

#include "provenance/lmdb_sidecar.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using dlfs::provenance::lmdb::decode_sidecar;
using dlfs::provenance::lmdb::DecodeLimits;
using dlfs::provenance::lmdb::encode_sidecar;
using dlfs::provenance::lmdb::Sidecar;

const std::string kName = "fuzz.dlfs";
// Small enough that the largest allowed table (and body) stays far below
// libFuzzer's memory limit, large enough for every code path.
constexpr DecodeLimits kLimits{.max_records = 1u << 16};

[[noreturn]] void fail(const std::string& what) { dlfs::fuzz::fail("sidecar_fuzz", what); }

void check(std::span<const std::byte> in) {
  auto r = decode_sidecar(in, kName, kLimits);
  if (!r.is_ok()) {
    // Errors must name the file (docs/lmdb-sidecar.md, "Errors").
    if (r.status().message().rfind(kName + ": ", 0) != 0) fail("error message does not start with the file name");
    return;
  }
  for (bool compress : {true, false}) {
    auto bytes = encode_sidecar(*r, {.compress = compress});
    auto again = decode_sidecar(bytes, kName, kLimits);
    if (!again.is_ok()) fail("re-encoded sidecar does not decode: " + again.status().message());
    if (!(*again == *r)) fail("decode(encode(x)) != x");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  check(in);
  if (size >= 8) {
    std::vector<std::byte> fixed(in.begin(), in.end());
    uint64_t sum = XXH3_64bits(fixed.data(), size - 8);
    for (int i = 0; i < 8; ++i) fixed[size - 8 + i] = static_cast<std::byte>(sum >> (8 * i));
    check(fixed);
  }
  return 0;
}

// The seed corpus.
namespace {

using namespace dlfs::provenance::lmdb;

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

// Both encodings of a sidecar that must be valid (a seed that does not decode
// would only test the error path).
void add(std::vector<dlfs::fuzz::Seed>& out, const std::string& name, const Sidecar& s) {
  if (auto st = validate_sidecar(s, name); !st) fail("seed " + name + " is not valid: " + st.message());
  for (bool compress : {true, false}) {
    auto bytes = encode_sidecar(s, {.compress = compress});
    out.push_back({name + (compress ? "_z" : "_raw") + ".dlfs",
                   std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size())});
  }
}

}  // namespace

// Small valid sidecars of both forms, each compressed and not (uncompressed
// bodies let the mutator reach the body parser directly).
std::vector<dlfs::fuzz::Seed> dlfs::fuzz::seeds() {
  using namespace dlfs::provenance::lmdb;
  std::vector<Seed> out;
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
    add(out, "prov_const_" + std::to_string(n), {key_for(n, std::max<uint64_t>(last, n + 8)), p, std::nullopt});

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
    add(out, "prov_var_" + std::to_string(n), {key_for(n, n + 8), p, std::nullopt});

    Locations fixed = layout(n, {3072}, last);
    add(out, "explicit_const_" + std::to_string(n), {key_for(n, last), std::nullopt, fixed});
    std::vector<uint32_t> sizes(n);
    for (auto& v : sizes) v = 100 + rng() % 20000;
    Locations var = layout(n, sizes, last);
    add(out, "explicit_var_" + std::to_string(n), {key_for(n, last + n * 5), std::nullopt, var});
  }
  return out;
}
