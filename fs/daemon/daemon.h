// Daemon: the composition root of dlfsd.
//
// create() does the cheap checks (config, mountpoint, memory budget, cluster
// membership, every dataset root is a readable directory) and starts the
// control socket, so that bad input fails before anything is mounted. run()
// mounts at once, then scans the datasets on a startup thread, in config
// order (each scan is parallel per directory; the budget goes to datasets in
// that order), and joins the cluster (multi-node). Each dataset is served
// (and starts loading) as soon as it is complete: alone, once its scan is
// done; in a cluster, once every scan and the join are done. Until then its
// requests wait (fs/dataset/dataset_slot.h). A failed scan or join logs the error,
// makes the dataset's requests EIO, unmounts and exits 2, as a failure in
// create() does. Serves until SIGTERM/SIGINT or `dlfs-ctl unmount`, then
// unmounts and tears down in reverse order of construction.
#pragma once

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fs/config/config.h"
#include "fs/daemon/control_handler.h"
#include "fs/dataset/dataset.h"
#include "fs/dataset/dataset_slot.h"
#include "fs/kernel/fuse_ops.h"
#include "fs/namespace/namespace.h"
#include "fs/kernel/raw_overlay.h"
#include "transport/cluster.h"

struct fuse_session;

namespace dlfs::fs {

class ControlServer;

class Daemon final : public ControlHandler {
 public:
  static Result<std::unique_ptr<Daemon>> create(DaemonConfig config);
  ~Daemon() override;

  // Mounts and serves; returns the process exit code.
  int run();

  // ControlHandler
  nlohmann::json status() override;
  nlohmann::json stats() override;
  Result<nlohmann::json> verify(const std::string& dataset, const ProgressFn& progress) override;
  Result<nlohmann::json> plan(const nlohmann::json& args) override;
  Result<nlohmann::json> shuffle_report(const nlohmann::json& args, const ProgressFn& progress) override;
  Status unmount() override;

 private:
  explicit Daemon(DaemonConfig config);
  nlohmann::json snapshot(bool detailed) const;
  Result<const Dataset*> dataset_arg(const nlohmann::json& args) const;
  Status join_cluster(const std::vector<Dataset*>& datasets);
  // The startup thread: scans, joins, publishes (see the top of this file).
  void start_datasets();
  // The session's custom I/O (fs/kernel/fuse_wire.h) for passthrough and/or
  // FUSE over io_uring; false if libfuse refused it (neither is used then).
  bool use_wire_io();
  // Whether to ask for FUSE over io_uring (config, module parameter, a probe).
  bool want_uring();
  void start_uring();
  void start_drop_behind();
  // Asks for the overlay over dataset i's raw/ (fs/kernel/raw_overlay.h).
  void overlay_raw(size_t i);
  nlohmann::json drop_behind_json() const;
  void open_datasets();
  // Stops the session loop (run() then unmounts); exit_code is run()'s.
  void stop_serving(int exit_code);
  // Tells the session loop to end and wakes the main thread out of its wait
  // until it has (`dlfs-ctl unmount`, a failed dataset).
  void end_session();
  // The session loop has ended (or never will run): the waker stops.
  void stop_waker();

  DaemonConfig config_;
  uint64_t budget_bytes_ = 0;
  std::chrono::steady_clock::time_point started_;
  transport::Membership membership_;
  DatasetSlots slots_;
  std::unique_ptr<transport::Cluster> cluster_;  // after slots_: leaves before the datasets go
  std::atomic<transport::Cluster*> cluster_live_{nullptr};  // cluster_ once joined, for other threads
  std::unique_ptr<Namespace> namespace_;
  FuseContext fuse_context_;
  // Drops view pages behind their readers (fs/kernel/drop_behind.h): from the
  // mount until the session loop ends.
  std::unique_ptr<ViewDropBehind> drop_behind_;
  // Each dataset's raw/ under a read-only overlay (fs/kernel/raw_overlay.h): asked for
  // once the dataset serves, mounted once it is loaded, detached before the
  // FUSE unmount.
  std::unique_ptr<RawOverlays> raw_overlays_;
  // FUSE over io_uring's queues (fs/kernel/fuse_uring.h), once INIT agreed on it.
  std::unique_ptr<FuseUring> uring_;
  std::unique_ptr<ControlServer> control_;
  fuse_session* session_ = nullptr;
  pthread_t main_thread_{};
  std::atomic<bool> unmount_requested_{false};
  std::thread startup_;
  std::atomic<bool> stopping_{false};  // tells the startup thread to scan nothing more
  std::atomic<int> exit_code_{0};      // non-zero: a dataset failed after the mount
  // Sends SIGUSR1 to the main thread every 20 ms until the loop has ended:
  // one signal can land just before the thread goes back to its wait (after
  // another signal woke it) and be lost. Started by end_session(), joined by run().
  std::mutex waker_mu_;
  std::atomic<bool> loop_ended_{false};  // set under waker_mu_
  std::atomic<bool> in_loop_{false};     // the main thread is entering or in the session loop
  std::thread waker_;
};

}  // namespace dlfs::fs
