#include "fs/namespace/dir_contexts.h"

namespace dlfs::fs {

Result<uint32_t> DirContexts::id_of(const DirKey& key, std::shared_ptr<const ViewContext> views) {
  std::lock_guard lk(mu_);
  if (auto it = ids_.find(key); it != ids_.end()) {
    ++slots_[it->second].pins;
    return it->second;
  }
  uint32_t id = 0;
  if (slots_.size() < max_ids_) {
    id = static_cast<uint32_t>(slots_.size());
    slots_.push_back({});
  } else {
    // Round robin from where the last search stopped, as ViewRegistry does.
    bool found = false;
    for (size_t tried = 0; tried < slots_.size() && !found; ++tried) {
      id = next_victim_;
      next_victim_ = (next_victim_ + 1) % static_cast<uint32_t>(slots_.size());
      found = slots_[id].pins == 0;
    }
    if (!found)
      return Status(ENOSPC, "the kernel holds " + std::to_string(max_ids_) +
                                " seed and resume directories of this dataset at once; none can be recycled until it "
                                "forgets some");
    ids_.erase(slots_[id].context.key);
    ++recycled_;
  }
  slots_[id] = {{key, std::move(views)}, 1};
  ids_.emplace(key, id);
  return id;
}

void DirContexts::pin(uint32_t id) {
  std::lock_guard lk(mu_);
  if (id < slots_.size()) ++slots_[id].pins;
}

void DirContexts::release(uint32_t id, uint64_t count) {
  std::lock_guard lk(mu_);
  if (id >= slots_.size()) return;  // a forget of a number we never handed out
  slots_[id].pins -= std::min(count, slots_[id].pins);
}

std::optional<DirContext> DirContexts::get(uint32_t id) const {
  std::lock_guard lk(mu_);
  if (id >= slots_.size()) return std::nullopt;
  return slots_[id].context;
}

DirContexts::Usage DirContexts::usage() const {
  std::lock_guard lk(mu_);
  Usage u{slots_.size(), 0, recycled_};
  for (const Slot& s : slots_) u.pinned += s.pins > 0;
  return u;
}

}  // namespace dlfs::fs
