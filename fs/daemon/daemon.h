// Daemon: the composition root of dlfsd.
//
// create() does the cheap checks (config, mountpoint, memory budget, cluster
// membership, every dataset root is a readable directory) and starts the
// control socket (and the metrics endpoint), so that bad input fails before
// anything is mounted. run()
// is one ladder: mount (fs/kernel/kernel_session.h), start the datasets,
// serve, stop the datasets, unmount. It mounts at once, then scans the
// datasets on a startup thread, in config
// order (each scan is parallel per directory; the budget goes to datasets in
// that order), and joins the cluster (multi-node). Each dataset is served
// (and starts loading) as soon as it is complete: alone, once its scan is
// done; in a cluster, once every scan and the join are done. Until then its
// requests wait (fs/dataset/dataset_slot.h). A failed scan or join logs the error,
// makes the dataset's requests EIO, unmounts and exits 2, as a failure in
// create() does. Serves until SIGTERM/SIGINT or `dlfs-ctl unmount`, then
// unmounts and tears down in reverse order of construction.
#pragma once

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
#include "fs/kernel/kernel_session.h"
#include "fs/namespace/namespace.h"
#include "transport/cluster.h"

namespace dlfs::fs {

class ClientServer;
class ControlServer;
class MetricsServer;

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
  // reader: who asks through /.dlfs/stats (fs/daemon/stats.h); null: everything.
  nlohmann::json snapshot(bool detailed, const Reader* reader = nullptr) const;
  Result<const Dataset*> dataset_arg(const nlohmann::json& args) const;
  // The client socket (docs/client-protocol.md), unless client_socket is off.
  Status start_client_server();
  // The Prometheus endpoint (docs/metrics.md), unless metrics_address is off.
  Status start_metrics_server();
  Status join_cluster(const std::vector<Dataset*>& datasets);
  // The startup thread: scans, joins, publishes (see the top of this file).
  void start_datasets();
  void open_datasets();
  // After the loop: the startup thread ends, parked requests fail, loads stop.
  void stop_datasets();
  // Stops the session loop (run() then unmounts); exit_code is run()'s.
  void stop_serving(int exit_code);
  // Asks for the overlay over the slot's raw/ once it is loaded (fs/kernel/raw_overlay.h).
  void overlay_raw(const DatasetSlot& slot);

  DaemonConfig config_;
  uint64_t budget_bytes_ = 0;
  std::chrono::steady_clock::time_point started_;
  transport::Membership membership_;
  DatasetSlots slots_;
  std::unique_ptr<transport::Cluster> cluster_;  // after slots_: leaves before the datasets go
  std::atomic<transport::Cluster*> cluster_live_{nullptr};  // cluster_ once joined, for other threads
  std::unique_ptr<Namespace> namespace_;
  std::unique_ptr<KernelSession> kernel_;  // after namespace_: answers from it until it goes
  std::unique_ptr<ControlServer> control_;
  // The Prometheus endpoint (metrics_address), unless off; goes first.
  std::unique_ptr<MetricsServer> metrics_;  // stopped before the datasets; kept until the end for status
  std::atomic<const MetricsServer*> metrics_live_{nullptr};  // metrics_ once started, for its own scrapes
  // After namespace_ and slots_ (goes first): its sessions read the datasets.
  std::unique_ptr<ClientServer> client_;
  std::atomic<bool> unmount_requested_{false};
  std::thread startup_;
  std::atomic<bool> stopping_{false};  // tells the startup thread to scan nothing more
  std::atomic<int> exit_code_{0};      // non-zero: a dataset failed after the mount
};

}  // namespace dlfs::fs
