// FUSE over io_uring: requests reach dlfsd through one io_uring queue per CPU
// instead of read(2) and writev(2) on /dev/fuse (Linux 6.14+, with
// /sys/module/fuse/parameters/enable_uring set).
//
// Why: on /dev/fuse, the worker that answers a request usually runs on the
// other CPU from the process that sent it, and waking a thread on another
// CPU is dear on a VM (an IPI, and an exit when that CPU idles). A request's
// round trip cost 31 us across CPUs and 13 us on one CPU here
// (docs/benchmark-notes.md, "FUSE over io_uring"); Python's open() sends one such
// request (its isatty() ioctl) for every file it opens. The kernel puts an
// io_uring request on the queue of the CPU its caller runs on, and this
// module's threads for that queue are pinned to that CPU: the caller and the
// thread that answers it take turns on one CPU.
//
// libfuse 3.14 knows nothing of it. The INIT reply asks for it
// (FUSE_OVER_IO_URING, patched on the wire by fs/kernel/wire/fuse_wire.cc), then
// each thread registers one ring entry (a header and a payload buffer) with
// its queue. A request the kernel puts in an entry is rebuilt into the bytes
// read(2) would have returned and handed to fuse_session_process_buf; the
// reply libfuse writes through the session's custom writev comes here
// (deliver()) instead of /dev/fuse and is committed with the entry's next
// fetch. FORGET, INTERRUPT and notifications still go through /dev/fuse
// (the kernel's choice), so the classic loop keeps running beside.
//
// A reply may come from another thread (a request parked while its dataset
// scans is answered when the scan ends). The entry's thread does not wait for
// it: it registers another entry and serves on; the replying thread hands the
// parked entry back to it (an eventfd in its ring) to commit. Each thread
// keeps two entries registered: the kernel gives a queued request to an
// entry only when one of the queue's entries commits, so a burst of parked
// requests larger than a queue's registered entries leaves the next requests
// on that CPU waiting for the scan to end (fuse_uring.cc, kEntriesInKernel).
//
// Thread safety: deliver() may be called from any thread.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fuse_lowlevel.h>
#include <nlohmann/json.hpp>

#include "common/status.h"

namespace dlfs::fs {

// What the kernel and the daemon agreed at INIT (written by the wire hooks).
struct UringWire {
  bool wanted = false;                   // config, and this process can make the rings
  std::atomic<bool> offered{false};      // the INIT request offered FUSE_OVER_IO_URING
  std::atomic<bool> negotiated{false};   // the INIT reply asked for it
  // Called once, on the thread that wrote the INIT reply that asked for it,
  // right after the kernel took that reply: start the queues now (until
  // they are all registered, the kernel holds every new request).
  std::function<void()> on_negotiated;
};

// The layout of the kernel's ring entry header (include/uapi/linux/fuse.h,
// struct fuse_uring_req_header), 288 bytes.
constexpr size_t kUringInOutSize = 128;     // fuse_in_header / fuse_out_header, padded
constexpr size_t kUringOpInSize = 128;      // the request's first argument (its per-op struct)
constexpr size_t kUringEntOffset = 256;     // struct fuse_uring_ent_in_out: flags, commit_id, payload_sz
constexpr size_t kUringHeaderSize = 288;

// The bytes read(2) on /dev/fuse would have returned for the request the
// kernel put in an entry: the in header, the op struct, then the payload.
// Errors name what is inconsistent (a length the kernel never sends).
Status rebuild_request(const void* header, const void* payload, size_t payload_capacity, std::vector<char>& out);

// Puts a reply as libfuse writes it ([fuse_out_header, args...]) into an
// entry: the out header into the header's first bytes, the args into the
// payload, their size into payload_sz. A reply larger than the payload
// becomes an EIO reply (it cannot happen with the kernel's max_payload).
// Returns the bytes the reply had (what writev would have returned).
size_t fill_reply(const iovec* iov, int count, void* header, void* payload, size_t payload_capacity);

// The unique id of a request in an entry header, or of a reply.
uint64_t request_unique(const void* header);
uint64_t reply_unique(const iovec* iov, int count);

// The kernel's queue count: one per possible CPU
// (/sys/devices/system/cpu/possible).
unsigned uring_queue_count();
// CPUs in a kernel CPU list such as "0-3,8,10-11" (0 if it does not parse).
unsigned count_cpu_list(const std::string& list);

// Whether this process can make an io_uring with 128-byte SQEs (io_uring may
// be disabled by sysctl or seccomp): asked before the INIT reply asks the
// kernel for FUSE over io_uring, which then waits for the queues.
Status probe_uring();

class FuseUring {
 public:
  struct Options {
    unsigned threads_per_queue = 8;  // per CPU queue, each thread with two entries (more while requests park)
    size_t payload_size = (1u << 20) + 4096;  // >= the kernel's max_payload (max_write, max_pages)
    bool pin = true;                 // pin each queue's threads to its CPU
  };
  // Makes the entries; start() starts their threads, once deliver() can be
  // reached from the session's writev (a reply may follow at once).
  FuseUring(fuse_session* se, int fuse_fd, Options o);
  // Each thread registers its entry. One that cannot makes a REGISTER fail
  // on purpose: the kernel then gives up io_uring for this connection and
  // serves every request through /dev/fuse.
  void start();
  ~FuseUring();
  FuseUring(const FuseUring&) = delete;
  FuseUring& operator=(const FuseUring&) = delete;

  // Threads end after their current request (call after the unmount: the
  // kernel then ends every fetch).
  void stop();

  // The reply hook: if `iov` answers a request taken from an entry, copies
  // it there (it will be committed) and returns its size, what writev would
  // have; 0 for /dev/fuse's replies.
  size_t deliver(const iovec* iov, int count);

  nlohmann::json stats() const;

 private:
  struct Entry;
  struct Worker;
  void run(Worker& w);
  void serve(Worker& w);
  int handle(Worker& w, Entry& e);
  Entry* add_entry(Worker& w);
  bool commit(Worker& w, Entry& e);
  bool arm_wake(Worker& w);
  void refuse_io_uring(unsigned qid, int err);

  fuse_session* se_;
  int fuse_fd_;
  Options opt_;
  unsigned queues_;
  std::vector<std::unique_ptr<Worker>> workers_;  // threads_per_queue per queue
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> entries_{0};
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> parked_{0};             // requests answered later by another thread
  std::atomic<uint64_t> replies_elsewhere_{0};  // replies written by another thread
  std::atomic<uint64_t> register_failures_{0};
};

}  // namespace dlfs::fs
