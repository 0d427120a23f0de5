// Fabric: this node's UCX machinery, and nothing about clusters or datasets.
//
// One UCP context (RMA + active messages), one worker shared by all threads
// (UCS_THREAD_MODE_MULTI), a progress thread that keeps that worker moving
// (over TCP `ucp_get` is emulated: the *target* must progress for a peer's
// get to complete, so progress cannot wait for our own requests; it polls,
// with short sleeps when idle, because shared-memory transports raise no
// events), and a listener that accepts connections by address.
//
// What it offers the layer above (transport/cluster):
//   - connect(host, port) -> an Endpoint (client side);
//   - small messages (active messages, one id) on an Endpoint, delivered to a
//     handler on the progress thread together with a way to reply;
//   - register memory (ucp_mem_map) and pack its remote key;
//   - get(endpoint, rkey, remote address, destination, timeout): a one-sided
//     read that never writes `destination` after it returned, even on timeout.
//
// Errors of an endpoint (the peer died, the connection broke) reach the
// endpoint's error callback on the progress thread. Nothing here blocks for
// longer than the timeouts it is given.
//
// Lifetime: Endpoints and Registrations must be destroyed before the Fabric.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <ucp/api/ucp.h>

#include "common/status.h"

namespace dlfs::transport {

class Fabric;
namespace detail {
struct GetOp;  // one get in flight (fabric.cc)
}

// A connection to one peer (client side, or the server side of an accepted one).
class Endpoint {
 public:
  ~Endpoint();  // closes (forcefully) and waits a bounded time for UCX to let go
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Sends a message (copied; returns at once). It arrives at the peer's
  // handler; with `want_reply` the handler may answer on this connection.
  Status send(const std::string& bytes, bool want_reply = true);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  const std::string& peer() const { return peer_; }  // "host:port" or the client's address
  // UCX's description of the connection (lanes and transports), for logs and tests.
  std::string describe() const;

  // A peer's remote key unpacked for this endpoint (gets go through it).
  class RemoteKey {
   public:
    ~RemoteKey();
    RemoteKey(const RemoteKey&) = delete;
    RemoteKey& operator=(const RemoteKey&) = delete;
   private:
    friend class Endpoint;
    RemoteKey() = default;
    ucp_rkey_h rkey_ = nullptr;
  };
  Result<std::unique_ptr<RemoteKey>> unpack(const std::string& packed_rkey);

  // Reads dst.size() bytes at `remote_address` of the peer into dst. Returns
  // ETIMEDOUT after `timeout` (dst is then never written later: the get lands
  // in a private buffer that is dropped), or the transport's error.
  Status get(const RemoteKey& key, uint64_t remote_address, std::span<std::byte> dst,
             std::chrono::milliseconds timeout);

  // The same in two halves, so that one thread keeps several gets in flight
  // (a batch of samples ahead of the reader): start_get posts the get into a
  // private buffer; finish_get waits for it until `deadline` and copies it
  // into dst. A get that is abandoned (never finished, or past its deadline)
  // keeps its buffer until UCX completes it: dst is never written late.
  class PendingGet {
   public:
    size_t size() const { return size_; }
   private:
    friend class Endpoint;
    std::shared_ptr<detail::GetOp> op_;
    size_t size_ = 0;
    Status posted_;  // the post failed (no wait then)
  };
  PendingGet start_get(const RemoteKey& key, uint64_t remote_address, size_t size);
  Status finish_get(PendingGet& get, std::span<std::byte> dst, std::chrono::steady_clock::time_point deadline);

 private:
  friend class Fabric;
  Endpoint(Fabric& fabric, std::string peer) : fabric_(fabric), peer_(std::move(peer)) {}
  static void on_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  Fabric& fabric_;
  std::string peer_;
  ucp_ep_h ep_ = nullptr;
  std::atomic<bool> failed_{false};
  std::function<void(const std::string& why)> on_failure_;
};

// Memory registered for remote gets.
class Registration {
 public:
  ~Registration();
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;
  const std::string& packed_rkey() const { return rkey_; }
  uint64_t address() const { return address_; }
 private:
  friend class Fabric;
  Registration(ucp_context_h ctx) : ctx_(ctx) {}
  ucp_context_h ctx_;
  ucp_mem_h memh_ = nullptr;
  std::string rkey_;
  uint64_t address_ = 0;
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
};

class Fabric {
 public:
  using Handler = std::function<void(Message&)>;  // runs on the progress thread: must not block
  // Initialises UCX, starts the progress thread and the listener. Errors name
  // the address and what UCX said.
  static Result<std::unique_ptr<Fabric>> create(const FabricOptions& options, Handler handler);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  uint16_t port() const { return port_; }
  std::string transports() const;  // what UCX chose to use, for logs

  // Starts connecting to host:port (UCX connects asynchronously; messages
  // sent meanwhile are queued). on_failure runs on the progress thread when
  // the endpoint breaks (once).
  Result<std::unique_ptr<Endpoint>> connect(const std::string& host, uint16_t port,
                                            std::function<void(const std::string& why)> on_failure);
  // This worker's address, and an endpoint made from a peer's (exchanged in
  // a message over a connect()ed endpoint). Such an endpoint is wired up with
  // every transport UCX_TLS allows, shared memory included, which a
  // connection made through the listener (TCP socket wire-up) does not get:
  // gets go over it.
  std::string worker_address() const;
  Result<std::unique_ptr<Endpoint>> connect_worker(const std::string& address, const std::string& peer,
                                                   std::function<void(const std::string& why)> on_failure);
  Result<std::unique_ptr<Registration>> register_memory(void* address, size_t length);

 private:
  friend class Endpoint;
  Fabric() = default;
  void progress_loop();
  void wake();
  static void on_connection(ucp_conn_request_h request, void* arg);
  static ucs_status_t on_message(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                 const ucp_am_recv_param_t* param);

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  std::atomic<unsigned> idle_rounds_{0};  // progress calls in a row that found nothing
  uint16_t port_ = 0;
  Handler handler_;
  std::atomic<bool> stop_{false};
  std::thread progress_;
  std::mutex accepted_mu_;  // guards accepted_
  std::vector<std::unique_ptr<Endpoint>> accepted_;  // server sides of accepted connections
};

// Whether UCX_TLS names a shared-memory transport (posix, sysv, cma, shm, ...).
bool shared_memory_requested();

// Waits for a UCX request (or immediate status) while the progress thread
// drives the worker; frees the request. Used for closes and sends at shutdown.
ucs_status_t wait_request(ucs_status_ptr_t request, std::chrono::milliseconds timeout);

}  // namespace dlfs::transport
