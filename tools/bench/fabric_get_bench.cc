// fabric_get_bench: the get bandwidth of DLFS's UCX fabric, both ways of
// getting (GetMode rma: ucp_get; am: DLFS's request/reply messages), in one
// run so that the ratio compares like with like. Two fabrics in one process
// (each with its progress thread), as the unit tests do; UCX_TLS chooses the
// transport (over tcp, `rma` is UCX's emulated get).
//
//   UCX_TLS=tcp build/tools/bench/dlfs-bench-fabric-get [--sizes 4K,256K,1M]
//              [--bytes 512M] [--inflight 16] [--repeat 3]
//
// Prints one line per (size, mode) with the best of --repeat runs, then the
// am/rma ratio per size.
#include <CLI/CLI.hpp>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "common/units.h"
#include "transport/fabric.h"

using namespace dlfs;
using namespace dlfs::transport;

namespace {

// MB/s of `total` bytes of gets of `size`, `inflight` at once.
Result<double> measure(Endpoint& ep, const Endpoint::RemoteKey& key, uint64_t base, size_t stripe, size_t size,
                       size_t total, size_t inflight) {
  std::vector<std::byte> dst(size);
  const size_t count = std::max<size_t>(total / size, inflight);
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t done = 0; done < count;) {
    std::vector<Endpoint::PendingGet> gets;
    for (size_t i = 0; i < inflight && done + i < count; ++i)
      gets.push_back(ep.start_get(key, base + (done + i) * size % (stripe - size), size));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (auto& g : gets) DLFS_RETURN_IF_ERROR(ep.finish_get(g, dst, deadline));
    done += gets.size();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return count * size / s / 1e6;
}

Result<double> best_of(GetMode mode, size_t size, size_t total, size_t inflight, int repeat) {
  auto server = Fabric::create({.listen_host = "127.0.0.1", .port = 0, .listen = true, .gets = mode}, [](Message&) {});
  if (!server) return server.status();
  auto client = Fabric::create({.listen_host = "", .port = 0, .listen = false, .gets = mode}, [](Message&) {});
  if (!client) return client.status();
  const size_t stripe = 64 << 20;
  std::vector<std::byte> mem(stripe, std::byte{1});
  DLFS_ASSIGN_OR_RETURN(auto reg, (*server)->register_memory(mem.data(), mem.size()));
  DLFS_ASSIGN_OR_RETURN(auto ep, (*client)->connect_worker((*server)->worker_address(), "server", nullptr));
  DLFS_ASSIGN_OR_RETURN(auto key, ep->unpack(reg->packed_rkey()));
  DLFS_RETURN_IF_ERROR(measure(*ep, *key, reg->address(), stripe, size, total / 10, inflight).status());  // warm-up
  double best = 0;
  for (int r = 0; r < repeat; ++r) {
    DLFS_ASSIGN_OR_RETURN(double mbps, measure(*ep, *key, reg->address(), stripe, size, total, inflight));
    best = std::max(best, mbps);
  }
  key.reset();
  ep.reset();
  reg.reset();
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("DLFS fabric get bandwidth: ucp_get (rma) vs gets by message (am)");
  std::vector<std::string> sizes = {"4K", "256K", "1M"};
  std::string bytes = "256M";
  size_t inflight = 16;
  int repeat = 3;
  app.add_option("--sizes", sizes, "bytes per get (K/M suffixes)")->delimiter(',');
  app.add_option("--bytes", bytes, "bytes moved per measurement");
  app.add_option("--inflight", inflight, "gets in flight at once")->check(CLI::Range(1, 1024));
  app.add_option("--repeat", repeat, "measurements per point (the best is printed)")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);  // as dlfsd (fs/daemon/main.cc): large blocks come from mmap
  auto total = parse_size(bytes);
  if (!total) {
    std::fprintf(stderr, "--bytes: %s\n", total.status().message().c_str());
    return 2;
  }
  const char* tls = std::getenv("UCX_TLS");
  int rc = 0;
  for (const auto& s : sizes) {
    auto size = parse_size(s);
    if (!size || *size == 0 || *size > (32u << 20)) {
      std::fprintf(stderr, "--sizes: '%s' is not a size from 1 byte to 32M\n", s.c_str());
      return 2;
    }
    std::map<std::string, double> mbps;
    for (auto [mode, name] : {std::pair{GetMode::rma, "rma"}, std::pair{GetMode::am, "am"}}) {
      auto r = best_of(mode, *size, *total, inflight, repeat);
      if (!r) {
        std::fprintf(stderr, "size %s, gets %s: %s\n", s.c_str(), name, r.status().message().c_str());
        rc = 1;
        continue;
      }
      mbps[name] = *r;
      std::printf("fabric_get tls=%s size=%zu gets=%s inflight=%zu bandwidth_MBps=%.0f\n", tls ? tls : "all", *size,
                  name, inflight, *r);
    }
    if (mbps.size() == 2) std::printf("fabric_get size=%zu am/rma=%.2f\n", *size, mbps["am"] / mbps["rma"]);
  }
  return rc;
}
