// FUSE passthrough while a dataset loads: the kernel reads a raw file that is
// not in memory yet straight from its backend file, without the daemon.
//
// Why: during the load a raw file's miss costs a chain of wake-ups (READ to a
// worker, a backend pread, the reply's copy into the FUSE page cache), and the
// loader fills memory on the same two cores; readers then got ~0.77x of
// reading the backend directly (docs/benchmark-notes.md). With passthrough
// (Linux 6.9+), an OPEN reply names a "backing file" and the kernel serves
// that file's reads and mmaps from the backing file itself, as if the reader
// had opened the backend.
//
// libfuse 3.14 (Debian 12) predates passthrough (3.16): the INIT and OPEN
// replies' extra fields are written on the wire by fs/kernel/wire/fuse_wire.h. This module
// keeps the backing files.
//
// Backing ids: FUSE_DEV_IOC_BACKING_OPEN registers an open backend fd with the
// connection (root only) and returns an id for OPEN replies. The kernel wants
// every open file of one inode on the same backing file, and no passthrough
// open while the inode has ordinary (page-cache) opens, and the reverse
// (else the open fails with EBUSY, ETXTBSY or EINVAL). BackingFiles keeps
// that rule per inode: live passthrough opens share one id, closed when the
// last of them is released; an inode with ordinary opens gets ordinary ones.
// Both keep their per-inode state in the session's KernelInodes
// (fs/kernel/kernel_inodes.h).
//
// Thread safety: BackingFiles and PrefetchedFiles lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <utility>
#include <functional>
#include <mutex>

#include "common/status.h"
#include "common/unique_fd.h"
#include "fs/kernel/kernel_inodes.h"

namespace dlfs::fs {

// How an open file of a raw file is served.
enum class OpenMode : uint64_t {
  plain = 0,        // not tracked (views, generated files, no passthrough)
  cached = 1,       // by the daemon, through the FUSE page cache
  passthrough = 2,  // by the kernel, from the backing file
};

// How backing files are registered with the connection and closed: the
// /dev/fuse ioctls (kernel_registrar, fs/kernel/wire/fuse_wire.h), or a test's.
struct BackingRegistrar {
  std::function<Result<int32_t>(int fd)> open;  // the id, or the kernel's refusal
  std::function<void(int32_t id)> close;
};

class BackingFiles {
 public:
  // Until set_registrar, every registration fails (opens are served cached).
  explicit BackingFiles(KernelInodes& inodes);
  void set_registrar(BackingRegistrar r) { registrar_ = std::move(r); }

  struct Open {
    OpenMode mode = OpenMode::cached;
    int32_t backing_id = 0;  // passthrough only
    UniqueFd backend;        // the backend file, when this open registered it
  };
  // An open of inode `ino` that would rather be passthrough: `source` opens
  // its backend file (an invalid fd: serve it cached). Ordinary if the inode
  // has ordinary opens; else the inode's backing id (registered now if it has
  // none). A registration the kernel refuses makes it `cached`, with the
  // error in `why`.
  Open open_passthrough(uint64_t ino, const std::function<UniqueFd()>& source, Status* why);
  // An ordinary open of `ino`, unless it has passthrough opens (then it must
  // be one too, on the same backing file).
  Open open_cached(uint64_t ino);
  // The kernel released an open file of `ino` served in `mode`.
  void release(uint64_t ino, OpenMode mode);

  uint64_t registered() const { return registered_.load(std::memory_order_relaxed); }  // ids made
  uint64_t live_ids() const;  // ids registered and not closed yet

 private:
  // Counts one more open of an inode that has live opens (of either kind)
  // into them and says how it is served; false if it has none.
  static bool join(KernelInode& e, Open& out);

  KernelInodes& inodes_;
  BackingRegistrar registrar_;
  std::atomic<uint64_t> registered_{0};
};

// Backend files opened for a prefetch at LOOKUP, kept for the OPEN that
// usually follows within microseconds: on a network file system each open is
// a round trip to the server (an NFSv4 OPEN and CLOSE), and passthrough
// already costs the kernel one more of its own. At most `capacity` are kept
// (names looked up but never opened: the oldest is closed).
class PrefetchedFiles {
 public:
  explicit PrefetchedFiles(KernelInodes& inodes, size_t capacity = 256) : inodes_(inodes), capacity_(capacity) {}
  void put(uint64_t ino, UniqueFd fd);
  UniqueFd take(uint64_t ino);  // invalid if none is kept
  void clear();
  size_t size() const;

 private:
  KernelInodes& inodes_;
  size_t capacity_;
  mutable std::mutex mu_;  // taken before an inode's shard lock, never under it
  uint64_t next_seq_ = 1;
  // Oldest first: which put() of which inode; the file itself is the inode's.
  std::deque<std::pair<uint64_t, uint64_t>> fifo_;
};

}  // namespace dlfs::fs
