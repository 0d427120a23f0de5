#include "transport/am_get.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <vector>

#include <spdlog/spdlog.h>

namespace dlfs::transport {
namespace {

// Active-message ids (kMessageId, 7, is the fabric's small messages).
constexpr unsigned kGetRequestId = 8;
constexpr unsigned kGetReplyId = 9;

struct GetRequest {
  uint64_t id;
  uint64_t address;
  uint64_t length;
};
struct GetReply {
  uint64_t id;
  int32_t err;  // 0, or why the target refused (errno)
  uint32_t reserved;
};

// A send's header and data live until the send completes (UCX 1.13 does not
// copy a header): they travel with the request as its user data.
struct OutgoingRequest {
  GetRequest header;
  PendingAmGets* pending;
};
struct OutgoingReply {
  GetReply header;
  ReplyBuffer data;
  size_t length = 0;
  ServedMemory* served = nullptr;  // takes the buffer back
  ~OutgoingReply() {
    if (data.bytes) served->recycle(std::move(data));
  }
};

// Replies are sent with a generic datatype, which UCX can only send by copy
// (bcopy): UCX 1.13's TCP transport, when the asker dies while a zero-copy
// send of a large message is in flight, completes the send twice and aborts
// on its own assertion (uct_iface.h, `comp->count > 0`; seen in
// fabric_kill_test). The copy costs little next to TCP. The state of a pack
// is the OutgoingReply itself.
void* reply_start_pack(void*, const void* buffer, size_t) { return const_cast<void*>(buffer); }
void* reply_start_unpack(void*, void*, size_t) { return nullptr; }  // never received as such
size_t reply_packed_size(void* state) { return static_cast<OutgoingReply*>(state)->length; }
size_t reply_pack(void* state, size_t offset, void* dest, size_t max_length) {
  const auto* out = static_cast<OutgoingReply*>(state);
  const size_t n = std::min(max_length, out->length - offset);
  if (n > 0) std::memcpy(dest, out->data.bytes.get() + offset, n);
  return n;
}
ucs_status_t reply_unpack(void*, size_t, const void*, size_t) { return UCS_ERR_UNSUPPORTED; }
void reply_finish(void*) {}

// One datatype for the process (UCX keeps it until exit; it holds no resources).
ucp_datatype_t reply_datatype() {
  static const ucp_datatype_t dt = [] {
    static const ucp_generic_dt_ops_t ops = {reply_start_pack, reply_start_unpack, reply_packed_size,
                                             reply_pack,       reply_unpack,       reply_finish};
    ucp_datatype_t d = 0;
    if (ucp_dt_create_generic(&ops, nullptr, &d) != UCS_OK) d = ucp_dt_make_contig(1);
    return d;
  }();
  return dt;
}

void request_sent(void* request, ucs_status_t status, void* user_data) {
  std::unique_ptr<OutgoingRequest> out(static_cast<OutgoingRequest*>(user_data));
  if (status != UCS_OK) {
    if (auto op = out->pending->take(out->header.id)) op->complete(ucx_error("sending the get request", status));
  }
  ucp_request_free(request);
}

void reply_sent(void* request, ucs_status_t status, void* user_data) {
  delete static_cast<OutgoingReply*>(user_data);
  // The asker went away (killed, closed): its get is lost with it, nothing to do.
  if (status != UCS_OK) spdlog::debug("transport: a get reply was not delivered: {}", ucs_status_string(status));
  ucp_request_free(request);
}

// Target side: serve a request if it reads memory this node offered.
ucs_status_t on_get_request(void* arg, const void* header, size_t header_length, void*, size_t,
                            const ucp_am_recv_param_t* param) {
  auto* served = static_cast<ServedMemory*>(arg);
  if (header_length != sizeof(GetRequest) || !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ||
      param->reply_ep == nullptr) {
    spdlog::warn("transport: malformed get request ignored ({} header bytes)", header_length);
    return UCS_OK;
  }
  GetRequest req;
  std::memcpy(&req, header, sizeof req);
  auto out = std::make_unique<OutgoingReply>();
  out->header = GetReply{req.id, 0, 0};
  out->served = served;
  if (req.length > kMaxAmGet) {
    out->header.err = EMSGSIZE;
  } else {
    out->data = served->copy(req.address, req.length);
    if (out->data.bytes) out->length = req.length;
    else out->header.err = EFAULT;
  }
  if (out->header.err != 0)
    spdlog::warn("transport: refused a get of {} bytes at {:#x}: {}", req.length, req.address,
                 out->header.err == EFAULT ? "outside the memory this node registered" : "larger than allowed");
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS |
                   UCP_OP_ATTR_FIELD_DATATYPE;
  p.cb.send = reply_sent;
  p.user_data = out.get();
  p.datatype = reply_datatype();
  // Eager: the asker's handler gets the whole reply at once (no rendezvous,
  // whose receive call and protocol would again involve the other side).
  p.flags = UCP_AM_SEND_FLAG_EAGER;
  ucs_status_ptr_t r =
      ucp_am_send_nbx(param->reply_ep, kGetReplyId, &out->header, sizeof out->header, out.get(), out->length, &p);
  if (r == nullptr || UCS_PTR_IS_ERR(r)) {
    if (UCS_PTR_IS_ERR(r)) spdlog::debug("transport: a get reply failed: {}", ucs_status_string(UCS_PTR_STATUS(r)));
    return UCS_OK;  // `out` is freed here: the send is done or never started
  }
  out.release();  // reply_sent frees it
  return UCS_OK;
}

// Asker side: complete the get a reply answers.
ucs_status_t on_get_reply(void* arg, const void* header, size_t header_length, void* data, size_t length,
                          const ucp_am_recv_param_t* param) {
  auto* pending = static_cast<PendingAmGets*>(arg);
  if (header_length != sizeof(GetReply)) return UCS_OK;
  GetReply rep;
  std::memcpy(&rep, header, sizeof rep);
  std::shared_ptr<GetOp> op = pending->take(rep.id);
  if (!op) return UCS_OK;  // its endpoint failed or closed meanwhile
  if (rep.err != 0) {
    op->complete(Status(rep.err, "the peer refused to serve " + std::to_string(op->size) + " bytes: " +
                                     (rep.err == EFAULT ? "not inside memory it registered" : std::strerror(rep.err))));
  } else if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) || length != op->size) {
    op->complete(Status(EPROTO, "get reply of " + std::to_string(length) + " bytes for a get of " +
                                    std::to_string(op->size)));
  } else {
    if (length > 0) std::memcpy(op->buffer.get(), data, length);
    op->complete(Status::ok());
  }
  return UCS_OK;
}

Status set_handler(ucp_worker_h worker, unsigned id, ucp_am_recv_callback_t cb, void* arg) {
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                  UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  hp.id = id;
  hp.cb = cb;
  hp.arg = arg;
  hp.flags = UCP_AM_FLAG_WHOLE_MSG;
  if (ucs_status_t s = ucp_worker_set_am_recv_handler(worker, &hp); s != UCS_OK)
    return ucx_error("UCX get handler", s);
  return Status::ok();
}

}  // namespace

Status ucx_error(const std::string& what, ucs_status_t s) {
  int err = s == UCS_ERR_NO_MEMORY ? ENOMEM : s == UCS_ERR_UNREACHABLE ? EHOSTUNREACH
            : s == UCS_ERR_TIMED_OUT ? ETIMEDOUT : s == UCS_ERR_BUSY ? EADDRINUSE : EIO;
  return Status(err, what + ": " + ucs_status_string(s));
}

void GetOp::complete(Status r) {
  {
    std::lock_guard lk(mu);
    if (done) return;
    done = true;
    result = std::move(r);
  }
  cv.notify_all();
}

bool gets_are_one_sided(const std::string& info) {
  // ucp_ep_print_info lists "lane[i]:  n:<transport>/<device> ..." and a
  // "get[i]: ..." protocol line per lane ucp_get may use. Shared-memory FIFOs
  // (posix, sysv) only reach memory UCX allocated itself, not memory the
  // user registered: a get of DLFS's stripes falls back to the emulation
  // there (measured: it stalls with a SIGSTOPped target), as over tcp.
  // cma, knem, xpmem and RDMA (rc, dc) read it without the target.
  std::map<std::string, std::string> lane_tl;  // "i" -> transport
  std::istringstream in(info);
  std::string line;
  std::vector<std::string> get_lanes;
  while (std::getline(in, line)) {
    const size_t lane = line.find("lane[");
    if (lane != std::string::npos) {
      const size_t close = line.find(']', lane);
      const size_t colon = line.find(':', close + 1);
      const size_t tl = line.find(':', colon + 1);
      const size_t slash = line.find('/', tl);
      if (close != std::string::npos && tl != std::string::npos && slash != std::string::npos)
        lane_tl[line.substr(lane + 5, close - lane - 5)] = line.substr(tl + 1, slash - tl - 1);
      continue;
    }
    const size_t get = line.find("get[");
    if (get != std::string::npos && line.find(']', get) != std::string::npos)
      get_lanes.push_back(line.substr(get + 4, line.find(']', get) - get - 4));
  }
  for (const auto& l : get_lanes) {
    auto it = lane_tl.find(l);
    if (it != lane_tl.end() && it->second != "tcp" && it->second != "posix" && it->second != "sysv" &&
        it->second != "self")
      return true;
  }
  return false;
}

uint64_t ServedMemory::add(const std::byte* address, size_t length) {
  std::lock_guard lk(mu_);
  ranges_[next_] = {reinterpret_cast<uint64_t>(address), length};
  return next_++;
}

void ServedMemory::remove(uint64_t handle) {
  std::lock_guard lk(mu_);
  ranges_.erase(handle);
}

ReplyBuffer ServedMemory::copy(uint64_t address, size_t length) {
  std::lock_guard lk(mu_);
  for (const auto& [handle, range] : ranges_) {
    const auto [begin, size] = range;
    // Written so that no sum can overflow: address and length come from a peer.
    if (address >= begin && address - begin <= size && length <= size - (address - begin)) {
      ReplyBuffer out;
      {
        std::lock_guard pl(pool_mu_);
        auto fit = std::find_if(pool_.begin(), pool_.end(), [&](const ReplyBuffer& b) { return b.capacity >= length; });
        if (fit != pool_.end()) {
          out = std::move(*fit);
          pool_.erase(fit);
          pooled_bytes_ -= out.capacity;
        }
      }
      if (!out.bytes) out = {std::make_unique_for_overwrite<std::byte[]>(std::max<size_t>(length, 1)), length};
      if (length > 0) std::memcpy(out.bytes.get(), reinterpret_cast<const std::byte*>(address), length);
      return out;
    }
  }
  return {};
}

namespace {
// Buffers of sizes from 64 KiB up, by power-of-two class; at most
// kGetPoolBytes kept (a reader's batch of 1 MiB gets in flight fits).
constexpr size_t kGetPoolBytes = 64u << 20;
constexpr size_t kSmallestPooled = 64u << 10;
std::mutex get_pool_mu;
std::vector<std::pair<size_t, std::unique_ptr<std::byte[]>>> get_pool;  // (capacity, buffer)
size_t get_pool_bytes = 0;

size_t size_class(size_t n) { return n <= kSmallestPooled ? kSmallestPooled : std::bit_ceil(n); }
}  // namespace

std::unique_ptr<std::byte[]> take_get_buffer(size_t n, size_t& capacity) {
  if (n < kSmallestPooled / 2) {  // small: malloc is cheap below the mmap threshold
    capacity = 0;
    return std::make_unique_for_overwrite<std::byte[]>(n);
  }
  capacity = size_class(n);
  {
    std::lock_guard lk(get_pool_mu);
    for (auto it = get_pool.begin(); it != get_pool.end(); ++it)
      if (it->first == capacity) {
        auto b = std::move(it->second);
        get_pool.erase(it);
        get_pool_bytes -= capacity;
        return b;
      }
  }
  return std::make_unique_for_overwrite<std::byte[]>(capacity);
}

void give_get_buffer(std::unique_ptr<std::byte[]> buffer, size_t capacity) {
  if (!buffer || capacity == 0) return;
  std::lock_guard lk(get_pool_mu);
  if (get_pool_bytes + capacity > kGetPoolBytes) return;  // freed here
  get_pool_bytes += capacity;
  get_pool.emplace_back(capacity, std::move(buffer));
}

void ServedMemory::recycle(ReplyBuffer buffer) {
  std::lock_guard pl(pool_mu_);
  if (!buffer.bytes || pool_.size() >= kPoolBuffers || pooled_bytes_ + buffer.capacity > kPoolBytes)
    return;  // freed here
  pooled_bytes_ += buffer.capacity;
  pool_.push_back(std::move(buffer));
}

uint64_t PendingAmGets::add(std::shared_ptr<GetOp> op, const void* endpoint) {
  std::lock_guard lk(mu_);
  ops_.emplace(next_, std::make_pair(std::move(op), endpoint));
  return next_++;
}

std::shared_ptr<GetOp> PendingAmGets::take(uint64_t id) {
  std::lock_guard lk(mu_);
  auto it = ops_.find(id);
  if (it == ops_.end()) return nullptr;
  auto op = std::move(it->second.first);
  ops_.erase(it);
  return op;
}

void PendingAmGets::fail_all(const void* endpoint, const Status& why) {
  std::vector<std::shared_ptr<GetOp>> failed;
  {
    std::lock_guard lk(mu_);
    for (auto it = ops_.begin(); it != ops_.end();) {
      if (it->second.second != endpoint) {
        ++it;
        continue;
      }
      failed.push_back(std::move(it->second.first));
      it = ops_.erase(it);
    }
  }
  for (auto& op : failed) op->complete(why);  // outside mu_: a waiter may take it next
}

Status set_am_get_handlers(ucp_worker_h worker, ServedMemory& served, PendingAmGets& pending) {
  DLFS_RETURN_IF_ERROR(set_handler(worker, kGetRequestId, on_get_request, &served));
  return set_handler(worker, kGetReplyId, on_get_reply, &pending);
}

void post_am_get(ucp_ep_h ep, PendingAmGets& pending, const void* endpoint, const std::shared_ptr<GetOp>& op,
                 uint64_t remote_address) {
  auto out = std::make_unique<OutgoingRequest>();
  out->pending = &pending;
  out->header = GetRequest{pending.add(op, endpoint), remote_address, op->size};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.cb.send = request_sent;
  p.user_data = out.get();
  p.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY;
  ucs_status_ptr_t r = ucp_am_send_nbx(ep, kGetRequestId, &out->header, sizeof out->header, nullptr, 0, &p);
  if (r == nullptr) return;  // sent; `out` is no longer needed
  if (UCS_PTR_IS_ERR(r)) {
    if (auto failed = pending.take(out->header.id)) failed->complete(ucx_error("sending the get request", UCS_PTR_STATUS(r)));
    return;
  }
  out.release();  // request_sent frees it
}

}  // namespace dlfs::transport
