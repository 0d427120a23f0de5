// An in-process Fabric for the cluster's unit tests: no UCX, no sockets.
//
// A FakeNetwork holds nodes addressed by port (the host part of an address
// is only a name). Each node's FakeFabric has its own delivery thread, as
// UCX's progress thread: messages, replies and the serving of gets run on
// the receiving node's thread, asynchronously to the sender. Registered
// memory is a span; a get copies from it into a private buffer on the
// owner's thread, and finish_get copies that into the caller's destination,
// so an abandoned get can complete late without touching it (the contract of
// Endpoint::finish_get).
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
#pragma once

#include <cstdint>
#include <memory>
#include <string>

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

  struct State;  // shared with the fabrics and their endpoints (fake_fabric.cc)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace dlfs::transport::test
