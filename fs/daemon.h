// Daemon: the composition root of dlfsd.
//
// create() does every check and every fallible set-up step before mounting
// (config, mountpoint, dataset scans, memory, control socket), so a failure
// leaves nothing behind. run() mounts, starts the loaders, serves until
// SIGTERM/SIGINT or `dlfs-ctl unmount`, then unmounts and tears down in
// reverse order of construction.
#pragma once

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "fs/config.h"
#include "fs/control_handler.h"
#include "fs/dataset.h"
#include "fs/fuse_adapter.h"
#include "fs/namespace.h"
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
  Status join_cluster(const transport::Membership& membership);

  DaemonConfig config_;
  uint64_t budget_bytes_ = 0;
  std::chrono::steady_clock::time_point started_;
  std::vector<std::unique_ptr<Dataset>> datasets_;
  std::unique_ptr<transport::Cluster> cluster_;  // after datasets_: leaves before they go
  std::unique_ptr<Namespace> namespace_;
  FuseContext fuse_context_;
  std::unique_ptr<ControlServer> control_;
  fuse_session* session_ = nullptr;
  pthread_t main_thread_{};
  std::atomic<bool> unmount_requested_{false};
};

}  // namespace dlfs::fs
