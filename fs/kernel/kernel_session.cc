#include "fs/kernel/kernel_session.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <spdlog/spdlog.h>

#include "fs/kernel/fuse_connection.h"
#include "fs/kernel/fuse_ops.h"
#include "fs/kernel/mount_readahead.h"
#include "fs/kernel/mountinfo.h"
#include "fs/kernel/wire/fuse_wire.h"

namespace dlfs::fs {
namespace {

// The signal that wakes the loop's thread when exit() is called from
// another thread. libfuse's own handlers are installed for TERM/INT/HUP;
// SIGUSR1 only needs to interrupt the wait, fuse_session_exit() was called.
void wake_handler(int) {}

constexpr const char* kEnableUringParam = "/sys/module/fuse/parameters/enable_uring";

bool kernel_enables_uring() {
  std::ifstream in(kEnableUringParam);
  char c = 0;
  return in >> c && (c == 'Y' || c == 'y' || c == '1');
}

// Threads per io_uring queue: fuse_threads spread over the CPUs, 2 at least.
unsigned uring_threads_per_queue(unsigned fuse_threads) { return std::max(2u, fuse_threads / uring_queue_count()); }

FuseOptions fuse_options(const DaemonConfig& c) {
  FuseOptions o;
  o.entry_timeout_s = c.entry_timeout_s;
  o.attr_timeout_s = c.attr_timeout_s;
  o.raw_push_size = c.raw_push_size;
  o.push_slots = c.fuse_threads / 2;  // one worker: it never pushes
  return o;
}

// The overlay reads the FUSE files with its mounter's credentials (root):
// without allow_other it would let every user read what FUSE lets only root
// read. So it only comes with allow_other.
std::unique_ptr<RawOverlays> make_raw_overlays(const DaemonConfig& c) {
  if (c.raw_overlay != AutoOff::off && !c.allow_other)
    return std::make_unique<RawOverlays>(AutoOff::off, "allow_other is off, and the overlay would let every user read through it");
  return std::make_unique<RawOverlays>(c.raw_overlay);
}

}  // namespace

KernelSession::KernelSession(const DaemonConfig& config, const Namespace& ns)
    : config_(config), state_(ns, fuse_options(config)), raw_overlays_(make_raw_overlays(config)) {
  // The kernel is told through the session, which exists before any read is
  // answered and is destroyed only after serve() stopped this.
  DropBehindOptions o;
  o.keep_bytes = config_.view_drop_behind;
  drop_behind_ = std::make_unique<ViewDropBehind>(o, [this](uint64_t ino, uint64_t off, uint64_t len) {
    return fuse_lowlevel_notify_inval_inode(session_.load(std::memory_order_acquire), ino, static_cast<off_t>(off),
                                            static_cast<off_t>(len));
  });
  state_.drop_behind.store(drop_behind_.get(), std::memory_order_release);
}

KernelSession::~KernelSession() {
  // serve() and unmount() normally ran; a session never served still goes cleanly.
  stop_waker();
  drop_behind_->stop();
  if (session_.load()) unmount();
}

// The session, with its signal handlers; null (and logged by libfuse) on failure.
fuse_session* KernelSession::new_session(Status* why) {
  // fsname and subtype make the mount table say "dlfs ... fuse.dlfs": how a
  // restarted daemon recognises a mount its dead predecessor left (mountinfo.h).
  const std::string name(kMountName);
  std::string opts = "ro,default_permissions,fsname=" + name + ",subtype=" + name + ",max_read=1048576";
  if (config_.allow_other && ::geteuid() == 0) opts += ",allow_other";
  std::vector<std::string> argv_store = {"dlfsd", "-o", opts};
  std::vector<char*> argv;
  for (auto& s : argv_store) argv.push_back(s.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  const fuse_lowlevel_ops& ops = fuse_operations();
  // The userdata is a WireUser*: the wire hooks get it too (fuse_wire.h).
  fuse_session* se = fuse_session_new(&args, &ops, sizeof(ops), static_cast<WireUser*>(&state_));
  fuse_opt_free_args(&args);
  if (!se) {
    *why = Status(EIO, "cannot create the FUSE session (see the message above)");
    return nullptr;
  }
  // A shell starts background jobs with SIGINT ignored, and libfuse only
  // installs its handlers over default dispositions: restore them so that
  // SIGTERM and SIGINT always mean "unmount and exit".
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  if (fuse_set_signal_handlers(se) != 0) {
    fuse_session_destroy(se);
    *why = Status(EIO, "cannot install signal handlers");
    return nullptr;
  }
  return se;
}

Status KernelSession::mount() {
  // Before the session exists: an exit() from another thread signals this one.
  struct sigaction sa {};
  sa.sa_handler = wake_handler;
  ::sigaction(SIGUSR1, &sa, nullptr);
  loop_thread_ = ::pthread_self();
  Status why;
  fuse_session* se = new_session(&why);
  if (!se) return why;
  session_.store(se, std::memory_order_release);
  state_.push.set_session(se);

  // Before the mount: the kernel offers io_uring in INIT only if enabled then.
  const bool uring = want_uring();
  if (fuse_session_mount(se, config_.mountpoint.c_str()) != 0) {
    stop_waker();  // an exit() asked for during the mount
    state_.push.set_session(nullptr);
    session_.store(nullptr, std::memory_order_release);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return Status(EIO, "cannot mount at '" + config_.mountpoint +
                           "' (is /dev/fuse available and fusermount3 installed?)");
  }
  // From the mount table, not a stat(): nothing of the mount answers yet.
  connection_ = fuse_connection_of(config_.mountpoint);
  if ((config_.passthrough != Toggle::off || uring) && use_wire_io()) wire_up(uring);
  // Raise the kernel's readahead window once INIT is done (needs the loop
  // running to answer the stat, hence a thread).
  tune_ = std::thread([this] {
    Status s = set_mount_readahead(config_.mountpoint, 1024);
    if (!s) spdlog::warn("reads stay at the kernel's default request size (128 KiB): {}", s.message());
  });
  return Status::ok();
}

// What the wire hooks are to ask for at INIT, and what follows from it.
void KernelSession::wire_up(bool uring) {
  WireState& w = state_.wire;
  if (config_.passthrough != Toggle::off) {
    state_.passthrough.set_registrar(kernel_registrar(fuse_session_fd(session_.load())));
    w.passthrough.wanted = true;
  }
  if (uring) {
    w.uring.on_negotiated = [this] { start_uring(); };
    w.uring.wanted = true;
    // A push waits for pages a READ may be bringing in; that READ needs a
    // free entry on its CPU's queue, so at most half of one queue pushes.
    state_.push.limit_slots(uring_threads_per_queue(config_.fuse_threads) / 2);
  }
}

// Before the loop reads INIT: the session reads requests and writes replies
// through the wire hooks, which add what passthrough and FUSE over io_uring
// need to the wire. Failing that, neither is used.
bool KernelSession::use_wire_io() {
  fuse_session* se = session_.load();
  const fuse_custom_io io = wire_io();
  if (int rc = fuse_session_custom_io(se, &io, fuse_session_fd(se)); rc != 0) {
    spdlog::warn("FUSE passthrough and io_uring are off: libfuse refused custom I/O ({})", std::strerror(-rc));
    return false;
  }
  return true;
}

bool KernelSession::want_uring() const {
  if (config_.fuse_uring == Toggle::off) return false;
  // The parameter only lets FUSE servers that ask for io_uring have it (the
  // others keep /dev/fuse), and each request then costs a fraction of a
  // /dev/fuse round trip (docs/benchmark-notes.md, "FUSE over io_uring"): auto
  // turns it on as root, as on does, and says so.
  if (!kernel_enables_uring() && (config_.fuse_uring == Toggle::on || ::geteuid() == 0)) {
    std::ofstream out(kEnableUringParam);
    if (out << "Y" << std::flush)
      spdlog::info("turned on {} (FUSE servers that ask may use io_uring; --fuse-uring off keeps dlfsd off it)",
                   kEnableUringParam);
    else if (config_.fuse_uring == Toggle::on)
      spdlog::warn("FUSE over io_uring: cannot turn on {} (needs root and Linux 6.14+); requests go through /dev/fuse",
                   kEnableUringParam);
  }
  if (!kernel_enables_uring()) return false;  // the kernel would not offer it
  if (Status s = probe_uring(); !s) {
    spdlog::warn("FUSE over io_uring is off: {}", s.message());
    return false;
  }
  return true;
}

// The kernel holds new requests until every queue has an entry.
void KernelSession::start_uring() {
  FuseUring::Options o;
  o.threads_per_queue = uring_threads_per_queue(config_.fuse_threads);
  fuse_session* se = session_.load();
  uring_ = std::make_unique<FuseUring>(se, fuse_session_fd(se), o);
  state_.wire.queues.store(uring_.get(), std::memory_order_release);
  uring_->start();
  spdlog::info("FUSE requests go through io_uring: {} queues of {} threads", uring_queue_count(),
               o.threads_per_queue);
}

int KernelSession::serve() {
  fuse_loop_config* loop = fuse_loop_cfg_create();
  fuse_loop_cfg_set_clone_fd(loop, 1);
  fuse_loop_cfg_set_max_threads(loop, config_.fuse_threads);
  fuse_loop_cfg_set_idle_threads(loop, std::max(2u, config_.fuse_threads / 2));
  in_loop_ = true;  // from here the waker's signals go to a thread waiting in the loop
  const int rc = fuse_session_loop_mt(session_.load(), loop);
  fuse_loop_cfg_destroy(loop);
  stop_waker();
  // No worker reads any more: nothing reports to it.
  state_.drop_behind.store(nullptr, std::memory_order_release);
  drop_behind_->stop();
  return rc;
}

void KernelSession::unmount() {
  fuse_session* se = session_.load();
  if (!se) return;
  spdlog::info("unmounting {}", config_.mountpoint);
  // The overlays over raw/ are detached first, each on its own (the FUSE
  // unmount, lazy as root, would take them along in no set order).
  raw_overlays_->shutdown();
  fuse_session_unmount(se);
  // An overlay mount in flight waits on this mount, which answers nothing any
  // more: end the connection, or it waits for ever (fs/kernel/fuse_connection.h).
  if (raw_overlays_->mounting()) abort_connection("an overlay over raw/ was still being mounted");
  raw_overlays_->join();
  // The queues' threads end within a wait slice; none may outlive the session.
  if (uring_) uring_->stop();
  state_.wire.queues.store(nullptr, std::memory_order_release);
  // After the unmount: a stat() still waiting on the mount (a stop before
  // INIT was answered) now fails instead of blocking this join forever.
  if (tune_.joinable()) tune_.join();
  state_.push.set_session(nullptr);
  fuse_remove_signal_handlers(se);
  session_.store(nullptr, std::memory_order_release);
  fuse_session_destroy(se);
}

void KernelSession::abort_connection(const char* why) {
  if (!connection_) {
    spdlog::warn("stopping while {}: its FUSE connection is unknown and cannot be aborted; the stop may hang "
                 "(write 1 to {}/N/abort for the mount's N)", why, kFuseConnectionsDir);
    return;
  }
  if (Status s = abort_fuse_connection(*connection_); !s)
    spdlog::warn("stopping while {}: cannot abort FUSE connection {}: {}", why, *connection_, s.message());
  else
    spdlog::info("stopping while {}: aborted FUSE connection {} so that it fails", why, *connection_);
}

void KernelSession::exit() {
  // mount() set the session before the daemon starts any thread that calls
  // this; the loop's thread may not have entered the loop yet: it then ends at once.
  if (fuse_session* se = session_.load()) fuse_session_exit(se);
  std::lock_guard lk(waker_mu_);
  if (loop_ended_ || waker_.joinable()) return;
  waker_ = std::thread([this] {
    while (!loop_ended_.load()) {
      // Before the loop there is nothing to wake (it sees the exit at once),
      // and a signal could cut short a system call of the mount.
      if (in_loop_.load()) ::pthread_kill(loop_thread_, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
}

void KernelSession::stop_waker() {
  {
    std::lock_guard lk(waker_mu_);
    loop_ended_ = true;
  }
  if (waker_.joinable()) waker_.join();
}

void KernelSession::overlay_raw(const std::string& dataset, std::function<bool()> loaded) {
  std::error_code ec;
  std::filesystem::path mnt = std::filesystem::absolute(config_.mountpoint, ec);
  if (ec) mnt = config_.mountpoint;  // mount(2) resolves it from the same working directory
  raw_overlays_->request((mnt / dataset / "raw").string(), std::move(loaded));
}

nlohmann::json KernelSession::drop_behind_json() const {
  const ViewDropBehind* d = drop_behind_.get();
  return {{"keep_bytes", d->keep_bytes()},
          {"dropped_bytes", d->dropped_bytes()},
          {"notifications", d->notifications()},
          {"failures", d->failures()},
          {"skipped", d->skipped()}};
}

nlohmann::json KernelSession::stats() const {
  const WireState& w = state_.wire;
  return {{"requests", state_.counters.to_json()},
          // Time from a request's arrival to its reply, by kind (kinds answered at least once).
          {"latency", state_.counters.latency_json()},
          {"kernel_skips_open", state_.kernel_skips_open},
          {"kernel_skips_opendir", state_.kernel_skips_opendir},
          {"passthrough", state_.passthrough.stats()},
          {"uring",
           {{"offered", w.uring.offered.load()},
            {"in_use", w.uring.negotiated.load()},
            {"queues", w.queues.load() ? w.queues.load()->stats() : nlohmann::json(nullptr)}}},
          {"raw_overlay", raw_overlays_->stats()},
          {"generated_files", state_.ns.generated_live()},
          {"view_drop_behind", drop_behind_json()}};
}

}  // namespace dlfs::fs
