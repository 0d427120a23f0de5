// ViewRegistry: small numbers for the epoch views looked up so far, so that
// a view (epoch, W, rank, context) fits in an inode number, and a cache of the views
// used most recently (a view keeps its formats' layouts, e.g. the tar member
// offsets, which cost O(samples in the view) to build, and the read-ahead
// ring its streams share).
//
// An id is pinned while the kernel may still name its inode: id_of() pins
// once, and the caller either hands the inode to the kernel (a lookup reply,
// a readdirplus entry: the kernel gives it back with FORGET, see
// Namespace::forget) or calls release() at once. At most kMaxViews ids exist
// per dataset (the inode layout, fs/namespace/inode.h); when the table is full the id
// of a view nobody pins is recycled, so a long job may look up any number of
// views over its life, and only kMaxViews held by the kernel at one time get
// ENOSPC. Thread safe (one mutex; lookups, forgets and opens take it, reads
// never).
#pragma once

#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "fs/views/epoch_view.h"
#include "fs/views/view_format.h"

namespace dlfs::fs {

class ViewRegistry {
 public:
  static constexpr uint32_t kMaxViews = 65535;
  // The id of `key`, pinned once (see above).
  Result<uint32_t> id_of(const ViewKey& key);
  // Drops `count` pins of `id` (a forget from the kernel, or an id not handed out).
  void release(uint32_t id, uint64_t count = 1);
  std::optional<ViewKey> key_of(uint32_t id) const;
  Result<std::shared_ptr<const EpochView>> get(const Dataset& ds, uint32_t id);
  // The view and (with_ring) its read-ahead ring, made on first use and
  // shared by every reader of the view's streams until the view leaves the cache.
  Result<ViewStream> stream(const Dataset& ds, uint32_t id, bool with_ring);
  uint64_t pins(uint32_t id) const;
  struct Usage {
    uint64_t ids = 0;       // handed out (at most kMaxViews)
    uint64_t pinned = 0;    // of those, held by the kernel (or a lookup in progress)
    uint64_t recycled = 0;  // times an unpinned id was given to another view
  };
  Usage usage() const;  // for stats

 private:
  struct Slot {
    ViewKey key;
    uint64_t pins = 0;
  };
  std::optional<uint32_t> unpinned_slot();  // with mu_ held

  static constexpr size_t kCached = 16;
  mutable std::mutex mu_;
  std::vector<Slot> slots_;
  std::map<ViewKey, uint32_t> ids_;  // contexts compared by value
  struct Cached {
    uint32_t id;
    std::shared_ptr<const EpochView> view;
    std::shared_ptr<cache::ReadRing> ring;  // null until a stream is read
    bool ring_made = false;
  };
  std::list<Cached> cache_;  // most recent first
  Cached* cached(uint32_t id);                          // with mu_ held; moves it first
  static ViewStream stream_of(Cached& c, bool with_ring);  // with mu_ held
  uint32_t next_victim_ = 0;  // where the search for an unpinned id resumes
  uint64_t recycled_ = 0;
};

}  // namespace dlfs::fs
