#include "fs/view_registry.h"

namespace dlfs::fs {

Result<uint32_t> ViewRegistry::id_of(const ViewKey& key) {
  std::lock_guard lk(mu_);
  auto t = std::make_tuple(key.epoch, key.world_size, key.rank);
  if (auto it = ids_.find(t); it != ids_.end()) return it->second;
  if (keys_.size() >= kMaxViews)
    return Status(ENOSPC, "more than " + std::to_string(kMaxViews) + " distinct epoch views looked up; restart dlfsd");
  auto id = static_cast<uint32_t>(keys_.size());
  keys_.push_back(key);
  ids_.emplace(t, id);
  return id;
}

std::optional<ViewKey> ViewRegistry::key_of(uint32_t id) const {
  std::lock_guard lk(mu_);
  if (id >= keys_.size()) return std::nullopt;
  return keys_[id];
}

Result<std::shared_ptr<const EpochView>> ViewRegistry::get(const Dataset& ds, uint32_t id) {
  std::unique_lock lk(mu_);
  for (auto it = cache_.begin(); it != cache_.end(); ++it)
    if (it->first == id) {
      cache_.splice(cache_.begin(), cache_, it);
      return cache_.front().second;
    }
  if (id >= keys_.size()) return Status(ENOENT, "no such epoch view");
  ViewKey key = keys_[id];
  lk.unlock();  // building takes a while; other views stay available
  auto built = EpochView::build(ds, key);
  if (!built) return built.status();
  lk.lock();
  cache_.emplace_front(id, *built);
  if (cache_.size() > kCached) cache_.pop_back();
  return *built;
}

}  // namespace dlfs::fs
