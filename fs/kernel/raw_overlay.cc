#include "fs/kernel/raw_overlay.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

RawOverlays::RawOverlays(AutoOff mode, std::string off_because) : mode_(mode) {
  if (mode_ == AutoOff::off) {
    reason_ = off_because.empty() ? "raw_overlay = off" : std::move(off_because);
  } else if (::geteuid() != 0) {
    mode_ = AutoOff::off;
    reason_ = "dlfsd is not root";
  }
  if (mode_ == AutoOff::off && reason_ != "raw_overlay = off")
    spdlog::info("raw/ stays without its overlay ({}): Python's open() of a raw file costs a round trip to dlfsd "
                 "for its isatty() (docs/internals.md, raw overlay)", reason_);
}

RawOverlays::~RawOverlays() {
  shutdown();
  join();
}

std::string RawOverlays::mount_options(const std::string& raw_dir, const std::string& empty_dir) {
  return "lowerdir=" + escaped(raw_dir) + ":" + escaped(empty_dir);
}

void RawOverlays::request(const std::string& raw_dir, std::function<bool()> ready) {
  if (mode_ == AutoOff::off) return;
  std::lock_guard lk(mu_);
  if (closed_) return;
  queue_.push_back({raw_dir, std::move(ready)});
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  cv_.notify_one();
}

void RawOverlays::run() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return closed_ || !queue_.empty(); });
    if (closed_) return;
    // The first whose dataset is ready: datasets load side by side.
    auto it = std::find_if(queue_.begin(), queue_.end(), [](const Pending& p) { return p.ready(); });
    if (it == queue_.end()) {
      cv_.wait_for(lk, std::chrono::milliseconds(50), [&] { return closed_; });
      continue;
    }
    const std::string dir = it->dir;
    queue_.erase(it);
    mounting_ = true;
    lk.unlock();
    auto root = mount_one(dir);  // may wait on the FUSE mount: not under the lock
    lk.lock();
    mounting_ = false;
    if (!root) {
      ++failures_;
      last_error_ = root.status().message();
      if (!warned_) spdlog::warn("{} (raw/ is served without it; later failures only in the stats)", last_error_);
      warned_ = true;
      continue;
    }
    if (closed_) {  // shut down while mounting: the overlay must not outlive the FUSE mount
      detach(dir, *root, /*quiet=*/true);  // it may have gone with the FUSE mount already
      return;
    }
    mounted_.push_back({dir, std::move(root).value()});
    spdlog::info("{}: under a read-only overlay (open() without a round trip per file)", dir);
  }
}

// A directory only root can change, made if missing and checked each time
// (it could have been replaced or filled since): whatever it holds would
// show in every raw/. Shared by every dlfsd on the node and never removed.
Status RawOverlays::check_empty_dir(const std::string& dir) {
  auto made = [](const std::string& d) {
    if (::mkdir(d.c_str(), 0755) == 0 || errno == EEXIST) return Status::ok();
    return Status::from_errno(errno, "raw overlay: cannot make the directory '" + d + "'");
  };
  DLFS_RETURN_IF_ERROR(made(std::filesystem::path(dir).parent_path().string()));
  DLFS_RETURN_IF_ERROR(made(dir));
  for (const std::string& d : {std::filesystem::path(dir).parent_path().string(), dir}) {
    struct stat st {};
    if (::lstat(d.c_str(), &st) != 0) return Status::from_errno(errno, "raw overlay: cannot stat '" + d + "'");
    if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
      return Status(EPERM, "raw overlay: '" + d + "' is not a directory that only root can change; not using it");
  }
  std::error_code ec;
  if (!std::filesystem::is_empty(dir, ec) || ec)
    return Status(ENOTEMPTY, "raw overlay: its empty lower directory '" + dir + "' is not empty; not using it");
  return Status::ok();
}

Result<UniqueFd> RawOverlays::mount_one(const std::string& raw_dir) {
  DLFS_RETURN_IF_ERROR(check_empty_dir(kEmptyDir));
  const std::string options = mount_options(raw_dir, kEmptyDir);
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

void RawOverlays::detach(const std::string& dir, const UniqueFd& root, bool quiet) {
  // The descriptor's magic link leads to the overlay's root without a walk
  // through the FUSE mount above it.
  const std::string by_fd = "/proc/self/fd/" + std::to_string(root.get());
  if (::umount2(by_fd.c_str(), MNT_DETACH) != 0 && !(quiet && errno == EINVAL))
    spdlog::warn("raw overlay: cannot detach the overlay over '{}': {}", dir, std::strerror(errno));
}

void RawOverlays::shutdown() {
  std::vector<Mounted> mounted;
  {
    std::lock_guard lk(mu_);
    if (closed_) return;
    closed_ = true;
    queue_.clear();
    mounted.swap(mounted_);
  }
  cv_.notify_all();
  for (auto it = mounted.rbegin(); it != mounted.rend(); ++it) detach(it->dir, it->root);
}

bool RawOverlays::mounting() const {
  std::lock_guard lk(mu_);
  return mounting_;
}

void RawOverlays::join() {
  std::thread t;
  {
    std::lock_guard lk(mu_);
    t.swap(thread_);
  }
  if (t.joinable()) t.join();
}

nlohmann::json RawOverlays::stats() const {
  std::lock_guard lk(mu_);
  nlohmann::json dirs = nlohmann::json::array();
  for (const auto& m : mounted_) dirs.push_back(m.dir);
  nlohmann::json j{{"mode", name_of(mode_)}, {"mounted", dirs}, {"failures", failures_}};
  j["reason"] = reason_.empty() ? nlohmann::json(nullptr) : nlohmann::json(reason_);
  j["last_error"] = last_error_.empty() ? nlohmann::json(nullptr) : nlohmann::json(last_error_);
  return j;
}

}  // namespace dlfs::fs
