// dlfsd: the DLFS daemon. Parses flags and config, then hands over to Daemon.
#include <sys/resource.h>

#include <malloc.h>
#include <unistd.h>

#include <cstdio>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "common/log.h"
#include "fs/config/config_keys.h"
#include "fs/config/config_file.h"
#include "fs/config/config_man.h"
#include "fs/daemon/daemon.h"
#include "fs/daemon/dlfsd_man.h"

namespace {

constexpr const char* kDescription =
    "dlfsd: serve read-only deep-learning datasets from memory through a FUSE mount.\n\n"
    "Loads each dataset from its backend directory into memory in the background and\n"
    "serves it at MOUNTPOINT/<name>/raw/ (the original tree, read-only) while it loads.\n"
    "Statistics: MOUNTPOINT/.dlfs/stats (JSON) and `dlfs-ctl stats`.\n"
    "Stops cleanly (unmounting) on SIGTERM, SIGINT or `dlfs-ctl unmount`.\n\n"
    "One dataset:   dlfsd --mountpoint /mnt/dlfs --backend /data/imagenet\n"
    "From a config: dlfsd --config /etc/dlfs/job.toml   (see docs/usage.md and dlfs.toml(5))\n"
    "Flags override the config file. Every key and its flag: docs/configuration.md\n"
    "(dlfsd --config-keys prints the same table).";

// glibc raises its mmap threshold to the size of any large block that is
// freed; blocks of that size then come from the heap arenas, which keep the
// memory. Distinct epoch views allocate and drop tables of up to megabytes
// (orders, tar layouts, read-ahead rings), so with that adjustment RSS grew
// without bound under tools/soak.py (66 -> 371 MiB in 5 minutes on one node).
// A fixed threshold (glibc's initial 128 KiB) turns the adjustment off: large
// blocks stay mmapped and go back to the kernel when freed. The hot read path
// allocates nothing (one Gather per FUSE thread), so this costs no syscalls there.
void keep_large_blocks_mmapped() { mallopt(M_MMAP_THRESHOLD, 128 * 1024); }

int fail(const dlfs::Status& s) {
  std::fprintf(stderr, "dlfsd: %s\n", s.message().c_str());
  return 2;
}

// A node of a job of N members holds about 3N descriptors for them (its
// control connection to each, each one's to it, a UCX endpoint each): the
// default soft limit of 1024 is reached near 340 nodes. The hard limit is the
// administrator's; the soft one is this process's to raise.
void raise_open_files_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= r.rlim_max) return;
  const rlim_t was = r.rlim_cur;
  r.rlim_cur = r.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &r) == 0)
    spdlog::debug("open files limit raised from {} to {}", was, r.rlim_cur);
}

}  // namespace

int main(int argc, char** argv) {
  keep_large_blocks_mmapped();
  CLI::App app{kDescription, "dlfsd"};
  app.get_formatter()->column_width(36);
  std::string config_path;
  bool version = false, list_keys = false;
  app.add_option("-c,--config", config_path, "TOML config file")->check(CLI::ExistingFile);
  app.add_flag("--config-keys", list_keys,
               "Print every config key (section, key, flag, type, default, meaning) as Markdown and exit");
  app.add_flag("--version", version, "Print the version and exit");
  dlfs::fs::ConfigFlags flags;
  dlfs::fs::add_config_flags(app, flags);
  // Hidden (no group): the build runs it to make dlfsd(8) and dlfs.toml(5)
  // from this app and the key table (docs/man/meson.build).
  std::string man_section;
  app.add_option("--man-page", man_section, "Print the manual page of section 8 (dlfsd) or 5 (dlfs.toml) and exit")
      ->check(CLI::IsMember({"5", "8"}))
      ->group("");
  CLI11_PARSE(app, argc, argv);
  if (!man_section.empty()) {
    std::fputs((man_section == "8" ? dlfs::fs::dlfsd_man_page(app, DLFS_VERSION)
                                   : dlfs::fs::config_man_page(DLFS_VERSION)).c_str(), stdout);
    return 0;
  }
  if (version) {
    std::printf("dlfsd %s\n", DLFS_VERSION);
    return 0;
  }
  if (list_keys) {
    std::fputs(dlfs::fs::config_keys_markdown().c_str(), stdout);
    return 0;
  }

  auto config = dlfs::fs::config_from_file_and_flags(config_path, flags);
  if (!config) return fail(config.status());
  if (auto s = dlfs::init_logging(config->log_level, "dlfsd"); !s) return fail(s);
  raise_open_files_limit();
  // Daemon::create validates the config (validate_config) before anything starts.
  auto daemon = dlfs::fs::Daemon::create(std::move(config).value());
  if (!daemon) {
    spdlog::error("{}", daemon.status().message());
    return 2;
  }
  return (*daemon)->run();
}
