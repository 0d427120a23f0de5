// dlfsd: the DLFS daemon. Parses flags and config, then hands over to Daemon.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "common/log.h"
#include "common/units.h"
#include "fs/config.h"
#include "fs/daemon.h"

namespace {

constexpr const char* kDescription =
    "dlfsd: serve read-only deep-learning datasets from memory through a FUSE mount.\n\n"
    "Loads each dataset from its backend directory into memory in the background and\n"
    "serves it at MOUNTPOINT/<name>/raw/ (the original tree, read-only) while it loads.\n"
    "Statistics: MOUNTPOINT/.dlfs/stats (JSON) and `dlfs-ctl stats`.\n"
    "Stops cleanly (unmounting) on SIGTERM, SIGINT or `dlfs-ctl unmount`.\n\n"
    "One dataset:   dlfsd --mountpoint /mnt/dlfs --backend /data/imagenet\n"
    "From a config: dlfsd --config /etc/dlfs/job.toml   (see README.md, Configuration)\n"
    "Flags override the config file.";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{kDescription, "dlfsd"};
  app.get_formatter()->column_width(36);
  std::string config_path, mountpoint, backend, name, format, record_size, header_bytes, budget, extent_size,
      read_size, control_socket, log_level;
  unsigned loader_threads = 0, fuse_threads = 0, backend_requests = 0;
  bool version = false;
  // Epoch-view plan flags (one-dataset mode; a config file sets them per dataset).
  std::optional<uint64_t> seed;
  std::optional<double> shuffle_ratio, min_randomization;
  std::optional<uint32_t> world_size, epochs_listed;
  std::string remainder, round_chunk, order;
  std::optional<uint64_t> window;
  app.add_option("-c,--config", config_path, "TOML config file")->check(CLI::ExistingFile);
  app.add_option("-m,--mountpoint", mountpoint, "Where to mount (an existing, empty directory)");
  app.add_option("-b,--backend", backend, "Dataset directory on backend storage (one-dataset mode)");
  app.add_option("-n,--name", name, "Dataset name in the mount (default: the backend directory's name)");
  app.add_option("--format", format,
                 "Dataset format: files (a file a sample), fixed (fixed-length records) or lmdb (the values of\n"
                 "the LMDB environment at the backend root, in key order; docs/lmdb-sidecar.md)")
      ->check(CLI::IsMember({"files", "fixed", "lmdb"}));
  app.add_option("--record-size", record_size, "fixed: bytes per record (e.g. 3073)");
  app.add_option("--header-bytes", header_bytes, "fixed: bytes to skip at the start of every file");
  app.add_option("--memory-budget", budget, "Memory for dataset bytes: a size (16GiB) or a share of RAM (50%)");
  app.add_option("--extent-size", extent_size, "Unit of loading and checksums (default 8MiB)");
  app.add_option("--read-size", read_size, "Largest single backend read (default 8MiB)");
  app.add_option("--loader-threads", loader_threads, "Backend reads in flight while loading (default 4)");
  app.add_option("--backend-requests", backend_requests,
                 "Backend reads in flight per dataset at most, from any source (loader, rounds, reads of\n"
                 "samples not in memory): LMDBIO's staggering (default 0: no bound)");
  app.add_option("--fuse-threads", fuse_threads, "Most FUSE worker threads (default 16)");
  app.add_option("--control-socket", control_socket, "Control socket path (default /run/dlfs/<mountpoint>.sock)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off (default info)");
  app.add_option("--seed", seed, "Job seed of the epoch views (default 0): same seed, same orders");
  app.add_option("--remainder", remainder, "When samples do not divide by W: pad (wrap, default) or drop")
      ->check(CLI::IsMember({"pad", "drop"}));
  app.add_option("--shuffle-ratio", shuffle_ratio,
                 "R: share of the dataset resident per round (0 < R <= 1; default: from the memory budget)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--round-chunk", round_chunk, "Unit rounds are built and loaded in (default 1MiB)");
  app.add_option("--min-randomization", min_randomization, "Refuse to start if the randomization level is below this")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--order", order,
                 "ordered (exactly the plan, default) or opportunistic (tar streams yield whichever of the next "
                 "--opportunistic-window planned samples is ready first)")
      ->check(CLI::IsMember({"ordered", "opportunistic"}));
  app.add_option("--opportunistic-window", window, "Samples an opportunistic stream may look ahead (default 256)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  bool no_readahead = false;
  app.add_flag("--no-readahead", no_readahead,
               "No read-ahead rings: samples that are not resident are read when asked for");
  app.add_option("--world-size", world_size, "World size shown in epoch listings (default 1)")
      ->check(CLI::Range(1, 65535));
  app.add_option("--epochs-listed", epochs_listed, "Epochs shown in listings (default 1; any can be opened)")
      ->check(CLI::Range(1, 1000000));
  // Cluster flags (docs/deploy.md); a config file's [cluster] section sets the same.
  std::string peers, listen, token_file;
  std::optional<int64_t> rank;
  std::optional<uint64_t> port;
  app.add_option("--peers", peers,
                 "The job's daemons, comma-separated host[:port] (index = rank). Default: from Slurm "
                 "(SLURM_JOB_NODELIST, SLURM_NODEID), else a cluster of one");
  app.add_option("--rank", rank, "This node's index in --peers (default: found from this host's addresses)")
      ->check(CLI::Range(int64_t{0}, int64_t{65535}));
  app.add_option("--listen", listen, "Address of the UCX listener (default: every address)");
  app.add_option("--port", port, "UCX listener port, and the port of peers given without one (default 7710)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{65535}));
  app.add_option("--token-file", token_file,
                 "The job's shared secret (a file only its owner can read); required with more than one node");
  app.add_flag("--version", version, "Print the version and exit");
  CLI11_PARSE(app, argc, argv);
  if (version) {
    std::printf("dlfsd %s\n", DLFS_VERSION);
    return 0;
  }

  dlfs::fs::DaemonConfig config;
  if (!config_path.empty()) {
    auto loaded = dlfs::fs::load_config_file(config_path);
    if (!loaded) {
      std::fprintf(stderr, "dlfsd: %s\n", loaded.status().message().c_str());
      return 2;
    }
    config = std::move(loaded).value();
  }
  auto fail = [](const dlfs::Status& s) {
    std::fprintf(stderr, "dlfsd: %s\n", s.message().c_str());
    return 2;
  };
  auto size_flag = [&](const std::string& text, const char* flag, uint64_t& out) -> dlfs::Status {
    if (text.empty()) return dlfs::Status::ok();
    auto v = dlfs::parse_size(text);
    if (!v) return v.status().with_context(flag);
    out = *v;
    return dlfs::Status::ok();
  };
  if (!mountpoint.empty()) config.mountpoint = mountpoint;
  if (!peers.empty()) {
    config.peers.clear();
    for (size_t b = 0; b <= peers.size();) {
      size_t e = peers.find(',', b);
      if (e == std::string::npos) e = peers.size();
      if (e > b) config.peers.push_back(peers.substr(b, e - b));
      b = e + 1;
    }
  }
  if (rank) config.rank = *rank;
  if (!listen.empty()) config.listen = listen;
  if (port) config.port = *port;
  if (!token_file.empty()) {
    config.token_file = token_file;
    config.token.clear();
  }
  if (!control_socket.empty()) config.control_socket = control_socket;
  if (!log_level.empty()) config.log_level = log_level;
  if (!budget.empty()) config.memory_budget = budget;
  if (loader_threads) config.loader_threads = loader_threads;
  if (backend_requests) config.backend_requests = backend_requests;
  if (fuse_threads) config.fuse_threads = fuse_threads;
  if (auto s = size_flag(extent_size, "--extent-size", config.extent_size); !s) return fail(s);
  if (auto s = size_flag(read_size, "--read-size", config.read_size); !s) return fail(s);
  if (!backend.empty()) {
    dlfs::fs::DatasetConfig d;
    d.backend = backend;
    d.name = name.empty() ? std::filesystem::path(backend).lexically_normal().filename().string() : name;
    if (d.name.empty()) d.name = std::filesystem::path(backend).lexically_normal().parent_path().filename().string();
    if (!format.empty()) d.format.format = format;
    if (auto s = size_flag(record_size, "--record-size", d.format.record_size); !s) return fail(s);
    if (auto s = size_flag(header_bytes, "--header-bytes", d.format.header_bytes); !s) return fail(s);
    if (seed) d.plan.seed = *seed;
    if (!remainder.empty()) d.plan.remainder = remainder;
    if (shuffle_ratio) d.plan.shuffle_ratio = *shuffle_ratio;
    if (auto s = size_flag(round_chunk, "--round-chunk", d.plan.round_chunk); !s) return fail(s);
    if (min_randomization) d.plan.min_randomization = *min_randomization;
    if (world_size) d.plan.world_size = *world_size;
    if (epochs_listed) d.plan.epochs_listed = *epochs_listed;
    if (!order.empty()) d.plan.order = order;
    if (window) d.plan.opportunistic_window = *window;
    if (no_readahead) d.plan.readahead = false;
    config.datasets.push_back(std::move(d));
  } else if (!name.empty() || !format.empty() || !record_size.empty() || !header_bytes.empty() || seed ||
             !remainder.empty() || shuffle_ratio || !round_chunk.empty() || min_randomization || world_size ||
             epochs_listed || !order.empty() || window) {
    return fail(dlfs::Status(EINVAL,
                             "--name, --format, --record-size, --header-bytes and the plan flags need --backend "
                             "(with --config, set them in the [[dataset]] section)"));
  }

  if (auto s = dlfs::init_logging(config.log_level, "dlfsd"); !s) return fail(s);
  auto daemon = dlfs::fs::Daemon::create(std::move(config));
  if (!daemon) {
    spdlog::error("{}", daemon.status().message());
    return 2;
  }
  return (*daemon)->run();
}
