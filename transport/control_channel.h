// The control channel: small messages between daemons over plain TCP, on
// the cluster's port (the listener) and on the connections each node makes
// to its peers' listeners. What UcxFabric::connect() returns and what its
// listener accepts; one-sided gets do not go here (they go over UCX
// endpoints made from worker addresses).
//
// Why not UCX's own listener: anyone who reaches the port could kill the
// daemon. UCX 1.13's TCP connection manager asserts (abort) on a client
// that sends more bytes than its header announces, which two lines of Python
// do; this channel reads only what it can check.
//
// On the wire: each side first sends an 8-byte greeting ("DLFSCTL1"), then
// frames: a 4-byte little-endian length, one flag byte (1: the sender wants
// replies), the payload (at most kMaxFrameBytes). A connection that greets
// wrongly, announces a larger frame, has not greeted within kGreetTimeout,
// or leaves a frame unfinished for kFrameTimeout is closed; at most
// FabricOptions::max_accepted accepted connections are kept (beyond, the one silent for
// longest is closed). Bytes of unfinished frames are buffered as they arrive
// (never reserved from an announced length), and all connections together
// buffer at most kMaxBufferedBytes: beyond, the connection holding the most
// is closed. So garbage or a half-open connection costs a file descriptor
// and at most a share of kMaxBufferedBytes for a few seconds, and nothing
// else; no read or write ever blocks the thread.
//
// One thread (the channel's) accepts, connects, reads, writes and runs the
// message handler: the handler must not block, and may send (sends queue).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "transport/fabric.h"

namespace dlfs::transport {

class ControlChannel {
 public:
  static constexpr size_t kMaxFrameBytes = size_t{4} << 20;
  static constexpr std::chrono::seconds kGreetTimeout{5};
  static constexpr std::chrono::seconds kFrameTimeout{5};  // from a frame's first byte to its last
  static constexpr size_t kMaxBufferedBytes = size_t{64} << 20;  // unfinished frames, all connections

  // Listens on options.listen_host:options.port when options.listen. Errors
  // name the address.
  static Result<std::unique_ptr<ControlChannel>> create(const FabricOptions& options, Fabric::Handler handler);
  ~ControlChannel();  // endpoints it made must be gone first
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  uint16_t port() const { return port_; }
  // Starts connecting (asynchronously: messages sent meanwhile are queued).
  // Errors: the host does not resolve.
  Result<std::unique_ptr<Endpoint>> connect(const std::string& host, uint16_t port,
                                            std::function<void(const std::string& why)> on_failure);

  struct Conn;  // one connection (control_channel.cc)

 private:
  ControlChannel() = default;
  void loop();
  void wake() const;
  void add(std::shared_ptr<Conn> c);
  void accept_all();
  // Reads (at most `room` bytes, which it lowers) and writes what it can;
  // why it broke, or "".
  std::string serve(Conn& c, short revents, size_t& room);
  // Closes connections with frames unfinished for too long.
  void expire_unfinished(std::chrono::steady_clock::time_point now);  // with mu_ held
  // Closes the connection that buffers the most; returns the bytes freed.
  size_t close_largest_holder();
  void deliver(const std::shared_ptr<Conn>& c);
  void fail(Conn& c, const std::string& why);  // closes; the client's on_failure once

  Fabric::Handler handler_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  size_t max_accepted_ = 512;  // FabricOptions::max_accepted
  uint16_t port_ = 0;
  std::mutex mu_;  // guards conns_ (their output buffers have their own lock)
  std::vector<std::shared_ptr<Conn>> conns_;
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: starts once the rest exists
};

}  // namespace dlfs::transport
