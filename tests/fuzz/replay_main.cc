// main() of a fuzz target in the ordinary (non-libFuzzer) build.
//
//   <target>_fuzz                 runs every seed of fuzz::seeds() once (the unit test)
//   <target>_fuzz FILE|DIR...     runs those inputs (e.g. a finding from tools/fuzz.sh,
//                                 to debug it without sanitizers)
// Exits 0 when every input passed; a failed invariant aborts.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

void run(const std::string& bytes) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

int run_path(const std::filesystem::path& p) {
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(p)) {
    for (const auto& e : std::filesystem::directory_iterator(p))
      if (e.is_regular_file()) files.push_back(e.path());
  } else {
    files.push_back(p);
  }
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", f.c_str());
      return -1;
    }
    run(std::string(std::istreambuf_iterator<char>(in), {}));
  }
  return static_cast<int>(files.size());
}

}  // namespace

int main(int argc, char** argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  if (argc > 1) {
    int total = 0;
    for (int i = 1; i < argc; ++i) {
      int n = run_path(argv[i]);
      if (n < 0) return 1;
      total += n;
    }
    std::printf("%d inputs passed\n", total);
    return 0;
  }
  const auto seeds = dlfs::fuzz::seeds();
  if (seeds.empty()) {
    std::fprintf(stderr, "no seeds\n");
    return 1;
  }
  for (const auto& s : seeds) run(s.bytes);
  std::printf("%zu seeds passed\n", seeds.size());
  return 0;
}
