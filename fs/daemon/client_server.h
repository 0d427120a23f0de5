// ClientServer: the client socket (docs/client-protocol.md). Local
// processes read samples from dlfsd's memory through it, without FUSE.
//
// A SOCK_SEQPACKET Unix socket: every request and reply is one packet, and
// the open reply carries the memory's descriptors (SCM_RIGHTS). One thread
// per connection (at most kMaxConnections), each a ClientSession; a
// connection's thread waits for its next request or for the server to
// stop, so a client that keeps a connection idle costs a sleeping thread.
//
// As root the socket is 0666 in a 0755 directory of its own: every local
// user may connect, and each connection's SO_PEERCRED decides what it may
// open, as the kernel decides at the mount (fs/dataset/audience.h).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "common/unique_fd.h"
#include "fs/daemon/client_session.h"

namespace dlfs::fs {

class ClientServer {
 public:
  static constexpr int kMaxConnections = 256;

  // Binds `path` (its directory created if missing; a stale socket
  // replaced; one a live daemon answers on refused) and starts serving.
  static Result<std::unique_ptr<ClientServer>> start(const std::string& path, ClientPolicy policy,
                                                     DatasetLookup lookup);
  ~ClientServer();  // closes every connection, joins, unlinks the socket
  ClientServer(const ClientServer&) = delete;
  ClientServer& operator=(const ClientServer&) = delete;

  const std::string& path() const { return path_; }
  nlohmann::json stats() const;  // the counters, for /.dlfs/stats

 private:
  ClientServer(std::string path, ClientPolicy policy, DatasetLookup lookup)
      : path_(std::move(path)), policy_(policy), lookup_(std::move(lookup)) {}
  void accept_loop();
  void serve(int fd);

  std::string path_;
  ClientPolicy policy_;
  DatasetLookup lookup_;
  ClientCounters counters_;
  UniqueFd listen_fd_;
  UniqueFd wake_fd_;  // eventfd: wakes the accept loop and every connection on stop
  std::thread acceptor_;
  std::atomic<int> active_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace dlfs::fs
