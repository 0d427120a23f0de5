// ControlHandler: what the daemon answers on its control socket.
//
// The control server (fs/daemon/control_server.h) owns the socket, the peer check and
// the JSON-lines framing; the daemon implements this interface. Handlers run
// on the control server's thread and must not throw.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace dlfs::fs {

// Sends one progress object to the client while a long command runs.
using ProgressFn = std::function<void(const nlohmann::json&)>;

class ControlHandler {
 public:
  virtual ~ControlHandler() = default;
  // Short summary: version, pid, mountpoint, uptime, per dataset name/format/
  // samples/bytes/load state. Same schema as the "status" part of stats.
  virtual nlohmann::json status() = 0;
  // Everything in <mnt>/.dlfs/stats (see docs/stats.md).
  virtual nlohmann::json stats() = 0;
  // Verifies resident memory against the backend for one dataset ("" = all).
  // The result object: {"datasets": [one per dataset, fs/daemon/control_verify.h], "ok"};
  // "ok" is false when memory is corrupt or a backend file changed since the scan.
  virtual Result<nlohmann::json> verify(const std::string& dataset, const ProgressFn& progress) = 0;
  // The epoch plan of one dataset ("" = the first): {"dataset", "epoch",
  // "world_size", "rank", "show"} all optional. See fs/daemon/plan_report.h.
  virtual Result<nlohmann::json> plan(const nlohmann::json& args) = 0;
  // Measured shuffle quality over {"epochs"} epochs of one dataset.
  virtual Result<nlohmann::json> shuffle_report(const nlohmann::json& args, const ProgressFn& progress) = 0;
  // Starts a clean unmount and exit; returns once it is under way.
  virtual Status unmount() = 0;
};

}  // namespace dlfs::fs
