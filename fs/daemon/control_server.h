// ControlServer: the daemon's end of the control socket (protocol in
// common/control_protocol.h). Owns the socket file, an accept thread and one
// thread per connection (at most kMaxConnections at once), so `status` stays
// answerable while a long `verify` runs.
//
// Only root and the daemon's own user may talk to it: the socket is mode
// 0600 in a 0700 directory, and every connection's SO_PEERCRED is checked.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"
#include "common/unique_fd.h"
#include "fs/daemon/control_handler.h"

namespace dlfs::fs {

class ControlServer {
 public:
  static constexpr int kMaxConnections = 8;

  // Binds `socket_path` (creating its directory 0700 if missing, replacing a
  // stale socket, refusing one a live daemon answers on) and starts serving.
  static Result<std::unique_ptr<ControlServer>> start(const std::string& socket_path, ControlHandler& handler);
  ~ControlServer();  // stops, joins, unlinks the socket
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  const std::string& path() const { return path_; }

 private:
  ControlServer(std::string path, ControlHandler& handler) : path_(std::move(path)), handler_(handler) {}
  void accept_loop();
  void serve(int fd);
  nlohmann::json dispatch(const nlohmann::json& request, int fd);

  std::string path_;
  ControlHandler& handler_;
  UniqueFd listen_fd_;
  UniqueFd wake_fd_;  // eventfd: wakes the accept loop on stop
  std::thread acceptor_;
  std::atomic<int> active_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace dlfs::fs
