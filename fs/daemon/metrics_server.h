// MetricsServer: dlfsd's Prometheus endpoint (metrics_address,
// docs/metrics.md), an embedded CivetWeb HTTP server set up defensively:
//
//   - it listens on the one address configured (loopback unless told
//     otherwise) and serves no files (no document root);
//   - two worker threads, never more, whose signals are blocked (signals go
//     to dlfsd's own threads);
//   - a request must arrive whole within kRequestTimeoutMs (a client that
//     sends half a request and waits is dropped then) and its header within
//     kMaxRequestBytes (a larger one is answered 400 or 413 and closed);
//     no keep-alive: one request per connection;
//   - GET and HEAD of /metrics (the exposition), of / (a link to it); any
//     other path is 404, any other method 405 (with Allow).
//
// The exposition comes from `render`, called on a worker thread per scrape:
// it must not wait on the FUSE threads (Daemon builds it from the stats
// snapshot, fs/daemon/metrics.h). A render that throws is answered 500.
//
// start() fails, naming metrics_address, when the address cannot be
// resolved or bound (taken, not this host's): dlfsd then does not start.
// CivetWeb sets SIGPIPE to be ignored, process-wide, when it starts.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "fs/config/config.h"

struct mg_context;
struct mg_connection;

namespace dlfs::fs {

class MetricsServer {
 public:
  static constexpr int kThreads = 2;
  static constexpr int kRequestTimeoutMs = 5000;
  static constexpr int kMaxRequestBytes = 16384;

  using Render = std::function<std::string()>;
  static Result<std::unique_ptr<MetricsServer>> start(const ListenAddress& address, Render render);
  ~MetricsServer();  // stop()
  // Stops listening and waits for the requests in flight; stats() stay
  // readable. From the thread that started it.
  void stop();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // What it listens on, numeric ("127.0.0.1:9567", "[::1]:9567").
  const std::string& address() const { return address_; }
  uint64_t scrapes() const { return scrapes_.load(std::memory_order_relaxed); }
  // {"address", "url", "scrapes", "refused"} for status and stats.
  nlohmann::json stats() const;

 private:
  MetricsServer(std::string address, Render render) : address_(std::move(address)), render_(std::move(render)) {}
  static int on_request(mg_connection* conn);
  int serve(mg_connection* conn);

  std::string address_;
  Render render_;
  mg_context* ctx_ = nullptr;
  std::atomic<uint64_t> scrapes_{0};
  std::atomic<uint64_t> refused_{0};  // answered 404 or 405
};

}  // namespace dlfs::fs
