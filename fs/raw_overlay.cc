#include "fs/raw_overlay.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

namespace dlfs::fs {
namespace {

// overlayfs splits lowerdir at ':' and the options at ','; a backslash
// escapes either (and itself).
std::string escaped(const std::string& path) {
  std::string out;
  for (char ch : path) {
    if (ch == ':' || ch == ',' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

}  // namespace

RawOverlays::RawOverlays(std::string mode) : mode_(std::move(mode)) {}

RawOverlays::~RawOverlays() {
  shutdown();
  join();
}

std::string RawOverlays::mount_options(const std::string& raw_dir, const std::string& empty_dir) {
  return "lowerdir=" + escaped(raw_dir) + ":" + escaped(empty_dir);
}

void RawOverlays::request(const std::string& raw_dir, std::function<bool()> ready) {
  if (mode_ == "off") return;
  std::lock_guard lk(mu_);
  if (closed_) return;
  if (::geteuid() != 0) {
    if (!warned_)
      spdlog::info("raw/ stays without its overlay (raw_overlay = auto needs root): Python's open() of a raw "
                   "file costs a round trip to dlfsd for its isatty() (docs/architecture.md, raw overlay)");
    warned_ = true;
    return;
  }
  queue_.push_back({raw_dir, std::move(ready)});
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  cv_.notify_one();
}

void RawOverlays::run() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return closed_ || !queue_.empty(); });
    if (closed_) return;
    // In request order: the first one not ready holds the others (datasets
    // load in config order).
    if (!queue_.front().ready()) {
      cv_.wait_for(lk, std::chrono::milliseconds(50), [&] { return closed_; });
      continue;
    }
    const std::string dir = queue_.front().dir;
    queue_.pop_front();
    lk.unlock();
    auto root = mount_one(dir);  // may wait on the FUSE mount: not under the lock
    lk.lock();
    if (!root) {
      ++failures_;
      last_error_ = root.status().message();
      if (!warned_) spdlog::warn("{} (raw/ is served without it; later failures only in the stats)", last_error_);
      warned_ = true;
      continue;
    }
    if (closed_) {  // shut down while mounting: the overlay must not outlive the FUSE mount
      detach(dir, *root);
      return;
    }
    mounted_.push_back({dir, std::move(root).value()});
    spdlog::info("{}: under a read-only overlay (open() without a round trip per file)", dir);
  }
}

Status RawOverlays::ensure_empty_dir() {
  {
    std::lock_guard lk(mu_);
    if (!empty_dir_.empty()) return Status::ok();
  }
  std::error_code ec;
  std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string tmpl = (base / "dlfs-overlay-empty-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr)
    return Status::from_errno(errno, "raw overlay: cannot make its empty lower directory '" + tmpl + "'");
  std::lock_guard lk(mu_);
  empty_dir_ = tmpl;
  return Status::ok();
}

Result<UniqueFd> RawOverlays::mount_one(const std::string& raw_dir) {
  DLFS_RETURN_IF_ERROR(ensure_empty_dir());
  std::string empty;
  {
    std::lock_guard lk(mu_);
    empty = empty_dir_;
  }
  const std::string options = mount_options(raw_dir, empty);
  if (::mount("dlfs-raw", raw_dir.c_str(), "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
    const int e = errno;
    std::string hint;
    if (e == ENODEV) hint = " (this kernel has no overlayfs)";
    else if (e == EPERM) hint = " (needs CAP_SYS_ADMIN)";
    else if (e == EINVAL) hint = " (overlayfs refused the FUSE directory as a lower layer; see dmesg)";
    return Status::from_errno(e, "raw overlay: cannot mount overlayfs over '" + raw_dir + "'" + hint);
  }
  // Its dentries were just walked: this lookup needs nothing from FUSE.
  UniqueFd root(::open(raw_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) {
    const int e = errno;
    (void)::umount2(raw_dir.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
    return Status::from_errno(e, "raw overlay: cannot open the overlay just mounted over '" + raw_dir + "'");
  }
  return root;
}

void RawOverlays::detach(const std::string& dir, const UniqueFd& root) {
  // The descriptor's magic link leads to the overlay's root without a walk
  // through the FUSE mount above it.
  const std::string by_fd = "/proc/self/fd/" + std::to_string(root.get());
  if (::umount2(by_fd.c_str(), MNT_DETACH) != 0)
    spdlog::warn("raw overlay: cannot detach the overlay over '{}': {}", dir, std::strerror(errno));
}

void RawOverlays::shutdown() {
  std::vector<Mounted> mounted;
  std::string empty;
  {
    std::lock_guard lk(mu_);
    if (closed_) return;
    closed_ = true;
    queue_.clear();
    mounted.swap(mounted_);
    empty = empty_dir_;
  }
  cv_.notify_all();
  for (auto it = mounted.rbegin(); it != mounted.rend(); ++it) detach(it->dir, it->root);
  // Detached overlays still hold it until their last reader closes; an
  // empty directory removed under them is harmless (rmdir fails if not empty).
  if (!empty.empty()) (void)::rmdir(empty.c_str());
}

void RawOverlays::join() {
  if (thread_.joinable()) thread_.join();
}

nlohmann::json RawOverlays::stats() const {
  std::lock_guard lk(mu_);
  nlohmann::json dirs = nlohmann::json::array();
  for (const auto& m : mounted_) dirs.push_back(m.dir);
  nlohmann::json j{{"mode", mode_}, {"mounted", dirs}, {"failures", failures_}};
  j["last_error"] = last_error_.empty() ? nlohmann::json(nullptr) : nlohmann::json(last_error_);
  return j;
}

}  // namespace dlfs::fs
