// Fabric: what the cluster needs from a network, and nothing about clusters
// or datasets. An interface: daemons use the UCX fabric (fabric_ucx.h,
// Fabric::create); the unit tests an in-process fake.
//
// What it offers the layer above (transport/cluster):
//   - connect(host, port) -> an Endpoint (client side);
//   - small messages on an Endpoint, delivered to a handler on the fabric's
//     message thread together with a way to reply (UCX fabric: a plain TCP
//     control channel, control_channel.h);
//   - register memory and pack its remote key;
//   - get(endpoint, rkey, remote address, destination, timeout): a read of
//     the peer's registered memory that never writes `destination` after it
//     returned, even on timeout (one-sided, or served by the peer's progress
//     thread: GetMode);
//   - tagged gets, for memory whose contents change at the same addresses
//     (round buffers: a slot holds round j, later round j+2): the owner
//     serves a range with a tag (serve_tagged, unserve), and a peer's
//     get_tagged returns the bytes only while that tag is served there, else
//     fails with ESTALE. Always by message: a one-sided get cannot check.
//
// Errors of an endpoint (the peer died, the connection broke) make it
// failed(). Nothing here blocks for longer than the timeouts it is given.
//
// Lifetime: Endpoints and Registrations must be destroyed before the Fabric.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "common/status.h"
#include "transport/get_mode.h"

namespace dlfs::transport {

// A connection to one peer (client side, or the server side of an accepted one).
class Endpoint {
 public:
  virtual ~Endpoint() = default;  // closes (forcefully) and waits a bounded time for the peer to let go
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Sends a message (copied; returns at once). It arrives at the peer's
  // handler; with `want_reply` the handler may answer on this connection.
  virtual Status send(const std::string& bytes, bool want_reply = true) = 0;
  virtual bool failed() const = 0;
  virtual const std::string& peer() const = 0;  // "host:port" or the client's address
  // The fabric's description of the connection (lanes and transports), for logs and tests.
  virtual std::string describe() const = 0;

  // A peer's remote key unpacked for this endpoint (gets go through it).
  class RemoteKey {
   public:
    virtual ~RemoteKey() = default;
    RemoteKey(const RemoteKey&) = delete;
    RemoteKey& operator=(const RemoteKey&) = delete;
   protected:
    RemoteKey() = default;
  };
  virtual Result<std::unique_ptr<RemoteKey>> unpack(const std::string& packed_rkey) = 0;

  // Reads dst.size() bytes at `remote_address` of the peer into dst. Returns
  // ETIMEDOUT after `timeout` (dst is then never written later: the get lands
  // in a private buffer that is dropped), or the transport's error.
  Status get(const RemoteKey& key, uint64_t remote_address, std::span<std::byte> dst,
             std::chrono::milliseconds timeout) {
    PendingGet g = start_get(key, remote_address, dst.size());
    return finish_get(g, dst, std::chrono::steady_clock::now() + timeout);
  }

  // The same in two halves, so that one thread keeps several gets in flight
  // (a batch of samples ahead of the reader): start_get posts the get into a
  // private buffer; finish_get waits for it until `deadline` and copies it
  // into dst. A get that is abandoned (never finished, or past its deadline)
  // keeps its buffer until the fabric completes it: dst is never written late.
  class PendingGet {
   public:
    struct Op {  // an implementation's state of one get in flight
      virtual ~Op() = default;
      // The caller gave up (its PendingGet was dropped unfinished): a get
      // that writes the caller's memory directly (start_get_into) must not
      // touch it after this returns.
      virtual void abandon() {}
    };
    PendingGet() = default;
    PendingGet(std::shared_ptr<Op> op, size_t size) : op_(std::move(op)), size_(size) {}
    PendingGet(Status post_failed, size_t size) : size_(size), posted_(std::move(post_failed)) {}
    PendingGet(PendingGet&& o) noexcept : op_(std::move(o.op_)), size_(o.size_), posted_(std::move(o.posted_)) {}
    PendingGet& operator=(PendingGet&& o) noexcept {
      if (this != &o) {
        if (op_) op_->abandon();
        op_ = std::move(o.op_);
        size_ = o.size_;
        posted_ = std::move(o.posted_);
      }
      return *this;
    }
    ~PendingGet() {
      if (op_) op_->abandon();
    }
    size_t size() const { return size_; }
    const Status& posted() const { return posted_; }  // the post failed (no wait then)
    std::shared_ptr<Op> take() { return std::move(op_); }  // null once finished
   private:
    std::shared_ptr<Op> op_;
    size_t size_ = 0;
    Status posted_;
  };
  virtual PendingGet start_get(const RemoteKey& key, uint64_t remote_address, size_t size) = 0;
  virtual Status finish_get(PendingGet& get, std::span<std::byte> dst,
                            std::chrono::steady_clock::time_point deadline) = 0;
  // The same, but the fabric may land the bytes in dst itself (no private
  // buffer, no copy in finish_get) while the caller still waits: dst may be
  // written from now until finish_get(get, dst, ...) returns or the
  // PendingGet is dropped, never after. finish_get must be given this dst.
  // By default: start_get (a private buffer).
  virtual PendingGet start_get_into(const RemoteKey& key, uint64_t remote_address, std::span<std::byte> dst) {
    return start_get(key, remote_address, dst.size());
  }

  // A tagged get: `size` bytes at `remote_address` of a range the peer
  // serves with `tag` (Fabric::serve_tagged; not 0), finished with
  // finish_get like start_get's (a private buffer: dst is written only by a
  // successful finish_get, never after it returned). Always by message,
  // whatever GetMode says (no RemoteKey: the peer checks the tag itself).
  // The bytes are all of one round: packed while the range was served with
  // `tag`. Fails with ESTALE, naming the tag, when the peer serves no range
  // with that tag holding them (not this round: not yet, or no longer) or
  // stopped serving it while replying; other errors as start_get's.
  // By default (endpoints that carry no gets): ENOTSUP.
  virtual PendingGet start_get_tagged(uint64_t remote_address, size_t size, uint64_t tag) {
    (void)remote_address;
    (void)tag;
    return PendingGet(Status(ENOTSUP, "tagged gets from " + peer() + ": not on this endpoint"), size);
  }
  Status get_tagged(uint64_t remote_address, uint64_t tag, std::span<std::byte> dst,
                    std::chrono::milliseconds timeout) {
    PendingGet g = start_get_tagged(remote_address, dst.size(), tag);
    return finish_get(g, dst, std::chrono::steady_clock::now() + timeout);
  }

 protected:
  Endpoint() = default;
};

// Memory registered for remote gets.
class Registration {
 public:
  virtual ~Registration() = default;
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;
  virtual const std::string& packed_rkey() const = 0;
  virtual uint64_t address() const = 0;
 protected:
  Registration() = default;
};

// A received message. `reply` answers on the connection it came in on
// (valid only during the handler call); it is empty if the sender did not ask.
struct Message {
  std::string bytes;
  std::function<Status(const std::string&)> reply;
  std::string from;  // the connection's peer, for logs
};

struct FabricOptions {
  std::string listen_host;  // "" = all addresses
  uint16_t port = 0;        // 0 = an ephemeral port (see Fabric::port())
  bool listen = true;
  GetMode gets = GetMode::automatic;
  // Connections the listener keeps (beyond, the one silent for longest is
  // closed): every member of the job holds one to this node.
  size_t max_accepted = 512;
};

class Fabric {
 public:
  using Handler = std::function<void(Message&)>;  // runs on the message thread: must not block
  // The UCX fabric (fabric_ucx.h), what daemons use: initialises UCX, starts
  // the progress thread and the listener. Errors name the address and what
  // UCX said.
  static Result<std::unique_ptr<Fabric>> create(const FabricOptions& options, Handler handler);
  virtual ~Fabric() = default;
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  virtual uint16_t port() const = 0;
  virtual std::string transports() const = 0;  // what the fabric chose to use, for logs

  // Starts connecting to host:port (asynchronously; messages sent meanwhile
  // are queued). on_failure runs on the message thread when the endpoint
  // breaks (once).
  virtual Result<std::unique_ptr<Endpoint>> connect(const std::string& host, uint16_t port,
                                                    std::function<void(const std::string& why)> on_failure) = 0;
  // This node's worker address, and an endpoint made from a peer's
  // (exchanged in a message over a connect()ed endpoint): gets go over it.
  virtual std::string worker_address() const = 0;
  virtual Result<std::unique_ptr<Endpoint>> connect_worker(const std::string& address, const std::string& peer,
                                                           std::function<void(const std::string& why)> on_failure) = 0;
  virtual Result<std::unique_ptr<Registration>> register_memory(void* address, size_t length) = 0;

  // Serves [address, address + length) to peers' tagged gets with `tag` (not
  // 0) until unserve(handle): no registration needed (the range may lie in
  // registered memory or in none; tagged gets go by message). Only gets with
  // exactly this tag read it. The memory must stay valid until unserve().
  // To reuse a range for the next round: unserve, write, serve_tagged again
  // with a new tag (a new handle: handles are never reused).
  virtual Result<uint64_t> serve_tagged(const void* address, size_t length, uint64_t tag) = 0;
  // Stops serving a range of serve_tagged (other handles are ignored). Once
  // it returns, no reply packs bytes from the range any more (a reply still
  // going out fails its get with ESTALE): the caller may rewrite or free it.
  virtual void unserve(uint64_t handle) = 0;
  // Bytes peers' tagged gets have read from a range of serve_tagged so far
  // (0 once it is unserved): how a round's holder knows that every rank has
  // read its part of the round (cache/round_pipeline.h, release).
  virtual uint64_t served_bytes(uint64_t handle) const = 0;

 protected:
  Fabric() = default;
};

// Makes the fabric a Cluster runs on (Fabric::create unless a test injects another).
using FabricFactory = std::function<Result<std::unique_ptr<Fabric>>(const FabricOptions&, Fabric::Handler)>;

}  // namespace dlfs::transport
