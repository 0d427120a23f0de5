#include "fs/fuse_uring.h"

#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <sys/sysinfo.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>

namespace dlfs::fs {
namespace {

// The wire bits of the FUSE io_uring ABI (7.42) that Debian 12's headers
// lack: include/uapi/linux/fuse.h.
constexpr size_t kInHeaderSize = 40;    // struct fuse_in_header
constexpr size_t kOutHeaderSize = 16;   // struct fuse_out_header
constexpr uint32_t kCmdRegister = 1;    // FUSE_IO_URING_CMD_REGISTER
constexpr uint32_t kCmdCommitAndFetch = 2;  // FUSE_IO_URING_CMD_COMMIT_AND_FETCH
struct CmdReq {                         // struct fuse_uring_cmd_req, in the SQE's command area
  uint64_t flags;
  uint64_t commit_id;
  uint16_t qid;
  uint8_t padding[6];
};
struct EntInOut {                       // struct fuse_uring_ent_in_out
  uint64_t flags;
  uint64_t commit_id;
  uint32_t payload_sz;
  uint32_t padding;
  uint64_t reserved;
};
static_assert(sizeof(EntInOut) == 32 && kUringEntOffset + sizeof(EntInOut) == kUringHeaderSize);

template <typename T>
T load(const void* base, size_t off) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + off, sizeof v);
  return v;
}
template <typename T>
void store(void* base, size_t off, T v) {
  std::memcpy(static_cast<char*>(base) + off, &v, sizeof v);
}

// A FUSE command in the ring's next (128-byte) SQE; false if the ring is full.
bool prep_fuse_cmd(io_uring* ring, int fuse_fd, uint32_t cmd_op, uint16_t qid, uint64_t commit_id,
                   const iovec* buffers) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring);
  if (!sqe) return false;
  std::memset(static_cast<void*>(sqe), 0, 2 * sizeof(io_uring_sqe));
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fuse_fd;
  sqe->cmd_op = cmd_op;
  if (buffers) {
    sqe->addr = reinterpret_cast<uint64_t>(buffers);
    sqe->len = 2;  // the header and the payload
  }
  CmdReq req{};
  req.qid = qid;
  req.commit_id = commit_id;
  std::memcpy(sqe->cmd, &req, sizeof req);
  return true;
}

// Checked at each wait so that stop() ends an idle thread.
constexpr long kWaitSliceNs = 200'000'000;

// The entry whose request this thread is answering (a FuseUring::Entry).
thread_local void* t_entry = nullptr;

}  // namespace

// One ring entry and the thread that serves it. `unique` is the request in
// it (0: none); `replied` flips when its reply was copied in.
struct FuseUring::Entry {
  unsigned qid = 0;
  io_uring ring{};
  bool ring_ok = false;
  void* header = nullptr;   // kUringHeaderSize, shared with the kernel
  void* payload = nullptr;  // opt_.payload_size, shared with the kernel
  size_t payload_size = 0;
  iovec iov[2]{};
  std::atomic<uint64_t> unique{0};
  std::atomic<uint32_t> replied{0};
  std::vector<char> request;  // the rebuilt request handed to libfuse
  ~Entry() {
    std::free(header);
    std::free(payload);
  }
};

uint64_t request_unique(const void* header) { return load<uint64_t>(header, 8); }

uint64_t reply_unique(const iovec* iov, int count) {
  if (count < 1 || iov[0].iov_len < kOutHeaderSize) return 0;
  return load<uint64_t>(iov[0].iov_base, 8);
}

Status rebuild_request(const void* header, const void* payload, size_t payload_capacity, std::vector<char>& out) {
  const uint32_t len = load<uint32_t>(header, 0);
  const uint32_t payload_sz = load<uint32_t>(header, kUringEntOffset + offsetof(EntInOut, payload_sz));
  if (payload_sz > payload_capacity)
    return Status(EPROTO, "FUSE io_uring request: payload of " + std::to_string(payload_sz) +
                              " bytes in a buffer of " + std::to_string(payload_capacity));
  if (len < kInHeaderSize + payload_sz || len - kInHeaderSize - payload_sz > kUringOpInSize)
    return Status(EPROTO, "FUSE io_uring request: length " + std::to_string(len) + " does not fit a " +
                              std::to_string(payload_sz) + "-byte payload and a " +
                              std::to_string(kUringOpInSize) + "-byte op header");
  const size_t op_in = len - kInHeaderSize - payload_sz;
  out.resize(len);
  std::memcpy(out.data(), header, kInHeaderSize);
  std::memcpy(out.data() + kInHeaderSize, static_cast<const char*>(header) + kUringInOutSize, op_in);
  if (payload_sz) std::memcpy(out.data() + kInHeaderSize + op_in, payload, payload_sz);
  return Status::ok();
}

size_t fill_reply(const iovec* iov, int count, void* header, void* payload, size_t payload_capacity) {
  size_t total = 0, args = 0;
  for (int i = 0; i < count; ++i) total += iov[i].iov_len;
  for (int i = 1; i < count; ++i) args += iov[i].iov_len;
  std::memset(header, 0, kUringInOutSize);
  std::memcpy(header, iov[0].iov_base, kOutHeaderSize);
  if (args > payload_capacity) {  // answer EIO rather than overrun the entry
    store<uint32_t>(header, 0, kOutHeaderSize);
    store<int32_t>(header, 4, -EIO);
    args = 0;
  } else {
    char* to = static_cast<char*>(payload);
    for (int i = 1; i < count; ++i) {
      if (iov[i].iov_len) std::memcpy(to, iov[i].iov_base, iov[i].iov_len);
      to += iov[i].iov_len;
    }
  }
  store<uint32_t>(header, kUringEntOffset + offsetof(EntInOut, payload_sz), static_cast<uint32_t>(args));
  return total;
}

unsigned uring_queue_count() {
  const int n = get_nprocs_conf();  // possible CPUs, as the kernel's num_possible_cpus()
  return n > 0 ? static_cast<unsigned>(n) : 1u;
}

Status probe_uring() {
  io_uring ring{};
  const int rc = io_uring_queue_init(2, &ring, IORING_SETUP_SQE128);
  if (rc < 0) return Status::from_errno(-rc, "cannot make an io_uring with 128-byte SQEs");
  io_uring_queue_exit(&ring);
  return Status::ok();
}

FuseUring::FuseUring(fuse_session* se, int fuse_fd, Options o)
    : se_(se), fuse_fd_(fuse_fd), opt_(o), queues_(uring_queue_count()) {
  const unsigned per_queue = std::max(1u, opt_.entries_per_queue);
  for (unsigned q = 0; q < queues_; ++q)
    for (unsigned i = 0; i < per_queue; ++i) {
      auto e = std::make_unique<Entry>();
      e->qid = q;
      entries_.push_back(std::move(e));
    }
}

void FuseUring::start() {
  for (auto& e : entries_) threads_.emplace_back([this, raw = e.get()] { run(*raw); });
}

FuseUring::~FuseUring() { stop(); }

void FuseUring::stop() {
  stop_.store(true, std::memory_order_release);
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

bool FuseUring::deliver(const iovec* iov, int count) {
  const uint64_t unique = reply_unique(iov, count);
  if (unique == 0) return false;  // a notification: /dev/fuse
  auto* mine = static_cast<Entry*>(t_entry);
  Entry* e = (mine && mine->unique.load(std::memory_order_relaxed) == unique) ? mine : nullptr;
  if (!e) {
    for (auto& other : entries_)
      if (other->unique.load(std::memory_order_acquire) == unique) {
        e = other.get();
        break;
      }
    if (!e) return false;  // a request read from /dev/fuse
    replies_elsewhere_.fetch_add(1, std::memory_order_relaxed);
  }
  fill_reply(iov, count, e->header, e->payload, e->payload_size);
  e->replied.store(1, std::memory_order_release);
  if (e != mine) e->replied.notify_one();
  return true;
}

// Registers the entry with its queue: the kernel keeps the SQE and completes
// it when it puts a request in the buffers.
bool FuseUring::register_entry(Entry& e) {
  return prep_fuse_cmd(&e.ring, fuse_fd_, kCmdRegister, static_cast<uint16_t>(e.qid), 0, e.iov) &&
         io_uring_submit(&e.ring) == 1;
}

void FuseUring::run(Entry& e) {
  t_entry = &e;
  if (opt_.pin) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(e.qid, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // not allowed there: unpinned
  }
  e.payload_size = opt_.payload_size;
  e.header = std::aligned_alloc(4096, 4096);
  e.payload = std::aligned_alloc(4096, (e.payload_size + 4095) / 4096 * 4096);
  int rc = (e.header && e.payload) ? io_uring_queue_init(4, &e.ring, IORING_SETUP_SQE128) : -ENOMEM;
  if (rc < 0) {
    // No ring of its own: make the kernel give up io_uring for the connection
    // (a REGISTER it refuses does), else it would hold requests for ever.
    first_error_.store(-rc);
    register_failures_.fetch_add(1);
    spdlog::warn("FUSE io_uring: cannot make a ring ({}); requests go through /dev/fuse", std::strerror(-rc));
    io_uring probe{};
    if (io_uring_queue_init(2, &probe, IORING_SETUP_SQE128) == 0) {
      io_uring_cqe* cqe = nullptr;
      // No buffers: refused with EINVAL.
      if (prep_fuse_cmd(&probe, fuse_fd_, kCmdRegister, static_cast<uint16_t>(e.qid), 0, nullptr) &&
          io_uring_submit_and_wait(&probe, 1) == 1 && io_uring_wait_cqe(&probe, &cqe) == 0)
        io_uring_cqe_seen(&probe, cqe);
      io_uring_queue_exit(&probe);
    }
    t_entry = nullptr;
    return;
  }
  e.ring_ok = true;
  e.iov[0] = {e.header, kUringHeaderSize};
  e.iov[1] = {e.payload, e.payload_size};
  serve(e);
  io_uring_queue_exit(&e.ring);  // cancels a fetch still registered
  t_entry = nullptr;
}

void FuseUring::serve(Entry& e) {
  bool registered = false;
  if (!register_entry(e)) return;
  while (!stop_.load(std::memory_order_acquire)) {
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec slice{0, kWaitSliceNs};
    const int wrc = io_uring_wait_cqe_timeout(&e.ring, &cqe, &slice);
    if (wrc == -ETIME || wrc == -EINTR) continue;
    if (wrc < 0) {
      spdlog::warn("FUSE io_uring queue {}: waiting for a request: {}", e.qid, std::strerror(-wrc));
      return;
    }
    const int res = cqe->res;
    io_uring_cqe_seen(&e.ring, cqe);
    if (res == -EAGAIN && !registered) {  // INIT not processed yet: try again shortly
      ::usleep(1000);
      if (!register_entry(e)) return;
      continue;
    }
    if (res < 0) {
      // ENOTCONN and ECONNABORTED: the connection ended (unmount). Anything
      // else at registration: the kernel gave up io_uring for it.
      if (!registered) {
        register_failures_.fetch_add(1);
        int expected = 0;
        first_error_.compare_exchange_strong(expected, -res);
        spdlog::warn("FUSE io_uring queue {}: the kernel refused an entry ({}); requests go through /dev/fuse",
                     e.qid, std::strerror(-res));
      }
      return;
    }
    if (!registered) {
      registered = true;
      entries_used_.fetch_add(1);
    }
    // A request is in the buffers.
    const uint64_t unique = request_unique(e.header);
    e.replied.store(0, std::memory_order_relaxed);
    e.unique.store(unique, std::memory_order_release);
    requests_.fetch_add(1, std::memory_order_relaxed);
    Status s = rebuild_request(e.header, e.payload, e.payload_size, e.request);
    if (s) {
      fuse_buf buf{};
      buf.mem = e.request.data();
      buf.size = e.request.size();
      fuse_session_process_buf(se_, &buf);
      // Parked until its dataset's scan ends: answered from another thread.
      while (!e.replied.load(std::memory_order_acquire)) e.replied.wait(0, std::memory_order_acquire);
    } else {
      spdlog::error("{}", s.message());
      char oh[kOutHeaderSize];  // struct fuse_out_header: len, error, unique
      store<uint32_t>(oh, 0, kOutHeaderSize);
      store<int32_t>(oh, 4, -EIO);
      store<uint64_t>(oh, 8, unique);
      iovec iov{oh, sizeof oh};
      fill_reply(&iov, 1, e.header, e.payload, e.payload_size);
    }
    e.unique.store(0, std::memory_order_release);
    if (!prep_fuse_cmd(&e.ring, fuse_fd_, kCmdCommitAndFetch, static_cast<uint16_t>(e.qid), unique, nullptr) ||
        io_uring_submit(&e.ring) != 1) {
      spdlog::warn("FUSE io_uring queue {}: cannot commit a reply", e.qid);
      return;
    }
  }
}

nlohmann::json FuseUring::stats() const {
  return {{"queues", queues_},
          {"entries", entries_.size()},
          {"entries_used", entries_used_.load()},
          {"register_failures", register_failures_.load()},
          {"requests", requests_.load()},
          {"replies_from_other_threads", replies_elsewhere_.load()}};
}

}  // namespace dlfs::fs
