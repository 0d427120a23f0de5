// Linked into every fuzz target, in both builds: fuzz::fail, and seed writing.
//
// With DLFS_FUZZ_WRITE_SEEDS=DIR in the environment, a target writes its
// seeds (fuzz::seeds()) into DIR and exits before fuzzing: that is how
// tools/fuzz.sh gets a seed corpus out of the same binary it then runs.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/fuzz/fuzz_target.h"

namespace dlfs::fuzz {

void fail(std::string_view target, std::string_view what) {
  std::fprintf(stderr, "%.*s: %.*s\n", static_cast<int>(target.size()), target.data(), static_cast<int>(what.size()),
               what.data());
  std::abort();
}

namespace {

int write_seeds(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "cannot create seed directory %s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }
  size_t n = 0;
  for (const Seed& s : seeds()) {
    std::ofstream out(dir + "/" + s.name, std::ios::binary | std::ios::trunc);
    out.write(s.bytes.data(), static_cast<std::streamsize>(s.bytes.size()));
    if (!out) {
      std::fprintf(stderr, "cannot write seed %s/%s\n", dir.c_str(), s.name.c_str());
      return 1;
    }
    ++n;
  }
  std::fprintf(stderr, "wrote %zu seeds to %s\n", n, dir.c_str());
  return 0;
}

}  // namespace
}  // namespace dlfs::fuzz

// libFuzzer calls this once before fuzzing; replay_main.cc does too.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  if (const char* dir = std::getenv("DLFS_FUZZ_WRITE_SEEDS"); dir && *dir) std::exit(dlfs::fuzz::write_seeds(dir));
  return 0;
}
