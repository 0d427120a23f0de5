// Gets served with active messages: what the UCX fabric does instead of
// ucp_get where UCX would only emulate a get (the TCP transport).
//
// Why: over TCP, UCX 1.13 serves a peer's ucp_get inside its own progress
// (ucp/rma/rma_sw.c) and treats a failed reply send as fatal, so an asker
// killed in the middle of a get aborts the node that serves it. Here DLFS
// asks and answers itself, and a failed reply is just a failed send:
//   asker:  AM kGetRequest, header {id, address, length, tag}, on its
//           worker endpoint (created with peer-failure handling), flag REPLY;
//   target: the handler (progress thread, never blocks) checks that
//           [address, address + length) lies inside one range this node
//           serves for that tag (ServedMemory: tag 0 any range, as the
//           registered stripes; another tag only a range served with
//           exactly that tag, else ESTALE) and answers on the reply endpoint with
//           AM kGetChunk messages, header {id, offset, errno}, each carrying
//           up to kReplyChunk bytes packed straight from the registered
//           memory when UCX sends it (one copy, into UCX's send buffer),
//           followed by a trailer word that says whether the range was
//           still registered when the bytes were packed (else they are not
//           the stripe's); a refusal is one chunk with errno and no data;
//   asker:  the chunk handler finds the GetOp by id (PendingAmGets) and
//           copies the bytes into place (eager, received whole: no
//           rendezvous, no receive call); the get completes when every byte
//           arrived; an endpoint that fails or closes completes all of its
//           gets with an error.
// Tagged gets (Endpoint::start_get_tagged) serve round buffers, memory whose
// contents change from round to round at the same addresses: a get for tag t
// either returns bytes packed while the range was served with tag t, or fails
// with ESTALE (refused, or the range was unserved while replying). They always
// go by message, also on endpoints that get one-sided: ucp_get cannot check.
// Chunks fit one TCP segment of UCX's (dlfsd sets 64 KiB), so UCX hands each
// to the handler where it received it instead of first reassembling a whole
// reply in a buffer of its own.
// "Into place" is the caller's own memory while it waits (start_get_into),
// else the GetOp's buffer, or nowhere once the caller gave up: the caller's
// destination is never written after finish_get returned or the get was dropped.
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
// Get buffers are recycled (take_get_buffer): dlfsd keeps blocks over 128 KiB
// mmapped (fs/daemon/main.cc), so a fresh 1 MiB buffer per get cost 256 page faults
// and an munmap. A get into the caller's memory has no buffer at all.
std::unique_ptr<std::byte[]> take_get_buffer(size_t n, size_t& capacity);
void give_get_buffer(std::unique_ptr<std::byte[]> buffer, size_t capacity);

struct GetOp : Endpoint::PendingGet::Op {
  // direct: the caller's memory (start_get_into), written only while it waits.
  explicit GetOp(size_t n, std::byte* direct_to = nullptr);
  ~GetOp() override { give_get_buffer(std::move(buffer), capacity); }
  void complete(Status result);  // once; later calls are ignored
  void abandon() override;       // the caller gave up: no write to its memory after this returns
  // Copies bytes [offset, offset + n) of the reply into place (the caller's
  // memory, else the buffer, else nowhere); false if they do not fit the get.
  // all_arrived: every byte of the get has now been delivered.
  bool deliver(size_t offset, const std::byte* data, size_t n, bool& all_arrived);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status result;
  const size_t size;
  size_t capacity = 0;
  std::unique_ptr<std::byte[]> buffer;  // null for a get into the caller's memory
  std::byte* direct = nullptr;          // the caller's memory; null once it stopped waiting
  size_t received = 0;                  // bytes delivered so far (gets by message)
  uint64_t tag = 0;                     // a tagged get's (0: untagged), sent with its request
};

// Whether an endpoint's description (ucp_ep_print_info) shows a get lane on
// a transport that reads registered user memory one-sided (cma, knem, xpmem,
// RDMA). Without one (tcp, posix/sysv shared memory), UCX emulates ucp_get
// and the target serves it.
bool gets_are_one_sided(const std::string& endpoint_info);

// The memory this node offers for gets: the ranges given to register_memory
// (untagged) and to Fabric::serve_tagged (tagged: a round's bytes, which
// another round's replace later at the same addresses). A peer may read inside
// one of them, nothing else. Replies are packed from it when UCX sends them,
// possibly after the request's handler returned, so every read checks that
// its range is still listed, under the lock that remove() takes: after
// remove() returns, nothing reads the range. Handles are never reused, so a
// range removed and added again with the next round's tag is another range:
// reads of the old handle fail from the removal on.
class ServedMemory {
 public:
  uint64_t add(const std::byte* address, size_t length, uint64_t tag = 0);  // a handle for remove()
  void remove(uint64_t handle);
  // remove() for Fabric::unserve: only a tagged range (never a
  // registration's); false if `handle` is not one.
  bool remove_tagged(uint64_t handle);
  // The handle of a range that holds [address, address + length) for a get
  // with `tag`, or 0: only a range served with exactly that tag (0: an
  // untagged range, never a round's).
  uint64_t find(uint64_t address, size_t length, uint64_t tag = 0) const;
  // Copies n bytes at `address` (inside range `handle`, as find() said) to
  // dst, if that range is still listed; false if it was removed meanwhile.
  // Counts the bytes toward served_bytes(handle).
  bool read(uint64_t handle, uint64_t address, size_t n, std::byte* dst) const;
  uint64_t served_bytes(uint64_t handle) const;  // read() of it so far; 0 if not listed
 private:
  struct Range {
    uint64_t address;
    size_t length;
    uint64_t tag;  // 0: untagged
    mutable uint64_t bytes_read = 0;
  };
  mutable std::mutex mu_;  // held during reads: remove() waits for them
  uint64_t next_ = 1;
  std::map<uint64_t, Range> ranges_;  // by handle
};

// The gets this node asked for by active message and awaits replies to.
class PendingAmGets {
 public:
  uint64_t add(std::shared_ptr<GetOp> op, const void* endpoint);  // its request id
  std::shared_ptr<GetOp> find(uint64_t id);                      // null if gone
  std::shared_ptr<GetOp> take(uint64_t id);                      // null if gone
  void fail_all(const void* endpoint, const Status& why);        // the endpoint failed or closed
  size_t size();                                                  // gets awaiting replies (tests)
 private:
  std::mutex mu_;
  uint64_t next_ = 1;
  std::unordered_map<uint64_t, std::pair<std::shared_ptr<GetOp>, const void*>> ops_;
};

// The bytes of reply data per chunk: with its headers and trailer, one 64 KiB
// segment of UCX's TCP transport (UCX_TCP_TX_SEG_SIZE, which dlfsd sets).
constexpr size_t kReplyChunk = 60u << 10;

// The largest get served by active message: bounds the chunks one request
// can make the target queue.
constexpr size_t kMaxAmGet = 256u << 20;

// Installs the request and reply handlers on `worker` (both tables must
// outlive it).
Status set_am_get_handlers(ucp_worker_h worker, ServedMemory& served, PendingAmGets& pending);

// Posts the request for `op` (at most kMaxAmGet bytes, with op->tag;
// registered in `pending` for `endpoint`); a failure completes `op`.
void post_am_get(ucp_ep_h ep, PendingAmGets& pending, const void* endpoint, const std::shared_ptr<GetOp>& op,
                 uint64_t remote_address);

}  // namespace dlfs::transport
