#include "fs/daemon/metrics_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <cstring>
#include <exception>
#include <mutex>
#include <string_view>

#include <civetweb.h>
#include <spdlog/spdlog.h>

namespace dlfs::fs {
namespace {

constexpr const char* kExpositionType = "text/plain; version=0.0.4; charset=utf-8";
constexpr const char* kIndex =
    "<!DOCTYPE html>\n<html><head><title>dlfsd</title></head>\n"
    "<body><p>dlfsd: <a href=\"/metrics\">metrics</a></p></body></html>\n";

// CivetWeb's messages: while start() runs, collected on its thread (a bind
// failure's cause is one of them); afterwards a bad client's are debug lines.
thread_local std::string* start_messages = nullptr;

int on_log(const mg_connection*, const char* message) {
  std::string_view m = message ? message : "";
  while (!m.empty() && (m.back() == '\n' || m.back() == '\r')) m.remove_suffix(1);
  if (start_messages) {
    if (!start_messages->empty()) *start_messages += "; ";
    *start_messages += m;
  } else {
    spdlog::debug("metrics endpoint: {}", m);
  }
  return 1;  // nothing else logs it
}

int no_access_log(const mg_connection*, const char*) { return 1; }

// The numeric address CivetWeb is told to bind: a name is resolved here
// (IPv4 first), so that it binds exactly one address.
Result<std::string> numeric_address(const ListenAddress& a) {
  const std::string port = std::to_string(a.port);
  auto ipv6_ok = [&]() -> Status {
    if (mg_check_feature(MG_FEATURES_IPV6) == 0)
      return Status(EAFNOSUPPORT, "metrics_address '" + a.text() + "': this CivetWeb was built without IPv6");
    return Status::ok();
  };
  if (a.ipv6) {
    DLFS_RETURN_IF_ERROR(ipv6_ok());
    return "[" + a.host + "]:" + port;
  }
  in_addr v4{};
  if (::inet_pton(AF_INET, a.host.c_str(), &v4) == 1) return a.host + ":" + port;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(a.host.c_str(), nullptr, &hints, &found); rc != 0)
    return Status(EINVAL, "metrics_address '" + a.text() + "': cannot resolve '" + a.host + "': " + gai_strerror(rc));
  std::string v4_text, v6_text;
  char buf[INET6_ADDRSTRLEN] = {};
  for (addrinfo* p = found; p; p = p->ai_next) {
    if (p->ai_family == AF_INET && v4_text.empty() &&
        ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(p->ai_addr)->sin_addr, buf, sizeof buf))
      v4_text = buf;
    if (p->ai_family == AF_INET6 && v6_text.empty() &&
        ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(p->ai_addr)->sin6_addr, buf, sizeof buf))
      v6_text = buf;
  }
  ::freeaddrinfo(found);
  if (!v4_text.empty()) return v4_text + ":" + port;
  if (v6_text.empty())
    return Status(EINVAL, "metrics_address '" + a.text() + "': '" + a.host + "' has no IPv4 or IPv6 address");
  DLFS_RETURN_IF_ERROR(ipv6_ok());
  return "[" + v6_text + "]:" + port;
}

int reply(mg_connection* conn, int status, const char* type, std::string_view body, bool head,
          const char* allow = nullptr) {
  mg_response_header_start(conn, status);
  mg_response_header_add(conn, "Content-Type", type, -1);
  const std::string length = std::to_string(body.size());
  mg_response_header_add(conn, "Content-Length", length.c_str(), -1);
  mg_response_header_add(conn, "Cache-Control", "no-store", -1);
  if (allow) mg_response_header_add(conn, "Allow", allow, -1);
  mg_response_header_send(conn);
  if (!head && !body.empty()) mg_write(conn, body.data(), body.size());
  return status;
}

}  // namespace

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const ListenAddress& address, Render render) {
  static std::once_flag library;
  std::call_once(library, [] { mg_init_library(0); });
  DLFS_ASSIGN_OR_RETURN(std::string bind, numeric_address(address));
  std::unique_ptr<MetricsServer> s(new MetricsServer(bind, std::move(render)));

  const std::string threads = std::to_string(kThreads);
  const std::string timeout = std::to_string(kRequestTimeoutMs);
  const std::string max_request = std::to_string(kMaxRequestBytes);
  const char* options[] = {"listening_ports", bind.c_str(),
                           "num_threads", threads.c_str(),
                           "request_timeout_ms", timeout.c_str(),
                           "keep_alive_timeout_ms", "500",
                           "max_request_size", max_request.c_str(),
                           "enable_keep_alive", "no",
                           "connection_queue", "16",
                           "listen_backlog", "16",
                           "decode_url", "yes",
                           nullptr};
  mg_callbacks callbacks{};
  callbacks.begin_request = &MetricsServer::on_request;
  callbacks.log_message = on_log;
  callbacks.log_access = no_access_log;
  mg_init_data setup{&callbacks, s.get(), options};
  unsigned code = 0;
  char text[256] = {};
  mg_error_data error{&code, text, sizeof text};

  // CivetWeb's threads inherit this mask: no signal is ever delivered to them
  // (SIGTERM and the FUSE loop's wake-up go to dlfsd's own threads).
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  std::string messages;
  start_messages = &messages;
  s->ctx_ = mg_start2(&setup, &error);
  start_messages = nullptr;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!s->ctx_) {
    std::string why = !messages.empty() ? messages : (text[0] ? text : "the HTTP server did not start");
    return Status(EADDRNOTAVAIL, "metrics_address '" + address.text() + "' (" + bind + "): " + why);
  }
  return s;
}

MetricsServer::~MetricsServer() { stop(); }

void MetricsServer::stop() {
  if (ctx_) mg_stop(ctx_);
  ctx_ = nullptr;
}

nlohmann::json MetricsServer::stats() const {
  return {{"address", address_},
          {"url", "http://" + address_ + "/metrics"},
          {"scrapes", scrapes()},
          {"refused", refused_.load(std::memory_order_relaxed)}};
}

int MetricsServer::on_request(mg_connection* conn) {
  auto* self = static_cast<MetricsServer*>(mg_get_user_data(mg_get_context(conn)));
  try {
    return self->serve(conn);
  } catch (const std::exception& e) {
    spdlog::warn("metrics endpoint: {}", e.what());
    return reply(conn, 500, "text/plain", "500 Internal Server Error\n", false);
  } catch (...) {
    return reply(conn, 500, "text/plain", "500 Internal Server Error\n", false);
  }
}

int MetricsServer::serve(mg_connection* conn) {
  const mg_request_info* ri = mg_get_request_info(conn);
  const std::string_view method = ri && ri->request_method ? ri->request_method : "";
  const std::string_view path = ri && ri->local_uri_raw ? ri->local_uri_raw : "";
  const bool head = method == "HEAD";
  if (path != "/metrics" && path != "/") {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return reply(conn, 404, "text/plain", "404 Not Found: dlfsd serves /metrics only\n", head);
  }
  if (method != "GET" && !head) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return reply(conn, 405, "text/plain", "405 Method Not Allowed: GET or HEAD\n", false, "GET, HEAD");
  }
  if (path == "/") return reply(conn, 200, "text/html; charset=utf-8", kIndex, head);
  scrapes_.fetch_add(1, std::memory_order_relaxed);
  const std::string body = render_();
  return reply(conn, 200, kExpositionType, body, head);
}

}  // namespace dlfs::fs
