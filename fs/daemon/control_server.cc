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

namespace dlfs::fs {
namespace {

using nlohmann::json;
constexpr auto kRequestTimeout = std::chrono::seconds(10);

json error_reply(int err, const std::string& message) { return {{"ok", false}, {"error", message}, {"errno", err}}; }

// The socket's directory: created 0700 when missing; an existing one must not
// let other users swap our socket (writable by others without the sticky bit,
// or owned by another non-root user).
Status prepare_dir(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status(ec.value(), "control socket directory '" + dir + "': " + ec.message());
    ::chmod(dir.c_str(), 0700);
    return Status::ok();
  }
  if (!S_ISDIR(st.st_mode)) return Status(ENOTDIR, "control socket directory '" + dir + "' is not a directory");
  if ((st.st_mode & 0022) && !(st.st_mode & S_ISVTX))
    return Status(EPERM, "control socket directory '" + dir + "' is writable by other users");
  if (st.st_uid != 0 && st.st_uid != ::geteuid())
    return Status(EPERM, "control socket directory '" + dir + "' belongs to another user");
  return Status::ok();
}

bool something_answers(const sockaddr_un& addr) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  return fd.valid() && ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
}

}  // namespace

Result<std::unique_ptr<ControlServer>> ControlServer::start(const std::string& path, ControlHandler& handler) {
  const std::string what = "control socket '" + path + "'";
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return Status(ENAMETOOLONG, what + ": path too long");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  DLFS_RETURN_IF_ERROR(prepare_dir(std::filesystem::path(path).parent_path().string()));

  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Status(EEXIST, what + " exists and is not a socket");
    if (something_answers(addr)) return Status(EADDRINUSE, what + " is in use by another dlfsd");
    ::unlink(path.c_str());  // stale: its daemon is gone
  }
  std::unique_ptr<ControlServer> s(new ControlServer(path, handler));
  s->listen_fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s->listen_fd_.valid()) return Status::from_errno(errno, what);
  // umask so the socket is never briefly accessible to others before chmod.
  mode_t old = ::umask(0177);
  int rc = ::bind(s->listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  int err = errno;
  ::umask(old);
  if (rc != 0) return Status::from_errno(err, what);
  ::chmod(path.c_str(), 0600);
  if (::listen(s->listen_fd_.get(), 16) != 0) return Status::from_errno(errno, what);
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
  while (!stopping_) {
    pollfd fds[2] = {{listen_fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents) break;
    int fd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    if (active_.load() >= kMaxConnections) {
      (void)write_line(fd, json_text(error_reply(EBUSY, "too many control connections; try again")));
      ::close(fd);
      continue;
    }
    ++active_;
    std::thread([this, fd] {
      serve(fd);
      ::close(fd);
      --active_;
    }).detach();
  }
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
