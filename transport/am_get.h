// Gets served with active messages: what the UCX fabric does instead of
// ucp_get where UCX would only emulate a get (the TCP transport).
//
// Why: over TCP, UCX 1.13 serves a peer's ucp_get inside its own progress
// (ucp/rma/rma_sw.c) and treats a failed reply send as fatal, so an asker
// killed in the middle of a get aborts the node that serves it. Here DLFS
// asks and answers itself, and a failed reply is just a failed send:
//   asker:  AM kGetRequest, header {id, address, length}, on its worker
//           endpoint (created with peer-failure handling), flag REPLY;
//   target: the handler (progress thread, never blocks) copies the bytes if
//           [address, address + length) lies inside one range this node
//           registered (ServedMemory), and answers on the reply endpoint
//           with AM kGetReply, header {id, errno}, data: the bytes (eager,
//           received whole: no rendezvous, no receive call);
//   asker:  the reply handler finds the GetOp by id (PendingAmGets) and
//           completes it; an endpoint that fails or closes completes all of
//           its gets with an error.
// A GetOp keeps its buffer until then, whether or not its caller still
// waits: the caller's destination is never written late.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <ucp/api/ucp.h>

#include "common/status.h"
#include "transport/fabric.h"

namespace dlfs::transport {

// The one mapping of a UCX status to a Status (errno and UCX's words).
Status ucx_error(const std::string& what, ucs_status_t s);

// One get in flight (either path), shared by the caller and whoever
// completes it, so that a caller that gave up leaves the buffer to it.
// Get buffers are recycled, as reply buffers are (ServedMemory): dlfsd keeps
// blocks over 128 KiB mmapped (fs/main.cc), so a fresh 1 MiB buffer per get
// cost 256 page faults and an munmap on the asker's side too.
std::unique_ptr<std::byte[]> take_get_buffer(size_t n, size_t& capacity);
void give_get_buffer(std::unique_ptr<std::byte[]> buffer, size_t capacity);

struct GetOp : Endpoint::PendingGet::Op {
  explicit GetOp(size_t n) : size(n), buffer(take_get_buffer(n, capacity)) {}
  ~GetOp() override { give_get_buffer(std::move(buffer), capacity); }
  void complete(Status result);  // once; later calls are ignored
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status result;
  const size_t size;
  size_t capacity = 0;
  std::unique_ptr<std::byte[]> buffer;
};

// Whether an endpoint's description (ucp_ep_print_info) shows a get lane on
// a transport that reads registered user memory one-sided (cma, knem, xpmem,
// RDMA). Without one (tcp, posix/sysv shared memory), UCX emulates ucp_get
// and the target serves it.
bool gets_are_one_sided(const std::string& endpoint_info);

// A reply's copy of the bytes asked for.
struct ReplyBuffer {
  std::unique_ptr<std::byte[]> bytes;  // null: refused
  size_t capacity = 0;
};

// The memory this node offers for gets: the ranges given to register_memory.
// A peer may read inside one of them, nothing else. Replies are copies, in
// buffers that are recycled: a fresh 1 MiB block from mmap costs 256 page
// faults, which halved the bandwidth of 1 MiB gets on the test machine.
class ServedMemory {
 public:
  uint64_t add(const std::byte* address, size_t length);  // a handle for remove()
  void remove(uint64_t handle);  // after it returns, no copy reads the range
  // A copy of [address, address + length) if it lies inside one range.
  ReplyBuffer copy(uint64_t address, size_t length);
  void recycle(ReplyBuffer buffer);  // the reply was sent (or failed)
 private:
  static constexpr size_t kPoolBytes = 64u << 20;  // kept for reuse at most,
  static constexpr size_t kPoolBuffers = 64;        // in this many buffers
  mutable std::mutex mu_;  // held during copies: remove() waits for them
  uint64_t next_ = 1;
  std::map<uint64_t, std::pair<uint64_t, size_t>> ranges_;  // handle -> (address, length)
  std::mutex pool_mu_;
  std::vector<ReplyBuffer> pool_;
  size_t pooled_bytes_ = 0;
};

// The gets this node asked for by active message and awaits replies to.
class PendingAmGets {
 public:
  uint64_t add(std::shared_ptr<GetOp> op, const void* endpoint);  // its request id
  std::shared_ptr<GetOp> take(uint64_t id);                      // null if gone
  void fail_all(const void* endpoint, const Status& why);        // the endpoint failed or closed
 private:
  std::mutex mu_;
  uint64_t next_ = 1;
  std::unordered_map<uint64_t, std::pair<std::shared_ptr<GetOp>, const void*>> ops_;
};

// The largest get served by active message (a reply is copied into its own
// buffer): bounds what one request can make the target allocate.
constexpr size_t kMaxAmGet = 256u << 20;

// Installs the request and reply handlers on `worker` (both tables must
// outlive it).
Status set_am_get_handlers(ucp_worker_h worker, ServedMemory& served, PendingAmGets& pending);

// Posts the request for `op` (at most kMaxAmGet bytes; registered in
// `pending` for `endpoint`); a failure completes `op`.
void post_am_get(ucp_ep_h ep, PendingAmGets& pending, const void* endpoint, const std::shared_ptr<GetOp>& op,
                 uint64_t remote_address);

}  // namespace dlfs::transport
