#include "common/control_protocol.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>

#include "common/unique_fd.h"

namespace dlfs {

std::string default_control_dir() {
  if (::geteuid() == 0) return "/run/dlfs";
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg) return std::string(xdg) + "/dlfs";
  return "/tmp/dlfs-" + std::to_string(::geteuid());
}

namespace {

// '/mnt/a-b' -> 'mnt-a\x2db' (systemd-escape style).
std::string escaped_mountpoint(const std::string& mountpoint) {
  std::string abs = std::filesystem::absolute(mountpoint).lexically_normal().string();
  while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
  std::string escaped;
  // systemd-escape style: '/' becomes '-', so a literal '-' (and '\\') must be
  // escaped or /mnt/a-b and /mnt/a/b would share a socket.
  for (size_t i = 1; i < abs.size(); ++i) {
    char c = abs[i];
    if (c == '/') escaped += '-';
    else if (c == '-') escaped += "\\x2d";
    else if (c == '\\') escaped += "\\x5c";
    else escaped += c;
  }
  if (escaped.empty()) escaped = "root";
  return escaped;
}

}  // namespace

std::string default_control_socket(const std::string& mountpoint) {
  return default_control_dir() + "/" + escaped_mountpoint(mountpoint) + ".sock";
}

std::string default_client_socket(const std::string& mountpoint) {
  const std::string dir = ::geteuid() == 0 ? "/run/dlfs-client" : default_control_dir();
  const std::string suffix = ::geteuid() == 0 ? ".sock" : ".client.sock";
  std::string path = dir + "/" + escaped_mountpoint(mountpoint) + suffix;
  // A socket path has at most 107 bytes (sun_path). Clients find the socket
  // from the views' xattr, not from the name: a deep mountpoint gets a hash.
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016zx", std::hash<std::string>{}(escaped_mountpoint(mountpoint)));
    path = dir + "/m-" + hex + suffix;
  }
  return path;
}

std::string json_text(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status write_line(int fd, const std::string& line) {
  std::string buf = line + "\n";
  size_t done = 0;
  while (done < buf.size()) {
    ssize_t n = ::send(fd, buf.data() + done, buf.size() - done, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::from_errno(errno, "control socket write");
    }
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

Status read_line(int fd, std::string& pending, std::string& line, std::chrono::milliseconds timeout,
                 size_t max_bytes) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (size_t nl = pending.find('\n'); nl != std::string::npos) {
      if (nl > max_bytes)
        return Status(EMSGSIZE, "control message longer than " + std::to_string(max_bytes) + " bytes");
      line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      return Status::ok();
    }
    if (pending.size() > max_bytes)
      return Status(EMSGSIZE, "control message longer than " + std::to_string(max_bytes) + " bytes");
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Status(ETIMEDOUT, "timed out waiting on the control socket");
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (r < 0 && errno != EINTR) return Status::from_errno(errno, "control socket poll");
    if (r <= 0) continue;
    char buf[65536];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Status::from_errno(errno, "control socket read");
    }
    if (n == 0) return Status(ECONNRESET, "the daemon closed the control connection");
    pending.append(buf, static_cast<size_t>(n));
  }
}

Result<nlohmann::json> control_call(const std::string& socket_path, const nlohmann::json& request,
                                    const std::function<void(const nlohmann::json&)>& on_progress,
                                    std::chrono::milliseconds timeout) {
  const std::string what = "cannot connect to dlfsd control socket '" + socket_path + "'";
  sockaddr_un addr{};
  if (socket_path.size() >= sizeof(addr.sun_path)) return Status(ENAMETOOLONG, what + ": path too long");
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Status::from_errno(errno, what);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    std::string hint = err == EACCES ? " (only root or the daemon's user may use it)"
                                     : " (is dlfsd running for this mountpoint?)";
    return Status(err, what + ": " + std::strerror(err) + hint);
  }
  // The daemon may refuse (and close) before reading the request: a failed
  // write then still leaves its reply to read, which says why.
  Status sent = write_line(fd.get(), json_text(request));
  std::string pending, line;
  for (;;) {
    if (Status got = read_line(fd.get(), pending, line, timeout); !got.is_ok()) return sent.is_ok() ? got : sent;
    nlohmann::json msg = nlohmann::json::parse(line, nullptr, false);
    if (msg.is_discarded() || !msg.is_object()) return Status(EPROTO, "malformed reply from dlfsd: " + line.substr(0, 200));
    if (msg.contains("progress")) {
      if (on_progress) on_progress(msg["progress"]);
      continue;
    }
    // Check types before reading: value() throws on a wrongly typed field.
    if (auto ok = msg.find("ok"); ok != msg.end() && ok->is_boolean() && ok->get<bool>())
      return msg.contains("result") ? msg["result"] : nlohmann::json::object();
    auto en = msg.find("errno"), er = msg.find("error");
    int err = en != msg.end() && en->is_number_integer() && en->get<int>() > 0 ? en->get<int>() : EIO;
    return Status(err, er != msg.end() && er->is_string() ? er->get<std::string>()
                                                          : "unexpected reply from dlfsd: " + line.substr(0, 200));
  }
}

}  // namespace dlfs
