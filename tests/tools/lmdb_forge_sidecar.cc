// Fault injection for the integration scenarios: writes DIR/data.mdb.dlfs, an
// explicit sidecar with the right validation key whose locations are exact
// except for one overflow value, moved one page into its own overflow run
// (as a wrong provenance would misplace it). Spot checks of the first and
// last leaf do not see it; the read-time page-header check must.
//
// Usage: lmdb_forge_sidecar DIR   (prints the index of the misplaced record)
#include <cstdio>
#include <string>

#include "provenance/lmdb_check.h"
#include "provenance/lmdb_meta.h"
#include "provenance/lmdb_sidecar.h"
#include "provenance/lmdb_walk.h"

using namespace dlfs::provenance::lmdb;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR (an LMDB environment with overflow values of 2+ pages)\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  auto key = read_meta_key(dir + "/data.mdb");
  auto locations = walk_locations(dir);
  if (!key || !locations) {
    std::fprintf(stderr, "%s\n", (!key ? key.status() : locations.status()).message().c_str());
    return 1;
  }
  Locations forged = *locations;
  const uint32_t page = key->page_size;
  for (uint64_t i = forged.size() / 3; i < forged.size() * 2 / 3; ++i) {
    if (!is_overflow_location(forged[i], page) || forged[i].length + kPageHeaderBytes <= page) continue;
    forged[i].offset += page;
    Sidecar s{*key, std::nullopt, forged};
    if (auto st = write_sidecar_file(dir + "/" + std::string(kSidecarFileName), s); !st) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      return 1;
    }
    std::printf("%llu\n", static_cast<unsigned long long>(i));
    return 0;
  }
  std::fprintf(stderr, "%s: no overflow value of two or more pages in the middle third\n", dir.c_str());
  return 1;
}
