// An in-process Fabric for the cluster's unit tests: no UCX, no sockets.
//
// A FakeNetwork holds nodes addressed by port (the host part of an address
// is only a name). Each node's FakeFabric has its own delivery thread, as
// UCX's progress thread: messages, replies and the serving of gets run on
// the receiving node's thread, asynchronously to the sender. Registered
// memory is a span; a get copies from it into a private buffer on the
// owner's thread, and finish_get copies that into the caller's destination,
// so an abandoned get can complete late without touching it (the contract of
// Endpoint::finish_get). Tagged gets (serve_tagged, start_get_tagged) are
// served the same way from the ranges the node serves with their tags, with
// the UCX fabric's errors (ESTALE for another tag or none); unserve and the
// copies take one lock, so no copy reads a range after unserve returned.
//
// Faults, by node:
//   drop     the node is cut off: endpoints to and from it fail, connects to
//            it fail, messages to it vanish (a crash or a partition);
//   mute     messages to the node vanish but endpoints stay healthy (a
//            SIGSTOPped daemon: it stops answering pings);
//   stall    gets the node serves never complete until unstalled;
//   restart  destroy the node's Fabric (its Cluster) and make a new one on
//            the same port: endpoints to the old one fail, and the new one
//            has new memory and keys.
//
// Endpoint failures are seen through failed(); on_failure callbacks are not
// called (the Cluster only logs them).
//
// Capture and replay, for the cluster's authentication tests: record(port)
// keeps every message and reply that node sends (sent() returns them), and a
// RawNode is another "process" on the network that sends any bytes to any
// node and keeps what reaches it: an eavesdropper replaying what it saw, or a
// daemon of another job.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/fabric.h"

namespace dlfs::transport::test {

class FakeNetwork {
 public:
  FakeNetwork();
  ~FakeNetwork();
  FakeNetwork(const FakeNetwork&) = delete;
  FakeNetwork& operator=(const FakeNetwork&) = delete;

  // Makes fabrics on this network (for Cluster::create); each listens on
  // FabricOptions::port, which must be unique among the live ones.
  FabricFactory factory();

  void drop(uint16_t port, bool dropped = true);
  void mute(uint16_t port, bool muted = true);
  void stall_gets(uint16_t port, bool stalled = true);  // unstalling completes the held gets

  uint64_t gets_served(uint16_t port) const;   // gets whose bytes the node copied out
  uint64_t gets_stalled(uint16_t port) const;  // gets held by a stall right now

  // One message as a node sent it.
  struct Sent {
    uint16_t from = 0, to = 0;
    std::string bytes;
    bool reply = false;  // an answer on a connection the other node made
  };
  void record(uint16_t port, bool on = true);  // from now on, keep what the node sends
  std::vector<Sent> sent(uint16_t from) const;  // what it sent while recorded, in order

  struct State;  // shared with the fabrics and their endpoints (fake_fabric.cc)

 private:
  std::shared_ptr<State> state_;
};

// A node that speaks raw bytes (see the header). Listens on `port`.
class RawNode {
 public:
  RawNode(FakeNetwork& net, uint16_t port);
  ~RawNode();
  RawNode(const RawNode&) = delete;
  RawNode& operator=(const RawNode&) = delete;

  // Sends bytes to the node listening on `to`, on a connection of its own
  // (made on first use), asking for a reply.
  Status send(uint16_t to, const std::string& bytes);
  std::vector<std::string> received() const;  // messages and replies that reached it, in order
  // Waits until at least n arrived; false after `timeout`.
  bool wait_received(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(5)) const;

 private:
  struct Inbox {
    mutable std::mutex mu;
    mutable std::condition_variable cv;
    std::vector<std::string> messages;
  };
  std::shared_ptr<Inbox> inbox_;
  std::unique_ptr<Fabric> fabric_;
  std::map<uint16_t, std::unique_ptr<Endpoint>> endpoints_;  // by destination; before the fabric goes
};

}  // namespace dlfs::transport::test
