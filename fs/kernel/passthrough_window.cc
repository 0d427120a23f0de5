#include "fs/kernel/passthrough_window.h"

#include <spdlog/spdlog.h>

namespace dlfs::fs {

void PassthroughWindow::close_window(bool warn, const std::string& why) {
  if (over_.exchange(true)) return;  // the first caller logs why
  spdlog::log(warn ? spdlog::level::warn : spdlog::level::info, "{}", why);
  prefetched_.clear();
}

bool PassthroughWindow::open() {
  if (!wire_.negotiated.load(std::memory_order_acquire) || over()) return false;
  if (raw_.loading_with_passthrough()) return true;
  close_window(false, "datasets loaded: raw files are served from memory only");
  return false;
}

bool PassthroughWindow::would_pass_through(uint64_t ino) const {
  return wire_.negotiated.load(std::memory_order_acquire) && !over() && raw_.wants_passthrough(ino);
}

void PassthroughWindow::prefetch_at_lookup(uint64_t ino) {
  if (!would_pass_through(ino)) return;
  if (UniqueFd fd = raw_.prefetch_backend_file(ino, kPrefetchBytes); fd.valid()) prefetched_.put(ino, std::move(fd));
}

BackingFiles::Open PassthroughWindow::open_raw(uint64_t ino, bool* read_ahead) {
  *read_ahead = false;
  if (!raw_.wants_passthrough(ino)) return backing_.open_cached(ino);
  Status refused;
  auto source = [&] {
    UniqueFd kept = prefetched_.take(ino);
    *read_ahead = kept.valid();
    return raw_.open_backend_file(ino, std::move(kept));
  };
  BackingFiles::Open o = backing_.open_passthrough(ino, source, &refused);
  if (!refused.is_ok())  // e.g. not root: ask no more
    close_window(true, "FUSE passthrough is off from now on: " + refused.message());
  return o;
}

nlohmann::json PassthroughWindow::stats() const {
  return {{"offered", wire_.offered.load()},
          {"in_use", wire_.negotiated.load()},
          {"window_over", over()},
          {"backing_files", backing_.registered()},
          {"backing_files_open", backing_.live_ids()}};
}

}  // namespace dlfs::fs
