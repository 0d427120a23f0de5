// libFuzzer target for the LMDB sidecar decoder (tools/fuzz-sidecar.sh builds
// and runs it). Each input is decoded twice: as is, which mostly exercises the
// magic, version, size and checksum checks, and with its trailing checksum
// recomputed, so mutations reach the body parser and the consistency checks
// instead of dying at the checksum. Whatever decodes must re-encode to bytes
// that decode to the same sidecar, compressed or not.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include <xxhash.h>

#include "provenance/lmdb_sidecar.h"

namespace {

using dlfs::provenance::lmdb::decode_sidecar;
using dlfs::provenance::lmdb::DecodeLimits;
using dlfs::provenance::lmdb::encode_sidecar;
using dlfs::provenance::lmdb::Sidecar;

const std::string kName = "fuzz.dlfs";
// Small enough that the largest allowed table (and body) stays far below
// libFuzzer's memory limit, large enough for every code path.
constexpr DecodeLimits kLimits{.max_records = 1u << 16};

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "sidecar_fuzz: %s\n", what);
  std::abort();
}

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
    if (!again.is_ok()) fail(("re-encoded sidecar does not decode: " + again.status().message()).c_str());
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
