// ViewRegistry: small numbers for the epoch views looked up so far, so that
// a view (epoch, W, rank) fits in an inode number, and a cache of the views
// used most recently (a view keeps its formats' layouts, e.g. the tar member
// offsets, which cost O(samples in the view) to build).
//
// Numbers are handed out in lookup order and live as long as the daemon:
// at most kMaxViews per dataset. Thread safe (one mutex; lookups and opens,
// never reads, take it).
#pragma once

#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "fs/epoch_view.h"

namespace dlfs::fs {

class ViewRegistry {
 public:
  static constexpr uint32_t kMaxViews = 65535;
  Result<uint32_t> id_of(const ViewKey& key);
  std::optional<ViewKey> key_of(uint32_t id) const;
  Result<std::shared_ptr<const EpochView>> get(const Dataset& ds, uint32_t id);

 private:
  static constexpr size_t kCached = 16;
  mutable std::mutex mu_;
  std::vector<ViewKey> keys_;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> ids_;
  std::list<std::pair<uint32_t, std::shared_ptr<const EpochView>>> cache_;  // most recent first
};

}  // namespace dlfs::fs
