// loader_bench: measures how fast the Loader fills a StorageBuffer from a
// dataset directory (scan, then load, optionally verify).
//
//   loader_bench generate DIR TOTAL FILE_SIZE   # e.g. /tmp/ds 2GiB 256KiB
//   loader_bench load DIR [threads=4] [extent=8MiB] [read_size=8MiB] [verify] [anon]
//
// anon: anonymous memory instead of the sealed memfd clients map
// (cache/shared_memory.h), to compare the two.
//
// For a cold-cache figure, drop the page cache between runs
// (sync; echo 3 > /proc/sys/vm/drop_caches).
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "cache/loader.h"
#include "cache/verifier.h"
#include "common/units.h"
#include "provenance/manifest.h"

namespace {

using dlfs::format_rate;
using dlfs::format_size;
using dlfs::parse_size;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int usage() {
  std::fprintf(stderr,
               "usage: loader_bench generate DIR TOTAL FILE_SIZE\n"
               "       loader_bench load DIR [threads] [extent] [read_size] [verify] [anon]\n");
  return 2;
}

// 16 directories of files named by number; random content so nothing along
// the way (compression, dedup) makes the load look faster than it is.
int generate(const std::string& dir, uint64_t total, uint64_t file_size) {
  if (file_size == 0) return usage();
  std::mt19937_64 rng(1);
  std::vector<uint64_t> buf((file_size + 7) / 8);
  uint64_t files = (total + file_size - 1) / file_size;
  for (uint64_t i = 0; i < files; ++i) {
    std::string sub = dir + "/d" + std::to_string(i % 16);
    std::filesystem::create_directories(sub);
    for (auto& w : buf) w = rng();
    std::string path = sub + "/f" + std::to_string(i) + ".bin";
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || ::write(fd, buf.data(), file_size) != static_cast<ssize_t>(file_size)) {
      std::fprintf(stderr, "cannot write %s: %s\n", path.c_str(), std::strerror(errno));
      return 1;
    }
    ::close(fd);
  }
  std::printf("generated %llu files of %s in %s\n", static_cast<unsigned long long>(files),
              format_size(file_size).c_str(), dir.c_str());
  return 0;
}

int load(const std::string& dir, unsigned threads, uint64_t extent, uint64_t read_size, bool verify, bool shared) {
  double t0 = now_s();
  auto manifest = dlfs::provenance::Manifest::build(dir, {});
  if (!manifest) {
    std::fprintf(stderr, "%s\n", manifest.status().message().c_str());
    return 1;
  }
  double scan_s = now_s() - t0;
  auto backend = dlfs::cache::BackendReader::open(*manifest);
  if (!backend) {
    std::fprintf(stderr, "%s\n", backend.status().message().c_str());
    return 1;
  }
  dlfs::cache::StorageOptions so;
  so.extent_size = extent;
  so.shared = shared;
  auto buffer = dlfs::cache::StorageBuffer::create(0, manifest->total_bytes(), so);
  if (!buffer) {
    std::fprintf(stderr, "%s\n", buffer.status().message().c_str());
    return 1;
  }
  dlfs::cache::Loader loader(**buffer, **backend,
                             {.threads = threads, .read_size = read_size, .log_interval_s = 1, .label = "bench"});
  loader.start();
  loader.wait();
  auto p = loader.progress();
  std::printf("memory=%s files=%u bytes=%s scan=%.2fs threads=%u extent=%s read_size=%s load=%.2fs rate=%s failed=%llu\n",
              shared ? "memfd" : "anonymous", manifest->file_count(), format_size(p.bytes_total).c_str(), scan_s, threads,
              format_size(extent).c_str(), format_size(read_size).c_str(), p.elapsed_s,
              format_rate(p.rate_bps).c_str(), static_cast<unsigned long long>(p.extents_failed));
  if (verify) {
    auto r = dlfs::cache::verify_buffer(**buffer, **backend);
    std::printf("verify: %s, %llu extents, %s in %.2fs\n", r.ok() ? "ok" : "MISMATCH",
                static_cast<unsigned long long>(r.extents_checked), format_size(r.bytes_checked).c_str(),
                r.seconds);
    if (!r.ok()) return 1;
  }
  return p.extents_failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() == 4 && a[0] == "generate") {
    auto total = parse_size(a[2]);
    auto fsize = parse_size(a[3]);
    if (!total || !fsize) return usage();
    return generate(a[1], *total, *fsize);
  }
  if (a.size() >= 2 && a[0] == "load") {
    unsigned threads = a.size() > 2 ? static_cast<unsigned>(std::stoul(a[2])) : 4;
    auto extent = parse_size(a.size() > 3 ? a[3] : "8MiB");
    auto read_size = parse_size(a.size() > 4 ? a[4] : "8MiB");
    bool verify = false, shared = true;
    for (size_t i = 5; i < a.size(); ++i) {
      if (a[i] == "verify") verify = true;
      else if (a[i] == "anon") shared = false;
      else return usage();
    }
    if (!extent || !read_size || threads == 0) return usage();
    return load(a[1], threads, *extent, *read_size, verify, shared);
  }
  return usage();
}
