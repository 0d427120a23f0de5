#include "fs/daemon/control_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "common/control_protocol.h"
#include "fs/daemon/unix_listener.h"

namespace dlfs::fs {
namespace {

using nlohmann::json;
constexpr auto kRequestTimeout = std::chrono::seconds(10);

json error_reply(int err, const std::string& message) { return {{"ok", false}, {"error", message}, {"errno", err}}; }

}  // namespace

Result<std::unique_ptr<ControlServer>> ControlServer::start(const std::string& path, ControlHandler& handler) {
  // The socket first: a server object that fails to start would unlink the path it was given.
  DLFS_ASSIGN_OR_RETURN(UniqueFd fd, listen_unix(path, {.type = SOCK_STREAM, .mode = 0600, .dir_mode = 0700,
                                                        .backlog = 16, .what = "control socket"}));
  std::unique_ptr<ControlServer> s(new ControlServer(path, handler));
  s->listen_fd_ = std::move(fd);
  s->wake_fd_.reset(::eventfd(0, EFD_CLOEXEC));
  if (!s->wake_fd_.valid()) return Status::from_errno(errno, "eventfd");
  s->acceptor_ = std::thread([raw = s.get()] { raw->accept_loop(); });
  return s;
}

ControlServer::~ControlServer() {
  stopping_ = true;
  uint64_t one = 1;
  if (wake_fd_.valid()) (void)!::write(wake_fd_.get(), &one, sizeof one);
  if (acceptor_.joinable()) acceptor_.join();
  // Connection threads are detached; each ends with its request (bounded by
  // the read timeout, or by a verify in progress). Wait for them to finish.
  while (active_.load() > 0) ::usleep(10000);
  ::unlink(path_.c_str());
}

void ControlServer::accept_loop() {
  accept_connections(
      listen_fd_.get(), wake_fd_.get(), stopping_, active_, kMaxConnections,
      [](int fd) { (void)write_line(fd, json_text(error_reply(EBUSY, "too many control connections; try again"))); },
      [this](int fd) { serve(fd); });
}

void ControlServer::serve(int fd) {
  try {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        (cred.uid != 0 && cred.uid != ::geteuid())) {
      spdlog::warn("control socket: refused a connection from uid {} (pid {})", cred.uid, cred.pid);
      (void)write_line(fd, json_text(error_reply(EACCES, "permission denied: uid " + std::to_string(cred.uid) +
                                                             " is not root or the daemon's user")));
      return;
    }
    std::string pending, line;
    Status s = read_line(fd, pending, line, kRequestTimeout);
    if (!s) {
      (void)write_line(fd, json_text(error_reply(s.err(), "bad request: " + s.message())));
      return;
    }
    json request = json::parse(line, nullptr, false);
    if (request.is_discarded() || !request.is_object() || !request.contains("cmd") || !request["cmd"].is_string()) {
      (void)write_line(fd,
                       json_text(error_reply(EINVAL, "bad request: expected a JSON object with a \"cmd\" string")));
      return;
    }
    (void)write_line(fd, json_text(dispatch(request, fd)));
  } catch (const std::exception& e) {
    spdlog::error("control socket: {}", e.what());
    (void)write_line(fd, json_text(error_reply(EIO, std::string("internal error: ") + e.what())));
  }
}

json ControlServer::dispatch(const json& request, int fd) {
  const std::string cmd = request["cmd"];
  if (cmd == "status") return {{"ok", true}, {"result", handler_.status()}};
  if (cmd == "stats") return {{"ok", true}, {"result", handler_.stats()}};
  if (cmd == "verify") {
    std::string dataset = request.contains("dataset") && request["dataset"].is_string() ? request["dataset"] : "";
    auto r = handler_.verify(dataset,
                             [fd](const json& p) { (void)write_line(fd, json_text(json{{"progress", p}})); });
    if (!r) return error_reply(r.status().err(), r.status().message());
    return {{"ok", true}, {"result", *r}};
  }
  if (cmd == "plan" || cmd == "shuffle-report") {
    auto r = cmd == "plan" ? handler_.plan(request)
                           : handler_.shuffle_report(request, [fd](const json& p) {
                               (void)write_line(fd, json_text(json{{"progress", p}}));
                             });
    if (!r) return error_reply(r.status().err(), r.status().message());
    return {{"ok", true}, {"result", *r}};
  }
  if (cmd == "unmount") {
    Status s = handler_.unmount();
    if (!s) return error_reply(s.err(), s.message());
    return {{"ok", true}, {"result", json::object()}};
  }
  return error_reply(EINVAL, "unknown command '" + cmd + "' (valid: status, stats, verify, plan, shuffle-report, unmount)");
}

}  // namespace dlfs::fs
