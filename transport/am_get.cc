#include "transport/am_get.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <type_traits>
#include <vector>

#include <spdlog/spdlog.h>

namespace dlfs::transport {
namespace {

// Active-message ids (kMessageId, 7, is the fabric's small messages). The
// chunked replies took new ids (the whole-reply protocol used 8 and 9), so a
// node of an older build ignores them instead of misreading them.
constexpr unsigned kGetRequestId = 10;
constexpr unsigned kGetChunkId = 11;

// The request's header as it travels: four words, no padding (checked below),
// so both sides read the same layout. The tag made it 32 bytes: a 24-byte
// request (an older build's) is refused as malformed, never misread.
struct GetRequest {
  uint64_t id;
  uint64_t address;
  uint64_t length;
  uint64_t tag;  // 0: an untagged get
};
static_assert(std::is_trivially_copyable_v<GetRequest> && sizeof(GetRequest) == 32 &&
              offsetof(GetRequest, address) == 8 && offsetof(GetRequest, length) == 16 &&
              offsetof(GetRequest, tag) == 24);
struct GetChunk {
  uint64_t id;
  uint64_t offset;  // of this chunk's bytes in the get
  int32_t err;      // 0, or why the target refused (errno): no data then
  uint32_t reserved;
};

// The word after a chunk's data: whether the data was packed from the
// registered range (kPacked) or the range had been removed meanwhile.
constexpr uint64_t kPacked = 0x444c46532d6f6b21ull;     // "DLFS-ok!"
constexpr uint64_t kWithdrawn = 0x444c46532d676f6eull;  // "DLFS-gon"
constexpr size_t kTrailer = sizeof(uint64_t);

// A send's header and data live until the send completes (UCX 1.13 does not
// copy a header): they travel with the request as its user data.
struct OutgoingRequest {
  GetRequest header;
  PendingAmGets* pending;
};
struct OutgoingChunk {
  GetChunk header;
  const ServedMemory* served = nullptr;
  uint64_t handle = 0;   // the range the data lies in
  uint64_t address = 0;  // of the chunk's first byte
  size_t length = 0;     // data bytes (0 for a refusal)
  bool withdrawn = false;
  size_t packed_size() const { return header.err != 0 ? 0 : length + kTrailer; }
};

// Chunks are sent with a generic datatype, which UCX can only send by copy
// (bcopy): UCX 1.13's TCP transport, when the asker dies while a zero-copy
// send of a large message is in flight, completes the send twice and aborts
// on its own assertion (uct_iface.h, `comp->count > 0`; seen in
// fabric_kill_test). That copy is the only one on this side: the pack reads
// the registered memory itself (ServedMemory::read). The state of a pack is
// the OutgoingChunk; UCX packs in order, so the trailer comes after the data.
void* chunk_start_pack(void*, const void* buffer, size_t) { return const_cast<void*>(buffer); }
void* chunk_start_unpack(void*, void*, size_t) { return nullptr; }  // never received as such
size_t chunk_packed_size(void* state) { return static_cast<OutgoingChunk*>(state)->packed_size(); }
size_t chunk_pack(void* state, size_t offset, void* dest, size_t max_length) {
  auto* out = static_cast<OutgoingChunk*>(state);
  auto* to = static_cast<std::byte*>(dest);
  const size_t total = out->packed_size();
  if (offset >= total) return 0;
  const size_t n = std::min(max_length, total - offset);
  size_t done = 0;
  if (offset < out->length) {
    done = std::min(n, out->length - offset);
    if (!out->served->read(out->handle, out->address + offset, done, to)) {
      std::memset(to, 0, done);
      out->withdrawn = true;
    }
  }
  if (done < n) {
    const uint64_t word = out->withdrawn ? kWithdrawn : kPacked;
    const size_t at = offset + done - out->length;  // into the trailer
    std::memcpy(to + done, reinterpret_cast<const std::byte*>(&word) + at, n - done);
  }
  return n;
}
ucs_status_t chunk_unpack(void*, size_t, const void*, size_t) { return UCS_ERR_UNSUPPORTED; }
void chunk_finish(void*) {}

// One datatype for the process (UCX keeps it until exit; it holds no resources).
ucp_datatype_t chunk_datatype() {
  static const ucp_datatype_t dt = [] {
    static const ucp_generic_dt_ops_t ops = {chunk_start_pack, chunk_start_unpack, chunk_packed_size,
                                             chunk_pack,       chunk_unpack,       chunk_finish};
    ucp_datatype_t d = 0;
    if (ucp_dt_create_generic(&ops, nullptr, &d) != UCS_OK) d = 0;
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

void chunk_sent(void* request, ucs_status_t status, void* user_data) {
  delete static_cast<OutgoingChunk*>(user_data);
  // The asker went away (killed, closed): its get is lost with it, nothing to do.
  if (status != UCS_OK) spdlog::debug("transport: a get reply was not delivered: {}", ucs_status_string(status));
  ucp_request_free(request);
}

// Sends one chunk (or a refusal); false if the send failed at once.
bool send_chunk(ucp_ep_h reply_ep, std::unique_ptr<OutgoingChunk> out) {
  const ucp_datatype_t dt = chunk_datatype();
  if (dt == 0) return false;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS |
                   UCP_OP_ATTR_FIELD_DATATYPE;
  p.cb.send = chunk_sent;
  p.user_data = out.get();
  p.datatype = dt;
  // Eager: the asker's handler gets the whole chunk at once (no rendezvous,
  // whose receive call and protocol would again involve the other side).
  p.flags = UCP_AM_SEND_FLAG_EAGER;
  // A generic datatype's count is the number of packed bytes.
  ucs_status_ptr_t r =
      ucp_am_send_nbx(reply_ep, kGetChunkId, &out->header, sizeof out->header, out.get(), out->packed_size(), &p);
  if (r == nullptr) return true;  // sent (packed already); `out` is freed here
  if (UCS_PTR_IS_ERR(r)) {
    spdlog::debug("transport: a get reply failed: {}", ucs_status_string(UCS_PTR_STATUS(r)));
    return false;
  }
  out.release();  // chunk_sent frees it
  return true;
}

// Why the target refuses a request (errno), or 0 with the range's handle.
int check_request(const ServedMemory& served, const GetRequest& req, uint64_t& handle) {
  if (req.length > kMaxAmGet) return EMSGSIZE;
  if ((handle = served.find(req.address, req.length, req.tag)) != 0) return 0;
  // A tagged get that finds no range with its tag asked for another round
  // than the one served there now (or none yet): the asker tells this from
  // a bad address by the errno.
  return req.tag != 0 ? ESTALE : EFAULT;
}

void log_refusal(const GetRequest& req, int err) {
  if (err == ESTALE) {  // an asker a round ahead or behind: part of the protocol, not a fault
    spdlog::debug("transport: refused a get of {} bytes at {:#x} with tag {}: no range served with that tag holds it",
                  req.length, req.address, req.tag);
    return;
  }
  spdlog::warn("transport: refused a get of {} bytes at {:#x}: {}", req.length, req.address,
               err == EFAULT ? "outside the memory this node registered" : "larger than allowed");
}

// Target side: serve a request if it reads memory this node offered.
ucs_status_t on_get_request(void* arg, const void* header, size_t header_length, void*, size_t,
                            const ucp_am_recv_param_t* param) {
  const auto* served = static_cast<const ServedMemory*>(arg);
  if (header_length != sizeof(GetRequest) || !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ||
      param->reply_ep == nullptr) {
    spdlog::warn("transport: malformed get request ignored ({} header bytes)", header_length);
    return UCS_OK;
  }
  GetRequest req;
  std::memcpy(&req, header, sizeof req);
  uint64_t handle = 0;
  if (const int err = check_request(*served, req, handle); err != 0) {
    log_refusal(req, err);
    auto out = std::make_unique<OutgoingChunk>();
    out->header = GetChunk{req.id, 0, err, 0};
    send_chunk(param->reply_ep, std::move(out));
    return UCS_OK;
  }
  uint64_t offset = 0;
  do {  // a get of 0 bytes still gets one (empty) chunk
    auto out = std::make_unique<OutgoingChunk>();
    out->length = std::min<uint64_t>(kReplyChunk, req.length - offset);
    out->header = GetChunk{req.id, offset, 0, 0};
    out->served = served;
    out->handle = handle;
    out->address = req.address + offset;
    if (!send_chunk(param->reply_ep, std::move(out))) break;  // the endpoint is gone: the asker's get fails there
    offset += std::min<uint64_t>(kReplyChunk, req.length - offset);
  } while (offset < req.length);
  return UCS_OK;
}

// The asker's words for the target's refusal of `op`.
Status refusal(const GetOp& op, int err) {
  const std::string what = "the peer refused to serve " + std::to_string(op.size) + " bytes";
  if (err == ESTALE)
    return Status(ESTALE, what + " with tag " + std::to_string(op.tag) +
                              ": no range it serves with that tag holds them (not this round)");
  return Status(err, what + ": " + (err == EFAULT ? "not inside memory it registered" : std::strerror(err)));
}

// A chunk packed after its range was removed: for a tagged get, the round
// ended while the target replied (ESTALE, as a refusal: not this round).
Status withdrawal(const GetOp& op) {
  if (op.tag != 0)
    return Status(ESTALE, "the peer stopped serving tag " + std::to_string(op.tag) +
                              " while replying (not this round any more)");
  return Status(EIO, "the peer withdrew the memory while replying");
}

// Asker side: put a chunk's bytes in place; complete the get when all arrived.
ucs_status_t on_get_chunk(void* arg, const void* header, size_t header_length, void* data, size_t length,
                          const ucp_am_recv_param_t* param) {
  auto* pending = static_cast<PendingAmGets*>(arg);
  if (header_length != sizeof(GetChunk)) return UCS_OK;
  GetChunk rep;
  std::memcpy(&rep, header, sizeof rep);
  std::shared_ptr<GetOp> op = pending->find(rep.id);
  if (!op) return UCS_OK;  // its endpoint failed or closed meanwhile, or an earlier chunk failed it
  auto fail = [&](Status why) {
    pending->take(rep.id);
    op->complete(std::move(why));
  };
  if (rep.err != 0) {
    fail(refusal(*op, rep.err));
    return UCS_OK;
  }
  const auto* bytes = static_cast<const std::byte*>(data);
  uint64_t trailer = 0;
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) || length < kTrailer) {
    fail(Status(EPROTO, "get reply chunk of " + std::to_string(length) + " bytes is malformed"));
    return UCS_OK;
  }
  std::memcpy(&trailer, bytes + length - kTrailer, kTrailer);
  if (trailer != kPacked) {
    fail(trailer == kWithdrawn ? withdrawal(*op) : Status(EIO, "get reply chunk without its trailer"));
    return UCS_OK;
  }
  bool all = false;
  if (!op->deliver(rep.offset, bytes, length - kTrailer, all)) {
    fail(Status(EPROTO, "get reply chunk at " + std::to_string(rep.offset) + " of " +
                            std::to_string(length - kTrailer) + " bytes for a get of " + std::to_string(op->size)));
    return UCS_OK;
  }
  if (all && pending->take(rep.id)) op->complete(Status::ok());
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

GetOp::GetOp(size_t n, std::byte* direct_to) : size(n), direct(direct_to) {
  if (direct == nullptr) buffer = take_get_buffer(n, capacity);
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

void GetOp::abandon() {
  std::lock_guard lk(mu);
  direct = nullptr;
}

bool GetOp::deliver(size_t offset, const std::byte* data, size_t n, bool& all_arrived) {
  std::lock_guard lk(mu);
  // Written so that no sum can overflow: offset and n come from a peer.
  if (offset > size || n > size - offset || n > size - received) return false;
  if (!done && n > 0) {
    if (direct != nullptr) std::memcpy(direct + offset, data, n);
    else if (buffer) std::memcpy(buffer.get() + offset, data, n);
  }
  received += n;
  all_arrived = received == size;
  return true;
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

uint64_t ServedMemory::add(const std::byte* address, size_t length, uint64_t tag) {
  std::lock_guard lk(mu_);
  ranges_[next_] = Range{reinterpret_cast<uint64_t>(address), length, tag};
  return next_++;
}

void ServedMemory::remove(uint64_t handle) {
  std::lock_guard lk(mu_);
  ranges_.erase(handle);
}

bool ServedMemory::remove_tagged(uint64_t handle) {
  std::lock_guard lk(mu_);
  auto it = ranges_.find(handle);
  if (it == ranges_.end() || it->second.tag == 0) return false;
  ranges_.erase(it);
  return true;
}

uint64_t ServedMemory::find(uint64_t address, size_t length, uint64_t tag) const {
  std::lock_guard lk(mu_);
  for (const auto& [handle, range] : ranges_) {
    // Exactly its tag: an untagged get never reads a round's slot (whose
    // bytes change with the round), a tagged one only its round's.
    if (range.tag != tag) continue;
    // Written so that no sum can overflow: address and length come from a peer.
    const bool holds = address >= range.address && address - range.address <= range.length &&
                       length <= range.length - (address - range.address);
    if (holds) return handle;
  }
  return 0;
}

bool ServedMemory::read(uint64_t handle, uint64_t address, size_t n, std::byte* dst) const {
  std::lock_guard lk(mu_);
  auto it = ranges_.find(handle);
  if (it == ranges_.end()) return false;
  const uint64_t begin = it->second.address;
  const size_t size = it->second.length;
  if (address < begin || address - begin > size || n > size - (address - begin)) return false;
  if (n > 0) std::memcpy(dst, reinterpret_cast<const std::byte*>(address), n);
  it->second.bytes_read += n;
  return true;
}

uint64_t ServedMemory::served_bytes(uint64_t handle) const {
  std::lock_guard lk(mu_);
  auto it = ranges_.find(handle);
  return it == ranges_.end() ? 0 : it->second.bytes_read;
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

uint64_t PendingAmGets::add(std::shared_ptr<GetOp> op, const void* endpoint) {
  std::lock_guard lk(mu_);
  ops_.emplace(next_, std::make_pair(std::move(op), endpoint));
  return next_++;
}

std::shared_ptr<GetOp> PendingAmGets::find(uint64_t id) {
  std::lock_guard lk(mu_);
  auto it = ops_.find(id);
  return it == ops_.end() ? nullptr : it->second.first;
}

size_t PendingAmGets::size() {
  std::lock_guard lk(mu_);
  return ops_.size();
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
  if (chunk_datatype() == 0) return Status(ENOMEM, "UCX get reply datatype: ucp_dt_create_generic failed");
  DLFS_RETURN_IF_ERROR(set_handler(worker, kGetRequestId, on_get_request, &served));
  return set_handler(worker, kGetChunkId, on_get_chunk, &pending);
}

void post_am_get(ucp_ep_h ep, PendingAmGets& pending, const void* endpoint, const std::shared_ptr<GetOp>& op,
                 uint64_t remote_address) {
  auto out = std::make_unique<OutgoingRequest>();
  out->pending = &pending;
  out->header = GetRequest{pending.add(op, endpoint), remote_address, op->size, op->tag};
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
