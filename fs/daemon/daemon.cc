#include "fs/config/config_file.h"
#include "fs/daemon/daemon.h"

#include "fs/daemon/plan_report.h"

#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/control_protocol.h"
#include "common/units.h"
#include "fs/daemon/client_server.h"
#include "fs/daemon/control_server.h"
#include "fs/daemon/control_verify.h"
#include "fs/daemon/metrics.h"
#include "fs/daemon/metrics_server.h"
#include "fs/kernel/mountpoint_check.h"
#include "fs/daemon/stats.h"

#ifndef DLFS_VERSION
#define DLFS_VERSION "0.0.0"
#endif

namespace dlfs::fs {
namespace {

uint64_t physical_memory_bytes() {
  return static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

double unix_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// The checks of a dataset root that cost one stat: a missing or unreadable
// root fails before the mount, with the scan's own words (it checks again).
Result<int64_t> check_dataset_root(const DatasetConfig& dc) {
  const std::string what = "dataset root '" + dc.backend + "'";
  const std::string ctx = "dataset '" + dc.name + "'";
  struct stat st {};
  if (::stat(dc.backend.c_str(), &st) != 0) return Status::from_errno(errno, what).with_context(ctx);
  if (!S_ISDIR(st.st_mode)) return Status(ENOTDIR, what + " is not a directory").with_context(ctx);
  if (::access(dc.backend.c_str(), R_OK | X_OK) != 0) return Status::from_errno(errno, what).with_context(ctx);
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// TEST ONLY: DLFS_TEST_ONLY_SCAN_DELAY_MS delays each dataset's scan by that
// many milliseconds, so that tests/integration/31_mount_before_scan.sh can see
// a mount whose datasets are still scanning without generating a huge tree.
std::chrono::milliseconds test_only_scan_delay() {
  const char* v = std::getenv("DLFS_TEST_ONLY_SCAN_DELAY_MS");
  if (!v || !*v) return std::chrono::milliseconds(0);
  char* end = nullptr;
  const long ms = std::strtol(v, &end, 10);
  if (*end != '\0' || ms < 0 || ms > 600000) {
    spdlog::warn("DLFS_TEST_ONLY_SCAN_DELAY_MS='{}' ignored: not a number of milliseconds up to 600000", v);
    return std::chrono::milliseconds(0);
  }
  spdlog::warn("DLFS_TEST_ONLY_SCAN_DELAY_MS: every dataset's scan starts {} ms late (a test hook)", ms);
  return std::chrono::milliseconds(ms);
}

Status not_ready(const DatasetSlot& slot) {
  if (slot.state() == DatasetSlot::State::failed) return slot.error();
  return Status(EAGAIN, "dataset '" + slot.name() + "' is not ready yet (" + state_name(slot.state()) +
                            "); `dlfs-ctl wait-ready` waits for it");
}

}  // namespace

Daemon::Daemon(DaemonConfig config) : config_(std::move(config)), started_(std::chrono::steady_clock::now()) {}

Daemon::~Daemon() {
  if (metrics_) metrics_->stop();  // no scrape while the rest goes away (run() stopped it already)
  client_.reset();
  control_.reset();  // no control requests while the rest goes away
  stopping_ = true;
  if (startup_.joinable()) startup_.join();  // run() normally has
  for (auto& slot : slots_)
    if (Dataset* d = slot->get()) d->stop_loading();
}

Result<std::unique_ptr<Daemon>> Daemon::create(DaemonConfig config) {
  DLFS_RETURN_IF_ERROR(validate_config(config));
  auto mnt = check_mountpoint(config.mountpoint);
  if (!mnt) return mnt.status();
  config.mountpoint = *mnt;
  if (config.control_socket.empty()) config.control_socket = default_control_socket(config.mountpoint);
  const bool default_client_socket_path = config.client_socket.empty();
  if (default_client_socket_path) config.client_socket = default_client_socket(config.mountpoint);

  std::unique_ptr<Daemon> d(new Daemon(std::move(config)));
  auto budget = resolve_memory_budget(d->config_.memory_budget, physical_memory_bytes());
  if (!budget) return budget.status();
  d->budget_bytes_ = *budget;

  // Who the job's daemons are decides which stripe this node holds.
  transport::MembershipInput mi;
  mi.peers = d->config_.peers;
  if (d->config_.rank >= 0) mi.rank = static_cast<uint32_t>(d->config_.rank);
  mi.default_port = static_cast<uint16_t>(d->config_.port);
  mi.local_addresses = transport::local_addresses();
  auto membership = transport::resolve_membership(mi);
  if (!membership) return membership.status().with_context("cluster");
  d->membership_ = *membership;
  if (membership->peers.size() > 1) {  // the job token is read before the mount too
    auto token = load_job_token(d->config_);
    if (!token) return token.status();
  }

  // Every root is checked now; the scans run after the mount (run()).
  for (const auto& dc : d->config_.datasets) {
    auto mtime = check_dataset_root(dc);
    if (!mtime) return mtime.status();
    d->slots_.push_back(std::make_unique<DatasetSlot>(dc.name, dc.backend, dc.format.format, *mtime));
  }

  d->namespace_ = std::make_unique<Namespace>(
      d->slots_, [raw = d.get()](const Reader* reader) { return json_text(raw->snapshot(true, reader), 2) + "\n"; },
      now_ns(), ::geteuid(),
      ::getegid());
  // The client socket is optional: where its default cannot be made (no
  // /run, a directory another user owns), dlfsd serves the mount without it.
  if (Status st = d->start_client_server(); !st) {
    if (!default_client_socket_path) return st;
    spdlog::warn("no client socket ({}): python/dlfs and libdlfs-client read through the mount; set client_socket "
                 "to a path that works, or to off", st.message());
  }
  // Before the control server, whose stats read it.
  d->kernel_ = std::make_unique<KernelSession>(d->config_, *d->namespace_);
  auto control = ControlServer::start(d->config_.control_socket, *d);
  if (!control) return control.status();
  d->control_ = std::move(control).value();
  DLFS_RETURN_IF_ERROR(d->start_metrics_server());
  return d;
}

Status Daemon::start_metrics_server() {
  if (config_.metrics_address.empty() || config_.metrics_address == "off") return Status::ok();
  DLFS_ASSIGN_OR_RETURN(ListenAddress address, parse_metrics_address(config_.metrics_address));
  // On a CivetWeb thread, from the same snapshot as `dlfs-ctl stats` (fs/daemon/metrics.h).
  auto server = MetricsServer::start(address, [this] { return metrics_text(snapshot(true), unix_seconds()); });
  if (!server) return server.status();
  metrics_ = std::move(server).value();
  metrics_live_ = metrics_.get();
  spdlog::info("Prometheus metrics at http://{}/metrics", metrics_->address());
  return Status::ok();
}

int Daemon::run() {
  if (Status s = kernel_->mount(); !s) {
    spdlog::error("{}", s.message());
    return 1;
  }
  startup_ = std::thread([this] { start_datasets(); });
  spdlog::info("mounted at {} ({} dataset{}, scanning), control socket {}", config_.mountpoint, slots_.size(),
               slots_.size() == 1 ? "" : "s", config_.control_socket);
  const int rc = kernel_->serve();
  // No scrape from here on: a scrape's snapshot reads what the stop takes down
  // (the client socket, the datasets). Its figures stay in status.
  if (metrics_) metrics_->stop();
  stop_datasets();
  kernel_->unmount();
  if (exit_code_ != 0) return exit_code_;  // a dataset failed after the mount: as create() failing
  // rc is the signal number after a signal-driven exit; that is a clean stop.
  return (rc == 0 || rc == SIGTERM || rc == SIGINT || rc == SIGHUP || unmount_requested_) ? 0 : 1;
}

void Daemon::stop_datasets() {
  stopping_ = true;
  startup_.join();  // a scan under way ends first: it cannot be cut short
  // Requests still parked get EIO before the session goes.
  for (auto& slot : slots_) slot->fail(Status(ESHUTDOWN, "dlfsd is stopping"));
  client_.reset();  // after the slots failed: a session waiting for a scan has its answer
  for (auto& slot : slots_)
    if (Dataset* d = slot->get()) d->stop_loading();
}

void Daemon::start_datasets() {
  try {
    open_datasets();
  } catch (const std::exception& e) {  // a thread must not let one escape
    spdlog::error("starting the datasets: unexpected exception: {}", e.what());
    for (auto& slot : slots_) slot->fail(Status(EIO, std::string("unexpected exception: ") + e.what()));
    stop_serving(2);
  }
}

void Daemon::open_datasets() {
  const auto t0 = std::chrono::steady_clock::now();
  const Placement placement{static_cast<uint32_t>(membership_.peers.size()), membership_.self};
  const bool cluster = membership_.peers.size() > 1;
  // Opened but not yet published (a cluster publishes after the join).
  std::vector<std::unique_ptr<Dataset>> opened(slots_.size());
  auto failed = [&](DatasetSlot& slot, const Status& why) {
    spdlog::error("{}", why.message());
    slot.fail(why);
    // The rest are not served either: dlfsd exits, as a failure before the mount did.
    for (auto& other : slots_) other->fail(Status(EIO, "not served: " + why.message()));
    stop_serving(2);
  };

  // The budget goes to datasets in config order, each taking what it needs.
  uint64_t left = budget_bytes_;
  const auto delay = test_only_scan_delay();
  for (size_t i = 0; i < slots_.size(); ++i) {
    for (auto until = std::chrono::steady_clock::now() + delay; !stopping_ && std::chrono::steady_clock::now() < until;)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (stopping_) return;
    auto ds = Dataset::open(config_.datasets[i], left, config_, placement);
    if (!ds && config_.serve_despite_failed_datasets && !cluster) {
      spdlog::error("{} (the other datasets stay served: serve_despite_failed_datasets)", ds.status().message());
      slots_[i]->fail(ds.status());
      continue;
    }
    if (!ds) return failed(*slots_[i], ds.status());
    // What it holds: its storage buffer, or its two round slots (before,
    // a dataset in rounds left the whole budget to the next one as well).
    const cache::RoundPipeline* rounds = (*ds)->round_pipeline();
    left -= std::min(left, (*ds)->buffer().capacity_bytes() + (rounds ? 2 * rounds->slot_bytes() : 0));
    if (cluster) {
      slots_[i]->set_joining();
      opened[i] = std::move(ds).value();
      continue;
    }
    (*ds)->start_loading();
    slots_[i]->publish(std::move(ds).value());
    overlay_raw(*slots_[i]);
    spdlog::info("[{}] ready after {:.2f}s", slots_[i]->name(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }

  // A cluster of one has no peer to fetch from or serve: no UCX context, no
  // registration of the stripe and no progress thread (whose polling cost
  // ~13% of a core when idle and woke the CPU 5,000 times a second).
  if (cluster && !stopping_) {
    std::vector<Dataset*> all;
    for (auto& d : opened) all.push_back(d.get());
    if (Status s = join_cluster(all); !s) return failed(*slots_.front(), s.with_context("cluster"));
    for (size_t i = 0; i < slots_.size(); ++i) {
      opened[i]->start_loading();
      slots_[i]->publish(std::move(opened[i]));
      overlay_raw(*slots_[i]);
    }
  }
  // The scans' temporaries (full paths of every file) are freed by now; give
  // that heap back so RSS shows what the daemon really keeps.
  ::malloc_trim(0);
  spdlog::info("all {} dataset{} ready after {:.2f}s", slots_.size(), slots_.size() == 1 ? "" : "s",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

void Daemon::stop_serving(int exit_code) {
  exit_code_ = exit_code;
  stopping_ = true;
  kernel_->exit();
}

// After the load (fs/kernel/raw_overlay.h, "When"); the slot outlives the overlays' thread.
void Daemon::overlay_raw(const DatasetSlot& slot) {
  kernel_->overlay_raw(slot.name(), [&slot] {
    const Dataset* ds = slot.get();
    return ds != nullptr && !ds->loading();
  });
}

Status Daemon::join_cluster(const std::vector<Dataset*>& datasets) {
  auto token = load_job_token(config_);
  if (!token) return token.status();
  transport::ClusterOptions co;
  co.membership = membership_;
  co.token = *token;
  co.listen_host = config_.listen;
  co.heartbeat = std::chrono::milliseconds(config_.heartbeat_ms);
  co.down_after = std::chrono::milliseconds(config_.down_after_ms);
  co.watch = static_cast<uint32_t>(config_.watch_peers);
  co.get_timeout = std::chrono::milliseconds(config_.get_timeout_ms);
  co.gets = config_.gets;
  std::vector<transport::ServedDataset> served;
  for (Dataset* ds : datasets) {
    transport::ServedDataset sd{ds->name(), ds->fingerprint(), &ds->buffer(), &ds->fetcher()};
    if (ds->planner().spread()) {  // rounds over the job's memory
      sd.rounds = ds->round_pipeline();
      sd.reader = &ds->reader();
      sd.round_key = ds->planner().round_key(ds->fingerprint());
    }
    served.push_back(std::move(sd));
  }
  auto cluster = transport::Cluster::create(std::move(co), std::move(served), [datasets] {
    transport::NodeBytes b;
    for (const Dataset* ds : datasets) {
      const auto by = bytes_by_source(*ds);
      b.local += by.local;
      b.remote += by.remote;
      b.backend += by.backend;
    }
    return b;
  });
  if (!cluster) return cluster.status();
  cluster_ = std::move(cluster).value();
  cluster_live_ = cluster_.get();
  return Status::ok();
}

Status Daemon::start_client_server() {
  if (config_.client_socket == "off") return Status::ok();
  ClientPolicy policy;
  policy.others_allowed = config_.allow_other && ::geteuid() == 0;  // as the mount's allow_other
  policy.daemon_uid = ::geteuid();
  DatasetLookup lookup = [this](const std::string& name) -> Result<const Dataset*> {
    for (const auto& slot : slots_)
      if (slot->name() == name) {
        DLFS_ASSIGN_OR_RETURN(Dataset * d, slot->wait());
        return static_cast<const Dataset*>(d);
      }
    std::string names;
    for (const auto& slot : slots_) names += (names.empty() ? "'" : ", '") + slot->name() + "'";
    return Status(ENOENT, "no dataset '" + name + "' here (datasets: " + names + ")");
  };
  auto server = ClientServer::start(config_.client_socket, policy, std::move(lookup));
  if (!server) return server.status();
  client_ = std::move(server).value();
  namespace_->set_client_socket(client_->path());
  return Status::ok();
}

nlohmann::json Daemon::snapshot(bool detailed, const Reader* reader) const {
  DaemonFacts f;
  f.version = DLFS_VERSION;
  f.mountpoint = config_.mountpoint;
  f.pid = ::getpid();
  f.uptime_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  f.budget_bytes = budget_bytes_;
  nlohmann::json j = build_stats(f, slots_, detailed, namespace_.get(), reader);
  if (transport::Cluster* c = cluster_live_.load()) j["cluster"] = c->status();
  if (detailed) j["fuse"] = kernel_->stats();
  if (detailed && client_) j["client"] = client_->stats();
  const MetricsServer* m = metrics_live_.load();
  j["metrics"] = m ? m->stats() : nlohmann::json(nullptr);  // the Prometheus endpoint, null when off
  return j;
}

nlohmann::json Daemon::status() { return snapshot(false); }
nlohmann::json Daemon::stats() { return snapshot(true); }

Result<nlohmann::json> Daemon::verify(const std::string& dataset, const ProgressFn& progress) {
  nlohmann::json list = nlohmann::json::array();
  bool all_ok = true, found = false;
  for (auto& slot : slots_) {
    if (!dataset.empty() && slot->name() != dataset) continue;
    found = true;
    Dataset* d = slot->get();
    if (!d) return not_ready(*slot);
    nlohmann::json one = verify_dataset_json(*d, progress);
    all_ok = all_ok && one["ok"].get<bool>();
    list.push_back(std::move(one));
  }
  if (!found) return Status(ENOENT, "no dataset named '" + dataset + "'");
  return nlohmann::json{{"datasets", list}, {"ok", all_ok}};
}

Result<const Dataset*> Daemon::dataset_arg(const nlohmann::json& args) const {
  std::string name;
  if (auto it = args.find("dataset"); it != args.end()) {
    if (!it->is_string()) return Status(EINVAL, "\"dataset\" must be a string");
    name = it->get<std::string>();
  }
  if (slots_.empty()) return Status(ENOENT, "no datasets are served");
  for (const auto& slot : slots_) {
    if (!name.empty() && slot->name() != name) continue;
    if (const Dataset* d = slot->get()) return d;
    return not_ready(*slot);
  }
  return Status(ENOENT, "no dataset named '" + name + "'");
}

namespace {
// An optional non-negative integer argument; errors name it.
Status uint_arg(const nlohmann::json& args, const char* key, uint64_t& out) {
  auto it = args.find(key);
  if (it == args.end() || it->is_null()) return Status::ok();
  if (!it->is_number_unsigned()) return Status(EINVAL, std::string("\"") + key + "\" must be a non-negative integer");
  out = it->get<uint64_t>();
  return Status::ok();
}
}  // namespace

Result<nlohmann::json> Daemon::plan(const nlohmann::json& args) {
  auto ds = dataset_arg(args);
  if (!ds) return ds.status();
  uint64_t epoch = 0, world = (*ds)->planner().config().world_size, rank = 0, show = 10;
  DLFS_RETURN_IF_ERROR(uint_arg(args, "epoch", epoch));
  DLFS_RETURN_IF_ERROR(uint_arg(args, "world_size", world));
  DLFS_RETURN_IF_ERROR(uint_arg(args, "rank", rank));
  DLFS_RETURN_IF_ERROR(uint_arg(args, "show", show));
  if (world > 65535 || rank > 65535) return Status(EINVAL, "world size and rank must be below 65536");
  auto j = plan_json(**ds, epoch, static_cast<uint32_t>(world), static_cast<uint32_t>(rank), std::min<uint64_t>(show, 100000));
  if (!j) return j.status();
  (*j)["view"] = config_.mountpoint + "/" + (*ds)->name() + "/epochs/" + std::to_string(epoch) + "/" +
                 std::to_string(world) + "/" + std::to_string(rank);
  return *j;
}

Result<nlohmann::json> Daemon::shuffle_report(const nlohmann::json& args, const ProgressFn& progress) {
  auto ds = dataset_arg(args);
  if (!ds) return ds.status();
  uint64_t epochs = 10;
  DLFS_RETURN_IF_ERROR(uint_arg(args, "epochs", epochs));
  if (epochs < 2 || epochs > 1000) return Status(EINVAL, "\"epochs\" must be from 2 to 1000");
  return shuffle_report_json(**ds, epochs, [&](uint64_t done, uint64_t total) {
    if (progress) progress({{"dataset", (*ds)->name()}, {"epochs_done", done}, {"epochs_total", total}});
  });
}

Status Daemon::unmount() {
  if (!kernel_->mounted()) return Status(EAGAIN, "the file system is not mounted yet");
  spdlog::info("unmount requested over the control socket");
  unmount_requested_ = true;
  kernel_->exit();
  return Status::ok();
}

}  // namespace dlfs::fs
