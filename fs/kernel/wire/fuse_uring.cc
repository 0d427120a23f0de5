#include "fs/kernel/wire/fuse_uring.h"

#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <cstring>
#include <mutex>
#include <string>

#include <spdlog/spdlog.h>

namespace dlfs::fs {
namespace {

// The wire bits of the FUSE io_uring ABI (7.42) that Debian 12's headers
// lack: include/uapi/linux/fuse.h.
constexpr size_t kUringInHeaderSize = 40;  // struct fuse_in_header
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

// The ring's next SQE, cleared whole (128 bytes: the rings are SQE128);
// null if the ring is full.
io_uring_sqe* clear_sqe(io_uring* ring) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring);
  if (sqe) std::memset(static_cast<void*>(sqe), 0, 2 * sizeof(io_uring_sqe));
  return sqe;
}

// A FUSE command in the ring's next SQE; false if the ring is full.
bool prep_fuse_cmd(io_uring* ring, int fuse_fd, uint32_t cmd_op, uint16_t qid, uint64_t commit_id,
                   const iovec* buffers, void* user_data) {
  io_uring_sqe* sqe = clear_sqe(ring);
  if (!sqe) return false;
  io_uring_sqe_set_data(sqe, user_data);
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
// The user_data of the eventfd read that says parked replies are ready.
constexpr uint64_t kWakeTag = 1;
// Entries a thread may hold while their requests are parked (it takes a new
// one to keep serving): beyond this it serves with what it has.
constexpr size_t kMaxEntriesPerThread = 64;
// Entries each thread keeps registered with the kernel (waiting for a
// request). The kernel hands a queued request to an entry only when some
// entry of that queue commits, not when one registers: if every entry of a
// queue is taken by requests that park, a request arriving then waits until
// a parked one is answered (the end of the scan). A spare entry per thread,
// replaced as soon as one parks, keeps that to bursts of parked requests
// larger than the queue's spares.
constexpr unsigned kEntriesInKernel = 2;

// The entry whose request this thread is answering (a FuseUring::Entry).
thread_local void* t_entry = nullptr;

}  // namespace

// One ring entry: its buffers (shared with the kernel while it fetches) and
// the request in it. State: fetching (the kernel holds it), processing (its
// thread is in libfuse), parked (libfuse returned without a reply: another
// thread answers later), replied (the reply is in the buffers, to commit).
struct FuseUring::Entry {
  enum State : int { fetching, processing, parked, replied };
  void* header = nullptr;   // kUringHeaderSize
  void* payload = nullptr;  // payload_size
  size_t payload_size = 0;
  iovec iov[2]{};
  bool ever_fetched = false;  // its thread only
  std::atomic<uint64_t> unique{0};
  std::atomic<int> state{fetching};
  std::vector<char> request;  // the rebuilt request handed to libfuse
  ~Entry() {
    std::free(header);
    std::free(payload);
  }
};

// A thread, its ring and its entries, all on one queue.
struct FuseUring::Worker {
  unsigned qid = 0;
  io_uring ring{};
  int wake_fd = -1;             // eventfd: parked replies ready to commit (-1 once the thread ended; under mu)
  uint64_t wake_value = 0;
  unsigned in_kernel = 0;       // entries the kernel holds (fetching); owner thread only
  std::mutex mu;                // entries (they grow) and to_commit
  std::vector<std::unique_ptr<Entry>> entries;
  std::vector<Entry*> to_commit;
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
  if (len < kUringInHeaderSize + payload_sz || len - kUringInHeaderSize - payload_sz > kUringOpInSize)
    return Status(EPROTO, "FUSE io_uring request: length " + std::to_string(len) + " does not fit a " +
                              std::to_string(payload_sz) + "-byte payload and a " +
                              std::to_string(kUringOpInSize) + "-byte op header");
  const size_t op_in = len - kUringInHeaderSize - payload_sz;
  out.resize(len);
  std::memcpy(out.data(), header, kUringInHeaderSize);
  std::memcpy(out.data() + kUringInHeaderSize, static_cast<const char*>(header) + kUringInOutSize, op_in);
  if (payload_sz) std::memcpy(out.data() + kUringInHeaderSize + op_in, payload, payload_sz);
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

unsigned count_cpu_list(const std::string& list) {
  unsigned n = 0;
  size_t i = 0;
  while (i < list.size()) {
    size_t end = list.find(',', i);
    if (end == std::string::npos) end = list.size();
    const std::string part = list.substr(i, end - i);
    i = end + 1;
    if (part.empty() || part == "\n") continue;
    unsigned a = 0, b = 0;
    if (std::sscanf(part.c_str(), "%u-%u", &a, &b) == 2 && b >= a) n += b - a + 1;
    else if (std::sscanf(part.c_str(), "%u", &a) == 1) n += 1;
    else return 0;
  }
  return n;
}

unsigned uring_queue_count() {
  // The kernel makes num_possible_cpus() queues and uses the ring only once
  // every one has an entry: the count must be exactly that.
  std::ifstream in("/sys/devices/system/cpu/possible");
  std::string list;
  if (std::getline(in, list))
    if (const unsigned n = count_cpu_list(list); n > 0) return n;
  const int n = get_nprocs_conf();
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
  const unsigned per_queue = std::max(1u, opt_.threads_per_queue);
  for (unsigned q = 0; q < queues_; ++q)
    for (unsigned i = 0; i < per_queue; ++i) {
      auto w = std::make_unique<Worker>();
      w->qid = q;
      workers_.push_back(std::move(w));
    }
}

void FuseUring::start() {
  for (auto& w : workers_) threads_.emplace_back([this, raw = w.get()] { run(*raw); });
}

FuseUring::~FuseUring() { stop(); }

void FuseUring::stop() {
  stop_.store(true, std::memory_order_release);
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

size_t FuseUring::deliver(const iovec* iov, int count) {
  const uint64_t unique = reply_unique(iov, count);
  if (unique == 0) return 0;  // a notification: /dev/fuse
  // The usual case: the thread answering the request it is processing.
  if (auto* mine = static_cast<Entry*>(t_entry); mine && mine->unique.load(std::memory_order_relaxed) == unique) {
    const size_t size = fill_reply(iov, count, mine->header, mine->payload, mine->payload_size);
    mine->state.store(Entry::replied, std::memory_order_release);
    return size;
  }
  for (auto& w : workers_) {
    std::unique_lock lk(w->mu);
    for (auto& e : w->entries) {
      if (e->unique.load(std::memory_order_acquire) != unique) continue;
      const size_t size = fill_reply(iov, count, e->header, e->payload, e->payload_size);
      replies_elsewhere_.fetch_add(1, std::memory_order_relaxed);
      // Still in libfuse on its own thread: that thread commits it. Parked:
      // its thread is serving others; tell it to commit this one.
      if (e->state.exchange(Entry::replied, std::memory_order_acq_rel) == Entry::parked && w->wake_fd >= 0) {
        w->to_commit.push_back(e.get());
        const uint64_t one = 1;
        (void)!::write(w->wake_fd, &one, sizeof one);  // under mu: the thread closes it under mu
      }
      return size;
    }
  }
  return 0;  // a request read from /dev/fuse
}

// A new entry of `w`, registered with its queue: the kernel keeps the SQE
// and completes it when it puts a request in the buffers.
FuseUring::Entry* FuseUring::add_entry(Worker& w) {
  auto e = std::make_unique<Entry>();
  e->payload_size = opt_.payload_size;
  e->header = std::aligned_alloc(4096, 4096);
  e->payload = std::aligned_alloc(4096, (e->payload_size + 4095) / 4096 * 4096);
  if (!e->header || !e->payload) return nullptr;
  e->iov[0] = {e->header, kUringHeaderSize};
  e->iov[1] = {e->payload, e->payload_size};
  Entry* raw = e.get();
  if (!prep_fuse_cmd(&w.ring, fuse_fd_, kCmdRegister, static_cast<uint16_t>(w.qid), 0, raw->iov, raw)) return nullptr;
  {
    std::lock_guard lk(w.mu);
    w.entries.push_back(std::move(e));
  }
  ++w.in_kernel;
  entries_.fetch_add(1, std::memory_order_relaxed);
  return raw;
}

// Gives the entry's reply to the kernel and the entry back for a request.
bool FuseUring::commit(Worker& w, Entry& e) {
  const uint64_t unique = e.unique.load(std::memory_order_relaxed);
  e.unique.store(0, std::memory_order_release);
  e.state.store(Entry::fetching, std::memory_order_release);
  if (!prep_fuse_cmd(&w.ring, fuse_fd_, kCmdCommitAndFetch, static_cast<uint16_t>(w.qid), unique, nullptr, &e))
    return false;
  ++w.in_kernel;
  return true;
}

// Watches the worker's eventfd (parked replies ready to commit).
bool FuseUring::arm_wake(Worker& w) {
  io_uring_sqe* sqe = clear_sqe(&w.ring);
  if (!sqe) return false;
  io_uring_prep_read(sqe, w.wake_fd, &w.wake_value, sizeof w.wake_value, 0);
  io_uring_sqe_set_data64(sqe, kWakeTag);
  return true;
}

// No ring of its own: make the kernel give up io_uring for the connection
// (a REGISTER it refuses does), else it would hold requests for ever.
void FuseUring::refuse_io_uring(unsigned qid, int err) {
  register_failures_.fetch_add(1);
  spdlog::warn("FUSE io_uring queue {}: cannot set up its entries ({}); requests go through /dev/fuse", qid,
               std::strerror(err));
  io_uring probe{};
  if (io_uring_queue_init(2, &probe, IORING_SETUP_SQE128) != 0) return;
  io_uring_cqe* cqe = nullptr;
  // No buffers: refused with EINVAL.
  if (prep_fuse_cmd(&probe, fuse_fd_, kCmdRegister, static_cast<uint16_t>(qid), 0, nullptr, nullptr) &&
      io_uring_submit_and_wait(&probe, 1) == 1 && io_uring_wait_cqe(&probe, &cqe) == 0)
    io_uring_cqe_seen(&probe, cqe);
  io_uring_queue_exit(&probe);
}

void FuseUring::run(Worker& w) {
  if (opt_.pin) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(w.qid, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // not allowed there: unpinned
  }
  w.wake_fd = ::eventfd(0, EFD_CLOEXEC);
  // TEST ONLY: DLFS_TEST_ONLY_URING_SETUP_FAIL makes queue 0's threads fail
  // as if they could not make their rings: the queue gets no entry, so the
  // kernel would hold every request (tests/integration/35_fuse_uring.sh: the
  // mount must serve through /dev/fuse instead).
  if (w.qid == 0 && std::getenv("DLFS_TEST_ONLY_URING_SETUP_FAIL")) {
    spdlog::warn("DLFS_TEST_ONLY_URING_SETUP_FAIL: queue 0 fails its setup (a test hook)");
    refuse_io_uring(w.qid, ENOMEM);
    ::close(w.wake_fd);
    std::lock_guard lk(w.mu);
    w.wake_fd = -1;
    return;
  }
  // Room for a commit per entry the thread may hold, the wake read, a register.
  int rc = w.wake_fd < 0 ? -errno : io_uring_queue_init(kMaxEntriesPerThread + 4, &w.ring, IORING_SETUP_SQE128);
  if (rc < 0) {
    refuse_io_uring(w.qid, -rc);
    if (w.wake_fd >= 0) ::close(w.wake_fd);
    return;
  }
  bool ready = arm_wake(w);
  for (unsigned i = 0; ready && i < kEntriesInKernel; ++i) ready = add_entry(w) != nullptr;
  if (ready && io_uring_submit(&w.ring) >= 1)
    serve(w);
  else  // no entry of this queue reached the kernel, which would wait for one for ever
    refuse_io_uring(w.qid, ENOMEM);
  io_uring_queue_exit(&w.ring);  // cancels the fetches still registered
  std::lock_guard lk(w.mu);      // a late reply to a parked request finds no thread to wake
  ::close(w.wake_fd);
  w.wake_fd = -1;
}

void FuseUring::serve(Worker& w) {
  while (!stop_.load(std::memory_order_acquire)) {
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec slice{0, kWaitSliceNs};
    const int wrc = io_uring_wait_cqe_timeout(&w.ring, &cqe, &slice);
    if (wrc == -ETIME || wrc == -EINTR) continue;
    if (wrc < 0) {
      spdlog::warn("FUSE io_uring queue {}: waiting for a request: {}", w.qid, std::strerror(-wrc));
      return;
    }
    const int res = cqe->res;
    const uint64_t tag = io_uring_cqe_get_data64(cqe);
    io_uring_cqe_seen(&w.ring, cqe);
    if (tag == kWakeTag) {  // replies to parked requests came in
      std::vector<Entry*> ready;
      {
        std::lock_guard lk(w.mu);
        ready.swap(w.to_commit);
      }
      for (Entry* e : ready)
        if (!commit(w, *e)) return;
      if (!arm_wake(w) || io_uring_submit(&w.ring) < 0) return;
      continue;
    }
    Entry& e = *reinterpret_cast<Entry*>(tag);
    --w.in_kernel;
    if (res < 0) {
      // ENOTCONN, ECONNABORTED: the connection ended (unmount). At a first
      // registration, anything else: the kernel gave up io_uring for it.
      if (!e.ever_fetched && res != -ENOTCONN && res != -ECONNABORTED) {
        register_failures_.fetch_add(1);
        spdlog::warn("FUSE io_uring queue {}: the kernel refused an entry ({}); requests go through /dev/fuse",
                     w.qid, std::strerror(-res));
      }
      if (w.in_kernel == 0) return;
      continue;
    }
    e.ever_fetched = true;
    if (handle(w, e) == Entry::replied) {
      if (!commit(w, e) || io_uring_submit(&w.ring) != 1) return;
    } else if (w.in_kernel < kEntriesInKernel && w.entries.size() < kMaxEntriesPerThread) {
      // Parked: one more entry in its place, so that its CPU's queue keeps
      // being served.
      if (!add_entry(w) || io_uring_submit(&w.ring) != 1) {
        spdlog::warn("FUSE io_uring queue {}: cannot register one more entry; this thread stops", w.qid);
        return;
      }
    }
  }
}

// Hands the request in `e` to libfuse; returns whether it was answered
// (replied) or will be by another thread (parked).
int FuseUring::handle(Worker& w, Entry& e) {
  const uint64_t unique = request_unique(e.header);
  e.state.store(Entry::processing, std::memory_order_relaxed);
  e.unique.store(unique, std::memory_order_release);
  requests_.fetch_add(1, std::memory_order_relaxed);
  Status s = rebuild_request(e.header, e.payload, e.payload_size, e.request);
  if (!s) {
    spdlog::error("FUSE io_uring queue {}: {}", w.qid, s.message());
    char oh[kOutHeaderSize];  // struct fuse_out_header: len, error, unique
    store<uint32_t>(oh, 0, kOutHeaderSize);
    store<int32_t>(oh, 4, -EIO);
    store<uint64_t>(oh, 8, unique);
    iovec iov{oh, sizeof oh};
    fill_reply(&iov, 1, e.header, e.payload, e.payload_size);
    return Entry::replied;
  }
  fuse_buf buf{};
  buf.mem = e.request.data();
  buf.size = e.request.size();
  t_entry = &e;
  fuse_session_process_buf(se_, &buf);
  t_entry = nullptr;
  int expected = Entry::processing;
  if (e.state.compare_exchange_strong(expected, Entry::parked, std::memory_order_acq_rel)) {
    parked_.fetch_add(1, std::memory_order_relaxed);
    return Entry::parked;
  }
  return Entry::replied;
}

nlohmann::json FuseUring::stats() const {
  return {{"queues", queues_},
          {"threads", workers_.size()},
          {"entries", entries_.load()},
          {"register_failures", register_failures_.load()},
          {"requests", requests_.load()},
          {"parked", parked_.load()},
          {"replies_from_other_threads", replies_elsewhere_.load()}};
}

}  // namespace dlfs::fs
