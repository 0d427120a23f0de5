// The UCX fabric: this node's UCX machinery behind the Fabric interface.
//
// One UCP context (RMA + active messages + wake-up), one worker shared by
// all threads (UCS_THREAD_MODE_MULTI), a progress thread that keeps that
// worker moving (over TCP the *target* serves a peer's get, by DLFS's
// messages: it must progress for the get to complete, so progress cannot
// wait for our own requests). That thread sleeps when there is nothing to
// do: it progresses until ucp_worker_progress finds nothing, arms the worker
// (ucp_worker_arm) and blocks in poll() on the worker's event fd
// (ucp_worker_get_efd: a peer's traffic, UCX's keepalive timer) and on an
// eventfd that wake() writes (work another thread posted: sends, gets,
// closes), at most 1 s (a safety tick). Idle, it wakes about once a second
// (the polling it replaced: ~5000 times, ~7% of a core). After work it
// keeps progressing for 30 us before it sleeps (a get's next chunk usually
// comes sooner than a sleeper wakes). UCX 1.13 arms every transport DLFS
// uses: tcp (its sockets' epoll fd), posix and sysv (a sender signals an
// armed receiver over a unix socket), cma (its copies run in the asker's
// progress; arming fails with BUSY while one is queued); WAKEUP narrows its
// choice of transports only with UCP_FEATURE_TAG, which DLFS does not ask
// for. Where wake-up is unavailable (the context or the event fd refused, or
// DLFS_TEST_ONLY_UCX_POLLING set) the thread polls instead, sleeping in
// steps that double up to kMaxIdleSleep when idle (~250 wake-ups a second)
// and that wake() cuts short. transports() and an info line at start say
// which. The listener and the endpoints connect() makes are not UCX's:
// they are the control channel's plain TCP connections (control_channel.h),
// whose thread runs the message handler; UCX's own listener dies of a
// malformed connection request.
//
// Messages on worker-address endpoints are active messages with one id
// (DLFS sends none there). Registered memory is ucp_mem_map'ed and its
// remote key packed, and its range is listed in ServedMemory. Gets on an
// endpoint are ucp_get where a transport does them one-sided, and DLFS's
// own request/reply messages where UCX would emulate them (am_get.h: an
// asker killed mid-get then cannot abort the node serving it); tagged gets
// always by message, their ranges listed in ServedMemory with their tags
// (no ucp_mem_map). Errors of an endpoint reach its error callback on the
// progress thread.
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

#include <ucp/api/ucp.h>

#include "transport/am_get.h"
#include "transport/control_channel.h"
#include "transport/fabric.h"

namespace dlfs::transport {

class UcxFabric;

class UcxEndpoint final : public Endpoint {
 public:
  ~UcxEndpoint() override;
  Status send(const std::string& bytes, bool want_reply = true) override;
  bool failed() const override { return failed_.load(std::memory_order_acquire); }
  const std::string& peer() const override { return peer_; }
  std::string describe() const override;
  Result<std::unique_ptr<RemoteKey>> unpack(const std::string& packed_rkey) override;
  PendingGet start_get(const RemoteKey& key, uint64_t remote_address, size_t size) override;
  PendingGet start_get_into(const RemoteKey& key, uint64_t remote_address, std::span<std::byte> dst) override;
  // By message on every endpoint: on one that gets one-sided (ucp_get) too,
  // over the same lanes its other messages take. Such an endpoint may lack
  // peer-failure handling (shared memory asked for): its messages then go
  // over shared memory, where a reply to a killed asker is no error UCX
  // acts on (fabric_kill_test's askers switched to tagged gets with
  // gets=rma over posix,cma,sysv,tcp: 120 killed mid-get, the target lived).
  PendingGet start_get_tagged(uint64_t remote_address, size_t size, uint64_t tag) override;
  Status finish_get(PendingGet& get, std::span<std::byte> dst, std::chrono::steady_clock::time_point deadline) override;

 private:
  friend class UcxFabric;
  UcxEndpoint(UcxFabric& fabric, std::string peer) : fabric_(fabric), peer_(std::move(peer)) {}
  static void on_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  // A get into `direct` (the caller's memory, gets by message only) or a private buffer.
  PendingGet start(const RemoteKey& key, uint64_t remote_address, size_t size, std::byte* direct);
  // A get by message (am_get.h), untagged (tag 0) or tagged.
  PendingGet start_by_message(uint64_t remote_address, size_t size, std::byte* direct, uint64_t tag);
  UcxFabric& fabric_;
  ucs_status_t create(const std::string& address, ucp_err_handling_mode_t mode);
  std::string ucx_info() const;  // ucp_ep_print_info's text
  std::string peer_;
  ucp_ep_h ep_ = nullptr;
  bool am_gets_ = false;  // gets by message (am_get.h), not ucp_get
  std::atomic<bool> failed_{false};
  std::function<void(const std::string& why)> on_failure_;
};

class UcxRegistration final : public Registration {
 public:
  ~UcxRegistration() override;
  const std::string& packed_rkey() const override { return rkey_; }
  uint64_t address() const override { return address_; }
 private:
  friend class UcxFabric;
  UcxRegistration(ucp_context_h ctx, ServedMemory& served) : ctx_(ctx), served_(served) {}
  ucp_context_h ctx_;
  ServedMemory& served_;
  uint64_t served_handle_ = 0;  // 0: not listed
  ucp_mem_h memh_ = nullptr;
  std::string rkey_;
  uint64_t address_ = 0;
};

class UcxFabric final : public Fabric {
 public:
  static Result<std::unique_ptr<UcxFabric>> create(const FabricOptions& options, Handler handler);
  ~UcxFabric() override;

  uint16_t port() const override { return control_->port(); }
  std::string transports() const override;  // UCX's version, UCX_TLS and the progress mode
  Result<std::unique_ptr<Endpoint>> connect(const std::string& host, uint16_t port,
                                            std::function<void(const std::string& why)> on_failure) override;
  // A worker-address endpoint is wired up with every transport UCX_TLS
  // allows, shared memory included: gets go over it.
  std::string worker_address() const override;
  Result<std::unique_ptr<Endpoint>> connect_worker(const std::string& address, const std::string& peer,
                                                   std::function<void(const std::string& why)> on_failure) override;
  Result<std::unique_ptr<Registration>> register_memory(void* address, size_t length) override;
  Result<uint64_t> serve_tagged(const void* address, size_t length, uint64_t tag) override;
  void unserve(uint64_t handle) override;
  uint64_t served_bytes(uint64_t handle) const override { return served_.served_bytes(handle); }

  // How the progress thread waits: "event-driven (efd)" or "polling: <why>".
  const std::string& progress_mode() const { return progress_mode_; }
  // Times the progress thread woke from a wait, since creation: what an idle
  // fabric costs, counted (tests).
  uint64_t progress_wakeups() const { return wakeups_.load(std::memory_order_relaxed); }

  // The polling fallback's longest sleep when idle: a peer's get to an idle
  // node waits up to this long there.
  static constexpr std::chrono::microseconds kMaxIdleSleep{4000};

 private:
  friend class UcxEndpoint;
  UcxFabric() = default;
  void progress_loop();
  // Blocks until the worker's event fd (event-driven) or wake() fires, or
  // `timeout` passed; true if wake() did.
  bool wait_for_work(std::chrono::microseconds timeout);
  // Wakes the progress thread: call after posting work to the worker from
  // another thread (it may be blocked in wait_for_work).
  void wake();
  // Waits for a UCX request (or immediate status) while the progress thread
  // drives the worker (woken first); frees the request. For closes.
  ucs_status_t wait_request(ucs_status_ptr_t request, std::chrono::milliseconds timeout);
  static ucs_status_t on_message(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                 const ucp_am_recv_param_t* param);

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int worker_fd_ = -1;  // ucp_worker_get_efd's (owned by UCX); -1: polling
  int wake_fd_ = -1;    // an eventfd: wake() writes it, the progress thread drains it
  std::string progress_mode_;
  std::atomic<uint64_t> wakeups_{0};
  Handler handler_;
  std::atomic<bool> stop_{false};
  std::thread progress_;
  std::unique_ptr<ControlChannel> control_;  // the listener and connect()'s endpoints
  GetMode gets_ = GetMode::automatic;
  ServedMemory served_;         // what peers may read by message
  PendingAmGets pending_gets_;  // this node's gets by message, awaiting replies
};

// Whether UCX_TLS names a shared-memory transport (posix, sysv, cma, shm, ...).
bool shared_memory_requested();

}  // namespace dlfs::transport
