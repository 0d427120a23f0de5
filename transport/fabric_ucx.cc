#include "transport/fabric_ucx.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <spdlog/spdlog.h>

namespace dlfs::transport {
namespace {

constexpr unsigned kMessageId = 7;  // the one active-message id DLFS uses

// A ucp_get completed: the GetOp's buffer holds the bytes (or the get failed).
void get_done(void* request, ucs_status_t status, void* user_data) {
  auto* holder = static_cast<std::shared_ptr<GetOp>*>(user_data);
  (*holder)->complete(status == UCS_OK ? Status::ok() : ucx_error("one-sided get", status));
  delete holder;
  ucp_request_free(request);
}

void send_done(void* request, ucs_status_t, void* user_data) {
  delete static_cast<std::string*>(user_data);
  ucp_request_free(request);
}

}  // namespace

bool shared_memory_requested() {
  const char* tls = std::getenv("UCX_TLS");
  if (tls == nullptr) return false;
  std::string t = tls;
  for (const char* name : {"posix", "sysv", "cma", "knem", "xpmem", "shm", "sm"}) {
    size_t at = 0;
    while ((at = t.find(name, at)) != std::string::npos) {
      const size_t end = at + std::strlen(name);
      const bool starts = at == 0 || t[at - 1] == ',' || t[at - 1] == '^';
      const bool ends = end == t.size() || t[end] == ',';
      if (starts && ends && !(at > 0 && t[0] == '^')) return true;
      at = end;
    }
  }
  return false;
}

ucs_status_t UcxFabric::wait_request(ucs_status_ptr_t request, std::chrono::milliseconds timeout) {
  if (request == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(request)) return UCS_PTR_STATUS(request);
  wake();  // the request was just posted: the progress thread may be asleep
  auto deadline = std::chrono::steady_clock::now() + timeout;
  ucs_status_t s;
  while ((s = ucp_request_check_status(request)) == UCS_INPROGRESS) {
    if (std::chrono::steady_clock::now() > deadline) {
      ucp_request_free(request);  // UCX releases it when it completes
      return UCS_ERR_TIMED_OUT;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ucp_request_free(request);
  return s;
}

// ---- UcxEndpoint -------------------------------------------------------------

void UcxEndpoint::on_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* self = static_cast<UcxEndpoint*>(arg);
  if (self->failed_.exchange(true)) return;
  self->fabric_.pending_gets_.fail_all(
      self, Status(ECONNRESET, std::string("connection failed (") + ucs_status_string(status) + ")"));
  if (self->on_failure_) self->on_failure_(ucs_status_string(status));
}

UcxEndpoint::~UcxEndpoint() {
  if (ep_ == nullptr) return;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  fabric_.wait_request(ucp_ep_close_nbx(ep_, &p), std::chrono::seconds(2));
  // Gets by message still waiting for a reply will get none now.
  fabric_.pending_gets_.fail_all(this, Status(ECONNRESET, "connection closed"));
}

Status UcxEndpoint::send(const std::string& bytes, bool want_reply) {
  if (failed()) return Status(ECONNRESET, "connection to " + peer_ + " is broken");
  auto* copy = new std::string(bytes);
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.cb.send = send_done;
  p.user_data = copy;
  // Eager: messages are small, and a rendezvous would need a receive call.
  p.flags = UCP_AM_SEND_FLAG_EAGER | (want_reply ? UCP_AM_SEND_FLAG_REPLY : 0);
  ucs_status_ptr_t r = ucp_am_send_nbx(ep_, kMessageId, nullptr, 0, copy->data(), copy->size(), &p);
  if (r == nullptr) {
    delete copy;
  } else if (UCS_PTR_IS_ERR(r)) {
    delete copy;
    return ucx_error("message to " + peer_, UCS_PTR_STATUS(r));
  }
  fabric_.wake();
  return Status::ok();
}

std::string UcxEndpoint::describe() const {
  return ucx_info() + (am_gets_ ? "# DLFS gets: by message (am)\n" : "# DLFS gets: ucp_get (rma)\n");
}

std::string UcxEndpoint::ucx_info() const {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = ::open_memstream(&buf, &len);
  if (!f) return "?";
  ucp_ep_print_info(ep_, f);
  std::fclose(f);
  std::string out(buf, len);
  std::free(buf);
  return out;
}

namespace {
// A remote key unpacked on a UCX endpoint.
class UcxRemoteKey final : public Endpoint::RemoteKey {
 public:
  ~UcxRemoteKey() override {
    if (rkey) ucp_rkey_destroy(rkey);
  }
  ucp_rkey_h rkey = nullptr;
};
}  // namespace

Result<std::unique_ptr<Endpoint::RemoteKey>> UcxEndpoint::unpack(const std::string& packed) {
  auto k = std::make_unique<UcxRemoteKey>();
  ucs_status_t s = ucp_ep_rkey_unpack(ep_, packed.data(), &k->rkey);
  if (s != UCS_OK) return ucx_error("remote key of " + peer_, s);
  return std::unique_ptr<RemoteKey>(std::move(k));
}

Endpoint::PendingGet UcxEndpoint::start_get(const RemoteKey& key, uint64_t remote_address, size_t size) {
  return start(key, remote_address, size, nullptr);
}

Endpoint::PendingGet UcxEndpoint::start_get_into(const RemoteKey& key, uint64_t remote_address,
                                                 std::span<std::byte> dst) {
  // Only a get by message can land in dst directly: its bytes are copied in
  // by DLFS's handler, which checks that the caller still waits. ucp_get
  // writes its destination whenever UCX completes it: a private buffer.
  return start(key, remote_address, dst.size(), am_gets_ ? dst.data() : nullptr);
}

Endpoint::PendingGet UcxEndpoint::start_get_tagged(uint64_t remote_address, size_t size, uint64_t tag) {
  if (tag == 0)  // 0 is an untagged get's, which needs a remote key
    return PendingGet(Status(EINVAL, "a tagged get from " + peer_ + " needs a tag other than 0"), size);
  // A private buffer: a tagged get that fails (another round) leaves the
  // caller's memory as it was.
  return start_by_message(remote_address, size, nullptr, tag);
}

Endpoint::PendingGet UcxEndpoint::start(const RemoteKey& key, uint64_t remote_address, size_t size,
                                        std::byte* direct) {
  if (am_gets_) return start_by_message(remote_address, size, direct, 0);
  if (failed()) return PendingGet(Status(ECONNRESET, "connection to " + peer_ + " is broken"), size);
  auto op = std::make_shared<GetOp>(size, direct);
  auto* holder = new std::shared_ptr<GetOp>(op);
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = get_done;
  p.user_data = holder;
  // Keys come from this endpoint's unpack(): a UcxRemoteKey.
  const ucp_rkey_h rkey = static_cast<const UcxRemoteKey&>(key).rkey;
  ucs_status_ptr_t r = ucp_get_nbx(ep_, op->buffer.get(), size, remote_address, rkey, &p);
  if (r == nullptr || UCS_PTR_IS_ERR(r)) {  // completed (or failed) at once: no callback
    delete holder;
    op->complete(r == nullptr ? Status::ok() : ucx_error("one-sided get", UCS_PTR_STATUS(r)));
  } else {
    fabric_.wake();
  }
  return PendingGet(std::move(op), size);
}

Endpoint::PendingGet UcxEndpoint::start_by_message(uint64_t remote_address, size_t size, std::byte* direct,
                                                   uint64_t tag) {
  if (failed()) return PendingGet(Status(ECONNRESET, "connection to " + peer_ + " is broken"), size);
  if (size > kMaxAmGet)  // checked before allocating: the target refuses it anyway
    return PendingGet(Status(EMSGSIZE, "a get of " + std::to_string(size) + " bytes from " + peer_ +
                                           " is larger than a get by message may be (" + std::to_string(kMaxAmGet) + ")"),
                      size);
  auto op = std::make_shared<GetOp>(size, direct);
  op->tag = tag;
  post_am_get(ep_, fabric_.pending_gets_, this, op, remote_address);
  fabric_.wake();
  return PendingGet(std::move(op), size);
}

Status UcxEndpoint::finish_get(PendingGet& g, std::span<std::byte> dst,
                               std::chrono::steady_clock::time_point deadline) {
  if (!g.posted()) return g.posted();
  // Pending gets come from this endpoint's start_get(): their state is a GetOp.
  std::shared_ptr<GetOp> op = std::static_pointer_cast<GetOp>(g.take());
  if (!op) return Status(EINVAL, "get from " + peer_ + ": finished twice");
  std::unique_lock lk(op->mu);
  const bool into_dst = !op->buffer;  // started with start_get_into: the bytes land in dst itself
  if (dst.size() != g.size() || (into_dst && op->direct != dst.data())) {
    op->direct = nullptr;
    return Status(EINVAL, "get from " + peer_ + ": finished with another destination than it was started with");
  }
  const bool done = op->cv.wait_until(lk, deadline, [&] { return op->done; });
  // Whatever happened, the caller's memory is not written after this
  // returns: the chunk handler copies into it only under mu, while set.
  op->direct = nullptr;
  if (!done)
    return Status(ETIMEDOUT, "get of " + std::to_string(dst.size()) + " bytes from " + peer_ + " missed its deadline");
  if (!op->result) return op->result.with_context("get from " + peer_);
  if (!into_dst) std::memcpy(dst.data(), op->buffer.get(), dst.size());
  return Status::ok();
}

// ---- UcxRegistration ---------------------------------------------------------

UcxRegistration::~UcxRegistration() {
  if (served_handle_ != 0) served_.remove(served_handle_);  // first: no reply copies from it after this
  if (memh_) ucp_mem_unmap(ctx_, memh_);
}

// ---- UcxFabric ---------------------------------------------------------------

Result<std::unique_ptr<Fabric>> Fabric::create(const FabricOptions& options, Handler handler) {
  auto f = UcxFabric::create(options, std::move(handler));
  if (!f) return f.status();
  return std::unique_ptr<Fabric>(std::move(f).value());
}

Result<std::unique_ptr<UcxFabric>> UcxFabric::create(const FabricOptions& options, Handler handler) {
  std::unique_ptr<UcxFabric> f(new UcxFabric());
  f->handler_ = std::move(handler);
  // Over TCP a get is emulated: the target sends the bytes back in segments of
  // UCX_TCP_TX_SEG_SIZE (8 KiB by default). 64 KiB segments measured ~3x the
  // get bandwidth for 1 MiB gets (tools/bench/ucx_baseline.sh); every daemon
  // sets the same, and the user's setting wins.
  ::setenv("UCX_TCP_TX_SEG_SIZE", "64K", 0);
  // One worker is shared by the progress thread and every thread that posts
  // a get. UCX guards it with a spinlock by default: on a host with few
  // cores a poster spun for as long as the progress thread held the worker
  // (running get handlers that copy up to 64 KiB each), 5% of the daemons'
  // time in the aggregate benchmark. A mutex lets the waiter sleep.
  ::setenv("UCX_USE_MT_MUTEX", "y", 0);
  ucp_config_t* config = nullptr;
  if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK) return ucx_error("UCX config", s);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  // UCP_FEATURE_WAKEUP lets the progress thread sleep until there is work
  // (the header). It narrows UCX's choice of transports only together with
  // UCP_FEATURE_TAG (UCX 1.13, wireup/select.c): shared memory stays in.
  const bool polling_forced = std::getenv("DLFS_TEST_ONLY_UCX_POLLING") != nullptr;
  std::string polling_why = polling_forced ? "DLFS_TEST_ONLY_UCX_POLLING is set" : "";
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | (polling_forced ? 0 : UCP_FEATURE_WAKEUP);
  params.mt_workers_shared = 1;
  ucs_status_t s = ucp_init(&params, config, &f->context_);
  if (s != UCS_OK && (params.features & UCP_FEATURE_WAKEUP)) {  // a UCX that cannot: poll
    polling_why = std::string("no UCX context with wake-up (") + ucs_status_string(s) + ")";
    params.features &= ~UCP_FEATURE_WAKEUP;
    s = ucp_init(&params, config, &f->context_);
  }
  ucp_config_release(config);
  if (s != UCS_OK) return ucx_error("UCX init (check UCX_TLS)", s);

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_MULTI;
  if ((s = ucp_worker_create(f->context_, &wp, &f->worker_)) != UCS_OK) return ucx_error("UCX worker", s);
  if (params.features & UCP_FEATURE_WAKEUP) {
    if (s = ucp_worker_get_efd(f->worker_, &f->worker_fd_); s != UCS_OK) {
      polling_why = std::string("no event fd from the UCX worker (") + ucs_status_string(s) + ")";
      f->worker_fd_ = -1;
    }
  }
  f->progress_mode_ = f->worker_fd_ >= 0 ? "event-driven (efd)" : "polling: " + polling_why;
  spdlog::info("transport: UCX progress: {}", f->progress_mode_);
  f->wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (f->wake_fd_ < 0) return Status(errno, std::string("eventfd for the UCX progress thread: ") + std::strerror(errno));

  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                  UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  hp.id = kMessageId;
  hp.cb = &UcxFabric::on_message;
  hp.arg = f.get();
  hp.flags = UCP_AM_FLAG_WHOLE_MSG;
  if ((s = ucp_worker_set_am_recv_handler(f->worker_, &hp)) != UCS_OK) return ucx_error("UCX message handler", s);
  DLFS_RETURN_IF_ERROR(set_am_get_handlers(f->worker_, f->served_, f->pending_gets_));
  f->gets_ = options.gets;

  f->progress_ = std::thread([p = f.get()] { p->progress_loop(); });
  auto control = ControlChannel::create(options, [p = f.get()](Message& m) { p->handler_(m); });
  if (!control) return control.status();
  f->control_ = std::move(control).value();
  return f;
}

UcxFabric::~UcxFabric() {
  control_.reset();  // no more messages to the handler
  stop_.store(true);
  wake();
  if (progress_.joinable()) progress_.join();
  if (worker_) ucp_worker_destroy(worker_);  // closes worker_fd_ too
  if (context_) ucp_cleanup(context_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

std::string UcxFabric::transports() const {
  ucp_context_attr_t a{};
  a.field_mask = UCP_ATTR_FIELD_NAME;
  if (ucp_context_query(context_, &a) != UCS_OK) return "?";
  const char* tls = std::getenv("UCX_TLS");
  return std::string("UCX ") + ucp_get_version_string() + ", UCX_TLS=" + (tls ? tls : "all") +
         ", progress " + progress_mode_;
}

void UcxFabric::wake() {
  // The counter only has to be non-zero: the progress thread drains it.
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

bool UcxFabric::wait_for_work(std::chrono::microseconds timeout) {
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {worker_fd_, POLLIN, 0}};
  const timespec ts{static_cast<time_t>(timeout.count() / 1000000), static_cast<long>(timeout.count() % 1000000 * 1000)};
  (void)::ppoll(fds, worker_fd_ >= 0 ? 2 : 1, &ts, nullptr);  // EINTR: the loop comes back
  wakeups_.fetch_add(1, std::memory_order_relaxed);
  if (!(fds[0].revents & POLLIN)) return false;
  uint64_t count;
  [[maybe_unused]] ssize_t n = ::read(wake_fd_, &count, sizeof count);  // drained before progressing
  return true;
}

void UcxFabric::progress_loop() {
  ::pthread_setname_np(::pthread_self(), "dlfs-ucx");
  using Clock = std::chrono::steady_clock;
  // After work, keep progressing a little before sleeping: the next chunk of
  // a get, or the next get, usually comes sooner than a sleeping thread
  // wakes on an idle core. Measured (dlfs-bench-fabric-get over tcp, one get
  // in flight, 2 idle cores): 30 us took 4 KiB gets from 78 to 19 us and 1
  // MiB gets from 2.2 to 2.6 GB/s. With every thread on one busy core it
  // costs them instead (4 KiB: 14 to 73 us; the polling before: 160 us).
  constexpr auto kSpinAfterWork = std::chrono::microseconds(30);
  // Event-driven: progress until the worker has nothing left, arm it, sleep
  // until an event or wake(). wake() comes after every post and the eventfd
  // is drained before progressing, so a post is never slept through. 1 s
  // bounds a sleep anyway: UCX arms only the interfaces that can raise
  // events and silently skips others (none among tcp, posix, sysv, cma).
  constexpr auto kSafetyTick = std::chrono::microseconds(1000000);
  // Polling: sleep in steps that double from 20 us to kMaxIdleSleep; wake()
  // ends a sleep and the back-off. A peer's request waits at most one step.
  constexpr auto kFirstSleep = std::chrono::microseconds(20);
  auto sleep = kFirstSleep;
  Clock::time_point last_work{};
  while (!stop_.load(std::memory_order_acquire)) {
    if (ucp_worker_progress(worker_) != 0) {
      last_work = Clock::now();
      sleep = kFirstSleep;
      continue;
    }
    if (Clock::now() - last_work < kSpinAfterWork) continue;
    if (worker_fd_ >= 0) {
      const ucs_status_t s = ucp_worker_arm(worker_);
      if (s == UCS_ERR_BUSY) continue;  // events came in meanwhile: progress them first
      if (s == UCS_OK) {
        wait_for_work(kSafetyTick);
        continue;
      }
      spdlog::warn("transport: UCX progress: arming the worker failed ({}): polling from now on", ucs_status_string(s));
      worker_fd_ = -1;  // only this thread reads it
      continue;
    }
    sleep = wait_for_work(sleep) ? kFirstSleep : std::min(sleep * 2, kMaxIdleSleep);
  }
}

ucs_status_t UcxFabric::on_message(void* arg, const void*, size_t, void* data, size_t length,
                                const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxFabric*>(arg);
  Message m;
  m.bytes.assign(static_cast<const char*>(data), length);
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) && param->reply_ep) {
    ucp_ep_h reply_ep = param->reply_ep;
    m.from = "a peer";
    m.reply = [self, reply_ep](const std::string& bytes) -> Status {
      auto* copy = new std::string(bytes);
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
      p.cb.send = send_done;
      p.user_data = copy;
      p.flags = UCP_AM_SEND_FLAG_EAGER;
      ucs_status_ptr_t r = ucp_am_send_nbx(reply_ep, kMessageId, nullptr, 0, copy->data(), copy->size(), &p);
      if (r == nullptr) delete copy;
      else if (UCS_PTR_IS_ERR(r)) {
        delete copy;
        return ucx_error("reply", UCS_PTR_STATUS(r));
      }
      (void)self;
      return Status::ok();
    };
  }
  try {
    self->handler_(m);
  } catch (const std::exception& e) {  // never across a C callback
    spdlog::error("transport: message handler failed: {}", e.what());
  }
  return UCS_OK;
}

Result<std::unique_ptr<Endpoint>> UcxFabric::connect(const std::string& host, uint16_t port,
                                                  std::function<void(const std::string& why)> on_failure) {
  return control_->connect(host, port, std::move(on_failure));
}

std::string UcxFabric::worker_address() const {
  ucp_address_t* a = nullptr;
  size_t len = 0;
  if (ucp_worker_get_address(worker_, &a, &len) != UCS_OK) return {};
  std::string out(reinterpret_cast<const char*>(a), len);
  ucp_worker_release_address(worker_, a);
  return out;
}

ucs_status_t UcxEndpoint::create(const std::string& address, ucp_err_handling_mode_t mode) {
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                 UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  p.address = reinterpret_cast<const ucp_address_t*>(address.data());
  p.err_mode = mode;
  p.err_handler.cb = &UcxEndpoint::on_error;
  p.err_handler.arg = this;
  return ucp_ep_create(fabric_.worker_, &p, &ep_);
}

Result<std::unique_ptr<Endpoint>> UcxFabric::connect_worker(const std::string& address, const std::string& peer,
                                                         std::function<void(const std::string& why)> on_failure) {
  if (address.empty()) return Status(EINVAL, "empty worker address from " + peer);
  std::unique_ptr<UcxEndpoint> e(new UcxEndpoint(*this, peer));
  e->on_failure_ = std::move(on_failure);
  // Peer-failure handling excludes shared-memory transports (UCX cannot
  // detect a dead peer on them), so it is dropped when they are asked for;
  // heartbeats over the connect()ed endpoint then notice a dead peer.
  const bool shm = shared_memory_requested();
  if (ucs_status_t s = e->create(address, shm ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER); s != UCS_OK)
    return ucx_error("data endpoint to " + peer, s);
  // The lanes are chosen at creation: they tell whether a get would be one-sided.
  e->am_gets_ = gets_ == GetMode::am || (gets_ == GetMode::automatic && !gets_are_one_sided(e->ucx_info()));
  if (e->am_gets_ && shm) {
    // Gets by message need peer-failure handling on both sides (the target's
    // reply endpoint inherits the mode): without it a reply to a dead asker
    // is as fatal as UCX's own. This peer has no shared memory with us anyway.
    ucp_ep_h none = std::exchange(e->ep_, nullptr);
    if (ucs_status_t s = e->create(address, UCP_ERR_HANDLING_MODE_PEER); s == UCS_OK) {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_EP_CLOSE_FLAG_FORCE;
      wait_request(ucp_ep_close_nbx(none, &p), std::chrono::seconds(2));
    } else {
      spdlog::warn("transport: data endpoint to {} without peer-failure handling ({}): if that peer dies in "
                   "the middle of a get, this node may abort", peer, ucs_status_string(s));
      e->ep_ = none;
    }
  }
  wake();
  return std::unique_ptr<Endpoint>(std::move(e));
}

Result<std::unique_ptr<Registration>> UcxFabric::register_memory(void* address, size_t length) {
  std::unique_ptr<UcxRegistration> r(new UcxRegistration(context_, served_));
  ucp_mem_map_params_t p{};
  p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  p.address = address;
  p.length = length;
  if (ucs_status_t s = ucp_mem_map(context_, &p, &r->memh_); s != UCS_OK)
    return ucx_error("registering " + std::to_string(length) + " bytes for remote reads", s);
  void* buf = nullptr;
  size_t size = 0;
  if (ucs_status_t s = ucp_rkey_pack(context_, r->memh_, &buf, &size); s != UCS_OK)
    return ucx_error("packing a remote key", s);
  r->rkey_.assign(static_cast<const char*>(buf), size);
  ucp_rkey_buffer_release(buf);
  r->address_ = reinterpret_cast<uint64_t>(address);
  r->served_handle_ = served_.add(static_cast<const std::byte*>(address), length);
  return std::unique_ptr<Registration>(std::move(r));
}

Result<uint64_t> UcxFabric::serve_tagged(const void* address, size_t length, uint64_t tag) {
  if (tag == 0)
    return Status(EINVAL, "serving " + std::to_string(length) + " bytes for tagged gets: tag 0 is an untagged get's");
  return served_.add(static_cast<const std::byte*>(address), length, tag);
}

// ServedMemory::remove waits for a reply packing from the range (it packs
// under the same lock) and every later pack of it fails: after this returns,
// the range's bytes are not read again.
void UcxFabric::unserve(uint64_t handle) { (void)served_.remove_tagged(handle); }

}  // namespace dlfs::transport
