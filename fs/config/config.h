// DaemonConfig: everything dlfsd is told, from a TOML file and/or flags.
//
// The TOML layout: [daemon], [cache], [cluster] (docs/deploy.md) and one
// [[dataset]] table per dataset. Every key is declared once, in a key list
// (common/key_list.h): its member, default, flag, checks and meaning. The
// lists below give DaemonConfig and DatasetConfig their members; a dataset's
// format and plan keys are FormatOptions' (provenance/format_options.h) and
// PlanConfig's (plan/plan_config.h). fs/config/config_keys.cc makes the key
// table from them all. The list: docs/configuration.md, or `dlfsd --config-keys`.
//
// Unknown keys are errors that name the key and list the valid ones: a typo
// must not silently fall back to a default.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/enum_names.h"
#include "common/key_list.h"
#include "common/status.h"
#include "plan/plan_config.h"
#include "provenance/format_options.h"
#include "transport/get_mode.h"

namespace dlfs::fs {

using PlanConfig = plan::PlanConfig;

// A feature used where it helps (auto), always, or never.
enum class Toggle { automatic, on, off };
constexpr std::array<std::string_view, 3> enum_names(Toggle) { return {"auto", "on", "off"}; }
// Whether a feature is on, given whether it helps here (auto's test).
constexpr bool enabled(Toggle t, bool helps) { return t == Toggle::on || (t == Toggle::automatic && helps); }

// A feature used where it can be (auto), or never.
enum class AutoOff { automatic, off };
constexpr std::array<std::string_view, 2> enum_names(AutoOff) { return {"auto", "off"}; }

// [daemon]; control_socket "" is default_control_socket(mountpoint).
#define DLFS_DAEMON_KEYS(KEY)                                                                                       \
  KEY(mountpoint, std::string, "", "-m,--mountpoint", "Where to mount (an existing, empty directory)", .required()) \
  KEY(control_socket, std::string, "", "--control-socket", "Control socket path",                                   \
      .note("/run/dlfs/<mountpoint>.sock"))                                                                         \
  KEY(client_socket, std::string, "", "--client-socket",                                                            \
      "Socket local clients read samples from dlfsd's memory through, without FUSE (docs/client-protocol.md; "      \
      "python/dlfs and libdlfs-client use it when it is there). Who may read is checked per connection as for "     \
      "the views. off: no socket",                                                                                  \
      .note("/run/dlfs-client/<mountpoint>.sock as root, else beside the control socket"))                          \
  KEY(log_level, std::string, "info", "--log-level", "trace, debug, info, warn, error or off")                      \
  KEY(fuse_threads, unsigned, 16, "--fuse-threads", "Most FUSE worker threads", .range(1, 4096))                    \
  KEY(allow_other, bool, true, "", "Let every user read the mount (when dlfsd runs as root)")                       \
  KEY(entry_timeout_s, double, 86400, "", "Seconds the kernel may cache names (the tree is immutable)")             \
  KEY(attr_timeout_s, double, 86400, "", "Seconds the kernel may cache attributes")                                 \
  KEY(passthrough, Toggle, Toggle::automatic, "--passthrough",                                                      \
      "While a dataset loads, the kernel reads raw files not in memory yet straight from their backend files "      \
      "(FUSE passthrough: Linux 6.9+, dlfsd as root; else ignored): auto (datasets on local file systems; not "     \
      "on NFS, Lustre, GPFS and other network file systems, where the kernel's extra open of each file is a "       \
      "server round trip), on, off. Such an open file is checked against the scan when opened, not at each "        \
      "read (docs/internals.md, passthrough)")                                                                   \
  KEY(fuse_uring, Toggle, Toggle::automatic, "--fuse-uring",                                                        \
      "FUSE requests reach dlfsd through one io_uring queue per CPU, answered on the CPU that sent them, "          \
      "instead of /dev/fuse (Linux 6.14+): auto and on (as root, turn on "                                           \
      "/sys/module/fuse/parameters/enable_uring when it is off, which lets FUSE servers that ask use io_uring; "    \
      "not as root, only if it is on already; on warns when it cannot be had), off (fs/kernel/wire/fuse_uring.h)")  \
  KEY(raw_overlay, AutoOff, AutoOff::automatic, "--raw-overlay",                                                    \
      "Each dataset's raw/ under a read-only overlayfs mounted over it (as root), whose files answer ioctls "       \
      "in the kernel: Python's open() then costs no round trip to dlfsd for its isatty(), which the kernel "        \
      "forwards on every FUSE file. auto (as root, with allow_other), off (fs/kernel/raw_overlay.h)")               \
  KEY(view_drop_behind, uint64_t, 16ull << 20, "--view-drop-behind",                                                \
      "Page cache an epoch view file keeps behind a reader that reads it in order; what lies further behind "       \
      "is dropped as the reader moves on (a view is read once per epoch, and its bytes stay in dlfsd's "            \
      "memory: the page cache would hold the dataset a second time). 0 keeps every page, as for other files "       \
      "(fs/kernel/drop_behind.h)",                                                                                  \
      .bytes())                                                                                                     \
  KEY(raw_push_size, uint64_t, 1ull << 20, "--raw-push-size",                                                       \
      "Raw files up to this size, in memory, are put in the kernel's page cache when a reader's open() asks "       \
      "isatty() of them (Python's open() does, right before it reads; the kernel forwards that ioctl to dlfsd "     \
      "at every open), or, under the raw overlay, when the overlay looks them up: the read that follows then "      \
      "costs no request. Once per kernel inode; 0: never",                                                          \
      .bytes())                                                                                                     \
  KEY(serve_despite_failed_datasets, bool, false, "",                                                               \
      "A dataset whose scan fails after the mount answers EIO and the others stay served, instead of dlfsd "        \
      "unmounting and exiting 2 (one node only; docs/stats.md, dataset states)")                                   \
  KEY(metrics_address, std::string, "", "--metrics-address",                                                        \
      "Serve Prometheus metrics at http://HOST:PORT/metrics (docs/metrics.md): PORT or :PORT listens on "          \
      "127.0.0.1 only, HOST:PORT on that address (an IPv4 address, a name, or [IPv6] where CivetWeb has IPv6; "    \
      "0.0.0.0: every address). "   \
      "No authentication: whoever reaches it reads dataset names and counters",                                     \
      .note("off"))

#define DLFS_CACHE_KEYS(KEY)                                                                                        \
  KEY(memory_budget, std::string, "50%", "--memory-budget",                                                         \
      "Memory for dataset bytes: a size (16GiB) or a share of RAM (50%)", .share_or_size())                         \
  KEY(extent_size, uint64_t, 8ull << 20, "--extent-size", "Unit of loading, residency and checksums", .bytes(4096)) \
  KEY(loader_threads, unsigned, 4, "--loader-threads", "Backend reads in flight while loading", .range(1, 4096))    \
  KEY(load_staging, Toggle, Toggle::automatic, "--load-staging",                                                    \
      "While readers read the backend for bytes not loaded yet, read the loader's next extents ahead into the "     \
      "page cache (8 files in flight) and load them from there afterwards, instead of loading beside the "          \
      "readers and reading those bytes twice: auto (datasets on local file systems, where it was measured), "       \
      "on, off (cache/load_stager.h)")                                                                              \
  KEY(read_size, uint64_t, 8ull << 20, "--read-size", "Largest single backend read", .bytes(4096))                  \
  KEY(backend_requests, unsigned, 0, "--backend-requests",                                                          \
      "Backend reads in flight per dataset at most, from any source (loader, rounds, reads of samples not in "      \
      "memory): LMDBIO's staggering",                                                                               \
      .range(0, 4096).note("0 (no bound)"))

// [cluster]: the job's daemons (docs/deploy.md). No peers and no Slurm
// environment: a cluster of one.
#define DLFS_CLUSTER_KEYS(KEY)                                                                                        \
  KEY(peers, std::vector<std::string>, {}, "--peers",                                                                 \
      "The job's daemons, host[:port] each, index = rank (the flag: comma-separated)",                                \
      .note("from Slurm (SLURM_JOB_NODELIST, SLURM_NODEID), else a cluster of one"))                                  \
  KEY(rank, int64_t, -1, "--rank", "This node's index in the peers",                                                  \
      .range(-1, 65535).note("-1 (found from this host's addresses)"))                                                \
  KEY(listen, std::string, "", "--listen", "Address of the UCX listener", .note("every address"))                     \
  KEY(port, uint64_t, 7710, "--port", "UCX listener port, and the port of peers given without one",                   \
      .range(1, 65535))                                                                                               \
  KEY(token_file, std::string, "", "--token-file",                                                                    \
      "The job's shared secret: a file only its owner can read; this or token is required with more than one "        \
      "node (the flag also drops the file's token)",                                                                  \
      .note("none").clears("token"))                                                                                  \
  KEY(token, std::string, "", "",                                                                                     \
      "The job's shared secret inline, instead of token_file (discouraged: configs get copied)", .note("none"))       \
  KEY(heartbeat_ms, uint64_t, 500, "", "Each node pings the peers it watches this often (milliseconds)", .range(1))  \
  KEY(down_after_ms, uint64_t, 2000, "", "A watched peer that has not answered for this long is down (milliseconds)", \
      .range(1))                                                                                                      \
  KEY(watch_peers, uint64_t, 3, "",                                                                                   \
      "Peers each node pings: the next ranks on a ring (0: every peer); the others are pinged only while they "       \
      "load, and are reported down by their watchers or when their connection breaks",                               \
      .range(0, 65535))                                                                                               \
  KEY(get_timeout_ms, uint64_t, 2000, "", "A remote read slower than this is redone from the backend (milliseconds)", \
      .range(1))                                                                                                      \
  KEY(gets, transport::GetMode, transport::GetMode::automatic, "",                                                    \
      "How remote reads go: auto (one-sided ucp_get where a transport reads so, as shared memory or RDMA; "           \
      "DLFS's own request/reply messages where UCX would emulate the get, as over TCP, so that a peer "               \
      "killed mid-read cannot take this node down), rma (always ucp_get), am (always messages)")

// [[dataset]], besides its format (FormatOptions) and plan (PlanConfig) keys.
#define DLFS_DATASET_KEYS(KEY)                                                                                       \
  KEY(name, std::string, "", "-n,--name", "Dataset name in the mount",                                               \
      .required().note("the backend directory's name"))                                                              \
  KEY(backend, std::string, "", "-b,--backend", "Dataset directory on backend storage (the flag: one-dataset mode)", \
      .required())                                                                                                   \
  KEY(view_owner, std::string, "", "--view-owner",                                                                   \
      "Owner of what DLFS makes of the dataset (epochs/: views, index files): a user name or number",                \
      .note("the backend directory's owner"))                                                                        \
  KEY(view_group, std::string, "", "--view-group", "Group of what DLFS makes of the dataset: a group name or number", \
      .note("the backend directory's group"))                                                                        \
  KEY(view_mode, std::string, "", "--view-mode",                                                                     \
      "Who may read what DLFS makes of the dataset, as read bits in octal: 0440 owner and group, 0444 everyone, "     \
      "0400 the owner (root always may; write and execute bits are ignored). The kernel checks it at every "         \
      "open, listing and xattr (fs/dataset/audience.h)",                                                             \
      .note("from the backend: a class (owner, group, other) may read only if it can read every file of the "        \
            "dataset there"))

struct DatasetConfig {
  DLFS_DATASET_KEYS(DLFS_KEY_MEMBER)
  provenance::FormatOptions format;
  PlanConfig plan;
};

struct DaemonConfig {
  DLFS_DAEMON_KEYS(DLFS_KEY_MEMBER)
  DLFS_CACHE_KEYS(DLFS_KEY_MEMBER)
  DLFS_CLUSTER_KEYS(DLFS_KEY_MEMBER)
  std::vector<DatasetConfig> datasets;
};

// The job token: inline, or read from token_file, which must be a regular
// file (not a link, FIFO or device: never waited on), owned by the daemon's
// user, that only its owner can read (errors say what to chmod). "" if neither.
Result<std::string> load_job_token(const DaemonConfig& config);

// view_mode's text ("0440", "440") as permission bits; EINVAL names the text.
Result<uint32_t> parse_view_mode(const std::string& text);

// metrics_address parsed: "9567" and ":9567" are 127.0.0.1:9567; "host:9567",
// "0.0.0.0:9567", "[::1]:9567". `host` is kept as written (brackets
// dropped); `ipv6` says it was bracketed. EINVAL names the key and the text.
struct ListenAddress {
  std::string host;
  uint16_t port = 0;
  bool ipv6 = false;
  std::string text() const { return ipv6 ? "[" + host + "]:" + std::to_string(port) : host + ":" + std::to_string(port); }
};
Result<ListenAddress> parse_metrics_address(const std::string& text);

// memory_budget resolved against physical memory ("50%" -> bytes).
Result<uint64_t> resolve_memory_budget(const std::string& text, uint64_t physical_bytes);

}  // namespace dlfs::fs
