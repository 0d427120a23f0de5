// Each dataset's raw/ under a read-only overlayfs: Python's open() without a
// round trip to dlfsd per file.
//
// Why: Python before 3.14 calls isatty() in every open() with default
// buffering, an ioctl (TCGETS). The kernel forwards every ioctl on a FUSE
// file to the daemon, with no way to refuse them for good, so each open of a
// cached raw file cost one round trip (31 us over /dev/fuse on the project's
// VM) and an epoch over cached raw files ran at a third of the page cache's
// speed (docs/benchmark-notes.md, "Python's open() and FUSE"). overlayfs files have
// no ioctl handler: the kernel answers ENOTTY itself. Everything else an
// overlay file does goes to the FUSE file below it (lookups, attributes,
// reads from the same page cache), with the same request counts, except one
// getxattr per file the overlay looks up (its metacopy check; answered by
// pushing the file's pages once per kernel inode, fs/kernel/raw_push.h).
//
// When: once the dataset is loaded. While it loads, a reader's first open of
// a file through the overlay would cost one round trip more (the getxattr,
// where nothing is pushed yet) on top of the LOOKUP and the passthrough OPEN
// that reads during the load were tuned for (docs/benchmark-notes.md, "Reads while
// loading"); after it, the getxattr replaces the ioctl or the READ.
//
// The overlay is mounted over <mountpoint>/<dataset>/raw itself, so readers
// keep their paths: its lower layers are that FUSE directory (resolved before
// the overlay covers it) and an empty directory (overlayfs wants two lower
// layers when it has no upper one): /run/dlfs/overlay-lower-empty, which
// only root may change (checked at each mount: what it held would show in
// every raw/), shared and never removed. Mounting needs root; `auto`
// skips it otherwise and on kernels without overlayfs, saying why once. And
// only with allow_other (the daemon decides): overlayfs reaches the FUSE files
// with its mounter's credentials, which FUSE's own "only the mounter" check
// would then let every user through.
//
// Ordering: a mount looks the directory up through the FUSE mount, so it must
// not block a shutdown: mounts run on a thread of their own, and shutdown()
// detaches every overlay (MNT_DETACH: readers holding files keep them until
// they close) before the FUSE mount goes; a mount that finishes after that
// is detached at once. A detach names the overlay by an O_PATH descriptor of
// its root taken right after the mount (/proc/self/fd/N), not by its path:
// at shutdown no FUSE worker answers any more, and a path walk through the
// mount could wait for a LOOKUP (an entry past its timeout) forever. For the
// same reason a mount in flight at shutdown (mounting()) is ended by aborting
// the FUSE connection (KernelSession::unmount): with FUSE over io_uring the
// unmount alone does not end the connection, and the mount would wait, past
// SIGKILL, for ever. A
// daemon that dies leaves its overlays on its dead mount; the next dlfsd's
// lazy unmount of that mount takes them along.
//
// Thread safety: every public member may be called from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "common/unique_fd.h"
#include "fs/config/config.h"

namespace dlfs::fs {

class RawOverlays {
 public:
  // `mode`: auto (mount where possible: as root) or off (never; the
  // daemon may turn auto off, saying why in `off_because`).
  explicit RawOverlays(AutoOff mode, std::string off_because = "");
  ~RawOverlays();
  RawOverlays(const RawOverlays&) = delete;
  RawOverlays& operator=(const RawOverlays&) = delete;

  // Queues the overlay over `raw_dir` (an absolute path in the mount); it is
  // mounted on the overlays' thread once `ready()` says so (asked every
  // 50 ms; the dataset's load is done). Nothing happens when off or shut down.
  void request(const std::string& raw_dir, std::function<bool()> ready = [] { return true; });
  // No more mounts; every overlay mounted is detached. Before the FUSE unmount.
  void shutdown();
  // Whether the thread is inside mount(2) now: after shutdown(), a mount in
  // flight may wait on the FUSE mount for a reply no one will send, and the
  // connection must be aborted before join() (fs/kernel/fuse_connection.h).
  bool mounting() const;
  // Waits for the mounting thread: after the FUSE unmount and, if mounting(),
  // the connection's abort (a mount blocked on the FUSE mount then fails).
  void join();

  // {"mode": auto|off (in effect), "reason": why off, "mounted": [dirs],
  // "failures", "last_error"} for the stats.
  nlohmann::json stats() const;

  // The overlay mount over `raw_dir` with `empty_dir` as its second lower
  // layer: mount(2)'s data string, with overlayfs's separators (':', ',')
  // and backslashes in the paths escaped. Exposed for tests.
  static std::string mount_options(const std::string& raw_dir, const std::string& empty_dir);

 private:
  void run();
  Result<UniqueFd> mount_one(const std::string& raw_dir);
  static void detach(const std::string& dir, const UniqueFd& root, bool quiet = false);
  static Status check_empty_dir(const std::string& dir);

  // The overlays' second lower layer (see the top of this file).
  static constexpr const char* kEmptyDir = "/run/dlfs/overlay-lower-empty";

  AutoOff mode_;
  bool mounting_ = false;  // under mu_: the thread is in mount_one()
  std::string reason_;  // why mode_ is off
  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Pending {
    std::string dir;
    std::function<bool()> ready;
  };
  std::deque<Pending> queue_;
  struct Mounted {
    std::string dir;
    UniqueFd root;  // O_PATH, of the overlay's root: how shutdown() names it
  };
  std::vector<Mounted> mounted_;
  uint64_t failures_ = 0;
  std::string last_error_;
  bool closed_ = false;
  bool warned_ = false;
  std::thread thread_;
};

}  // namespace dlfs::fs
