// KernelSession: dlfsd's one FUSE session, from mount to unmount.
//
// It owns everything between the namespace and the kernel: the libfuse
// session and its mount, the signal handlers, the wire hooks
// (fs/kernel/wire/fuse_wire.h) for passthrough and FUSE over io_uring, the
// io_uring queues, the callbacks' shared state (SessionState: per-inode
// state, the passthrough window, pushes, request counters), view pages
// dropped behind readers, the mount's readahead, each dataset's raw/ overlay,
// the multi-threaded loop, and the teardown. The daemon (fs/daemon/daemon.h)
// sees four steps and a stop:
//
//     KernelSession k(config, ns);
//     k.mount();      // session, signals, wire hooks, mount
//     k.serve();      // the loop, until k.exit() (any thread) or a signal
//     ...             // the daemon stops its datasets
//     k.unmount();    // overlays detached, unmounted, queues stopped, session gone
//
// What a libfuse with passthrough and io_uring (3.18) makes unnecessary sits
// in fs/kernel/wire/ and is reached only from kernel_session.cc and from
// fuse_ops.cc's INIT (the flags it asks for) and passthrough OPEN replies:
// replacing it is one change in those two files.
//
// Thread safety: exit(), mounted() and stats() may be called from any
// thread; the four steps from the thread that runs the loop, in order.
#pragma once

#include <pthread.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <fuse_lowlevel.h>
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "fs/config/config.h"
#include "fs/kernel/drop_behind.h"
#include "fs/kernel/raw_overlay.h"
#include "fs/kernel/session_state.h"
#include "fs/kernel/wire/fuse_uring.h"
#include "fs/namespace/namespace.h"

namespace dlfs::fs {

class KernelSession {
 public:
  // Nothing is mounted yet. `ns` must outlive the session.
  KernelSession(const DaemonConfig& config, const Namespace& ns);
  ~KernelSession();
  KernelSession(const KernelSession&) = delete;
  KernelSession& operator=(const KernelSession&) = delete;

  // Creates the session and mounts it at the config's mountpoint. An error
  // says why; nothing is left mounted then.
  Status mount();
  // Serves requests on the config's FUSE threads until exit() or SIGTERM,
  // SIGINT or SIGHUP; returns libfuse's result (the signal number after a
  // signal). No view page is dropped after it returns.
  int serve();
  // Ends serve() from any thread (also before it started: it then returns at once).
  void exit();
  // After serve(): detaches the raw overlays, unmounts, stops the io_uring
  // queues and destroys the session.
  void unmount();
  bool mounted() const { return session_.load(std::memory_order_acquire) != nullptr; }

  // Puts <mountpoint>/<dataset>/raw under a read-only overlay once
  // `loaded()` says the dataset is loaded (fs/kernel/raw_overlay.h).
  void overlay_raw(const std::string& dataset, std::function<bool()> loaded);

  // The "fuse" object of stats (docs/stats.md).
  nlohmann::json stats() const;

 private:
  fuse_session* new_session(Status* why);
  // The session's custom I/O (the wire hooks) for passthrough and/or FUSE
  // over io_uring; false if libfuse refused it (neither is used then).
  bool use_wire_io();
  void wire_up(bool uring);
  // Whether to ask for FUSE over io_uring (config, module parameter, a probe).
  bool want_uring() const;
  // On the thread that wrote the INIT reply, right after the kernel took it.
  void start_uring();
  // The loop has ended (or never will run): the waker stops.
  void stop_waker();
  // Fails every request still waiting on the mount (`why` is logged): at a
  // stop, when one of dlfsd's own threads waits on it (fs/kernel/fuse_connection.h).
  void abort_connection(const char* why);
  nlohmann::json drop_behind_json() const;

  const DaemonConfig& config_;
  SessionState state_;
  // Drops view pages behind their readers: from construction until serve()
  // returns; with view_drop_behind 0 it is off (no thread, drops nothing).
  std::unique_ptr<ViewDropBehind> drop_behind_;
  std::unique_ptr<RawOverlays> raw_overlays_;
  std::unique_ptr<FuseUring> uring_;  // once INIT agreed on it
  std::atomic<fuse_session*> session_{nullptr};
  std::optional<unsigned> connection_;  // its number in /sys/fs/fuse/connections, once mounted
  std::thread tune_;  // raises the mount's readahead once INIT is answered
  // Sends SIGUSR1 to the loop's thread every 20 ms until the loop has ended:
  // one signal can land just before the thread goes back to its wait (after
  // another signal woke it) and be lost. Started by exit(), joined by serve().
  pthread_t loop_thread_{};
  std::mutex waker_mu_;
  std::atomic<bool> loop_ended_{false};  // set under waker_mu_
  std::atomic<bool> in_loop_{false};     // the loop's thread is entering or in the loop
  std::thread waker_;
};

}  // namespace dlfs::fs
