// DaemonConfig: everything dlfsd is told, from a TOML file and/or flags.
//
// The TOML layout: [daemon], [cache], [cluster] (docs/deploy.md) and one
// [[dataset]] table per dataset. Every key (its flag, type, default and
// meaning) is declared once, in the key table of fs/config/config_keys.cc; the
// members below hold the values and their defaults. The list:
// docs/configuration.md, or `dlfsd --config-keys`.
//
// Unknown keys are errors that name the key and list the valid ones: a typo
// must not silently fall back to a default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "plan/plan_config.h"
#include "provenance/manifest.h"

namespace dlfs::fs {

using PlanConfig = plan::PlanConfig;

struct DatasetConfig {
  std::string name;
  std::string backend;
  provenance::FormatOptions format;
  PlanConfig plan;
};

struct DaemonConfig {
  // [daemon]
  std::string mountpoint;
  std::string control_socket;          // "" = default_control_socket(mountpoint)
  std::string log_level = "info";
  unsigned fuse_threads = 16;          // most FUSE worker threads
  bool allow_other = true;             // let every user read the mount (as root)
  double entry_timeout_s = 86400;      // the namespace is immutable: cache it long
  double attr_timeout_s = 86400;
  // While a dataset loads, raw files not in memory yet are read by the
  // kernel from their backend files (FUSE passthrough, fs/kernel/backing_files.h):
  // auto (backends on local file systems, fs/dataset/backend_fs.h), on, off.
  std::string passthrough = "auto";
  // FUSE requests through one io_uring queue per CPU (fs/kernel/wire/fuse_uring.h):
  // auto (when the kernel offers it), on (also turns the fuse module's
  // enable_uring on, as root), off.
  std::string fuse_uring = "auto";
  // Each dataset's raw/ under a read-only overlayfs, so that Python's open()
  // costs no round trip for its isatty() (fs/kernel/raw_overlay.h): auto (as root), off.
  std::string raw_overlay = "auto";
  // A dataset whose scan fails after the mount: false, dlfsd unmounts and
  // exits 2 (as a failure before the mount); true, it answers EIO and the
  // others stay served (one node only: a cluster always exits).
  bool serve_despite_failed_datasets = false;
  // Bytes of an epoch view file the page cache keeps behind a reader reading
  // it in order; the rest is dropped as it moves on (fs/kernel/drop_behind.h).
  // 0: views keep their pages, as other files do.
  uint64_t view_drop_behind = 16ull << 20;
  // Raw files up to this size are put in the kernel's page cache when a
  // reader's open() asks isatty() of them (Python's open() does, right
  // before it reads): the read then costs no request. 0: never.
  uint64_t raw_push_size = 1ull << 20;
  // [cache]
  std::string memory_budget = "50%";   // of physical memory, or a size
  uint64_t extent_size = 8ull << 20;
  unsigned loader_threads = 4;
  // Read-ahead of the load into the page cache while readers miss
  // (cache/load_stager.h): auto (backends on local file systems), on, off.
  std::string load_staging = "auto";
  unsigned backend_requests = 0;       // preads in flight per dataset at most (0: no bound)
  uint64_t read_size = 8ull << 20;
  // [cluster]: the job's daemons (docs/deploy.md). No peers and no Slurm
  // environment: a cluster of one.
  std::vector<std::string> peers;      // "host[:port]", index = rank
  int64_t rank = -1;                   // -1: find this host among the peers
  std::string listen;                  // address of the UCX listener ("" = every address)
  uint64_t port = 7710;                // for peers given without a port
  std::string token_file;              // the job's shared secret (mode 0600/0400)
  std::string token;                   // or inline
  uint64_t heartbeat_ms = 500;
  uint64_t down_after_ms = 3000;
  uint64_t get_timeout_ms = 2000;
  std::string gets = "auto";           // auto | rma | am (transport::GetMode)
  // [[dataset]]
  std::vector<DatasetConfig> datasets;
};

// The job token: inline, or read from token_file, which must be a regular
// file (not a link, FIFO or device: never waited on), owned by the daemon's
// user, that only its owner can read (errors say what to chmod). "" if neither.
Result<std::string> load_job_token(const DaemonConfig& config);

// memory_budget resolved against physical memory ("50%" -> bytes).
Result<uint64_t> resolve_memory_budget(const std::string& text, uint64_t physical_bytes);

}  // namespace dlfs::fs
