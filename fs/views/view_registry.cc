#include "fs/views/view_registry.h"

#include "fs/views/view_stream.h"

namespace dlfs::fs {
Result<uint32_t> ViewRegistry::id_of(const ViewKey& key) {
  std::lock_guard lk(mu_);
  if (auto it = ids_.find(key); it != ids_.end()) {
    ++slots_[it->second].pins;
    return it->second;
  }
  uint32_t id;
  if (slots_.size() < kMaxViews) {
    id = static_cast<uint32_t>(slots_.size());
    slots_.push_back({key, 0});
  } else {
    auto free = unpinned_slot();
    if (!free)
      return Status(ENOSPC, "the kernel holds " + std::to_string(kMaxViews) +
                                " distinct epoch views of this dataset at once; none can be recycled until it forgets some");
    id = *free;
    ids_.erase(slots_[id].key);
    cache_.remove_if([id](const Cached& entry) { return entry.id == id; });
    slots_[id] = {key, 0};
    ++recycled_;
  }
  ids_.emplace(key, id);
  ++slots_[id].pins;
  return id;
}

// Round robin from where the last search stopped: the id recycled is the one
// unpinned longest ago in lookup order, and a full table costs one pass at most.
std::optional<uint32_t> ViewRegistry::unpinned_slot() {
  for (size_t tried = 0; tried < slots_.size(); ++tried) {
    const uint32_t id = next_victim_;
    next_victim_ = (next_victim_ + 1) % static_cast<uint32_t>(slots_.size());
    if (slots_[id].pins == 0) return id;
  }
  return std::nullopt;
}

void ViewRegistry::release(uint32_t id, uint64_t count) {
  std::lock_guard lk(mu_);
  if (id >= slots_.size()) return;  // a forget of a number we never handed out
  slots_[id].pins -= std::min(count, slots_[id].pins);
}

uint64_t ViewRegistry::pins(uint32_t id) const {
  std::lock_guard lk(mu_);
  return id < slots_.size() ? slots_[id].pins : 0;
}

ViewRegistry::Usage ViewRegistry::usage() const {
  std::lock_guard lk(mu_);
  Usage u{slots_.size(), 0, recycled_};
  for (const Slot& s : slots_) u.pinned += s.pins > 0;
  return u;
}

std::optional<ViewKey> ViewRegistry::key_of(uint32_t id) const {
  std::lock_guard lk(mu_);
  if (id >= slots_.size()) return std::nullopt;
  return slots_[id].key;
}

ViewRegistry::Cached* ViewRegistry::cached(uint32_t id) {
  for (auto it = cache_.begin(); it != cache_.end(); ++it)
    if (it->id == id) {
      if (it != cache_.begin()) cache_.splice(cache_.begin(), cache_, it);
      return &cache_.front();
    }
  return nullptr;
}

Result<std::shared_ptr<const EpochView>> ViewRegistry::get(const Dataset& ds, uint32_t id) {
  std::unique_lock lk(mu_);
  if (Cached* c = cached(id)) return c->view;
  if (id >= slots_.size()) return Status(ENOENT, "no such epoch view");
  ViewKey key = slots_[id].key;
  lk.unlock();  // building takes a while; other views stay available
  auto built = EpochView::build(ds, key);
  if (!built) return built.status();
  lk.lock();
  // The id may have been recycled for another view while this one was built:
  // the caller still gets the view it asked for, but it is not cached under
  // an id that now names another.
  if (id < slots_.size() && slots_[id].key == key) {
    cache_.push_front({id, *built, nullptr, false});
    if (cache_.size() > kCached) cache_.pop_back();
  }
  return *built;
}

ViewStream ViewRegistry::stream_of(Cached& c, bool with_ring) {
  if (!with_ring) return ViewStream{c.view, nullptr};
  if (!c.ring_made) {
    c.ring = make_read_ring(c.view);
    c.ring_made = true;
  }
  return ViewStream{c.view, c.ring};
}

Result<ViewStream> ViewRegistry::stream(const Dataset& ds, uint32_t id, bool with_ring) {
  {  // the read path's case: one locked lookup
    std::lock_guard lk(mu_);
    if (Cached* c = cached(id)) return stream_of(*c, with_ring);
  }
  DLFS_ASSIGN_OR_RETURN(auto view, get(ds, id));  // built outside the lock, and cached
  std::lock_guard lk(mu_);
  if (Cached* c = cached(id); c && c->view == view) return stream_of(*c, with_ring);
  // Not cached (its id was recycled while it was built, or it was evicted
  // already): served without read-ahead rather than with a ring per request.
  return ViewStream{view, nullptr};
}

}  // namespace dlfs::fs
