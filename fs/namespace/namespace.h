// Namespace: the file system's logic, without FUSE.
//
//   /                         datasets and .dlfs
//   /.dlfs/stats              JSON snapshot (generated at each lookup)
//   /<dataset>/raw/...        the backend tree, read-only, served from memory
//   /<dataset>/epochs/<e>/<W>/<r>.{tar,bin,index} and <r>/   epoch views
//                             (namespace_views.cc, docs/views.md)
//   /<dataset>/seeds/<s>/epochs/...              the same with seed s
//   .../epochs/<e>/<W>/resume/<consumed>/<W'>/... the rest of a resumed epoch
//                             (namespace_contexts.cc)
//
// Every operation returns a result or an errno-carrying Status; the FUSE
// callbacks (fs/kernel/fuse_ops.cc) only translate to replies. This keeps the logic
// unit-testable without a mount. Inode numbers come from fs/namespace/inode.h.
//
// Datasets come as slots (fs/dataset/dataset_slot.h): the root lists every configured
// dataset from the start; anything inside one whose scan is not done waits
// for it (DatasetSlot::wait) and then answers from the complete dataset, or
// EIO when its scan failed. The FUSE callbacks park such requests instead
// (unsettled_slot), so that no worker thread blocks.
//
// Thread safety: all methods are const and may run concurrently; datasets are
// immutable apart from atomics.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/gather.h"
#include "common/status.h"
#include "fs/dataset/dataset.h"
#include "fs/dataset/dataset_slot.h"
#include "fs/namespace/dir_contexts.h"
#include "fs/namespace/generated_files.h"
#include "fs/namespace/inode.h"
#include "fs/namespace/refusal_log.h"
#include "fs/namespace/seed_stats.h"
#include "fs/views/view_format.h"
#include "fs/views/view_registry.h"

namespace dlfs::fs {

// What every lookup of a name or inode the namespace does not have returns.
inline Status not_found() { return Status(ENOENT, "no such entry"); }

struct Attr {
  uint64_t ino = 0;
  uint32_t mode = 0;      // type and permission bits
  uint32_t nlink = 1;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint32_t uid = 0, gid = 0;
  // A generated file (fs/namespace/generated_files.h): its name's entry expires at once,
  // so that every open looks it up and gets fresh content.
  bool fresh_each_lookup = false;
  // Listings give the name but not this inode (a readdirplus entry without
  // one): its attributes cost work (.index) or are made per lookup.
  bool lookup_only = false;
};

struct FsTotals {
  uint64_t bytes = 0;
  uint64_t files = 0;
};

// Adds one directory entry; returns false when the reply buffer is full
// (the entry was not added and will be offered again at the next call).
using DirFiller = std::function<bool(std::string_view name, const Attr& attr, uint64_t next_offset)>;

class Namespace {
 public:
  // stats_text produces the content of /.dlfs/stats at open time, for the
  // user who looks it up (null: unknown, everything).
  using StatsText = std::function<std::string(const Reader* reader)>;
  Namespace(const DatasetSlots& datasets, StatsText stats_text, int64_t start_time_ns, uint32_t uid, uint32_t gid);
  // Over datasets that are ready (the caller keeps them alive).
  Namespace(const std::vector<std::unique_ptr<Dataset>>& datasets, StatsText stats_text, int64_t start_time_ns,
            uint32_t uid, uint32_t gid);

  // The slot a request on `ino` would wait for (its dataset is still being
  // scanned or joined), else null. attr_only: the request needs only the
  // node's attributes (getattr), which a dataset directory has before the scan.
  const DatasetSlot* unsettled_slot(uint64_t ino, bool attr_only) const;

  // reader: who asks (for /.dlfs/stats, whose content depends on it).
  Result<Attr> lookup(uint64_t parent, std::string_view name, const Reader* reader = nullptr) const;
  Result<Attr> getattr(uint64_t ino) const;
  // Directory listing from `offset` (0 = start; "." and ".." first).
  // kernel_keeps_entries: a readdirplus listing, whose entries (but "." and
  // "..") the kernel keeps like lookups until it forgets them.
  Status readdir(uint64_t ino, uint64_t offset, const DirFiller& add, bool kernel_keeps_entries = false) const;
  // The kernel dropped `nlookup` references to `ino` (FUSE FORGET): epoch
  // view numbers it no longer holds may be recycled (fs/views/view_registry.h).
  void forget(uint64_t ino, uint64_t nlookup) const;
  Status opendir(uint64_t ino) const;
  // Whether `ino` may be opened with `flags` (as in open(2): anything but
  // O_RDONLY access is EROFS; a directory is EISDIR). Nothing is kept per
  // open: every file reads by inode (the kernel need not send OPEN at all).
  Status open(uint64_t ino, int flags) const;
  // Starts `out` and gathers up to `size` bytes at `offset` of any file (short at EOF).
  Status read(uint64_t ino, uint64_t offset, uint64_t size, cache::Gather& out) const;
  // A raw file of a ready dataset: its dataset and manifest file id, else
  // {null, 0} (never waits).
  std::pair<const Dataset*, uint32_t> raw_file_of(uint64_t ino) const;
  // Generated files alive (fs/namespace/generated_files.h), for stats.
  size_t generated_live() const { return generated_.live(); }
  FsTotals totals() const;
  // Extended attributes: the epoch views describe their plan (docs/views.md).
  Result<std::string> getxattr(uint64_t ino, const std::string& name) const;
  Result<std::vector<std::string>> listxattr(uint64_t ino) const;
  // The client socket (docs/client-protocol.md) that view files name in
  // user.dlfs.client_socket, with their dataset in user.dlfs.dataset; ""
  // (the default): none. Set before the mount.
  void set_client_socket(std::string path) { client_socket_ = std::move(path); }

  const DatasetSlots& datasets() const { return datasets_; }
  // The epoch view ids of dataset `i` (fs/views/view_registry.h), for stats and tests.
  const ViewRegistry& views(size_t i) const { return *views_[i]; }
  // Dataset `i`'s seed and resume directory ids (fs/namespace/dir_contexts.h).
  const DirContexts& dir_contexts(size_t i) const { return *contexts_[i]; }
  // Dataset `i`'s view traffic by seed; `configured`: the dataset's own seed.
  std::vector<SeedStats::Row> seed_rows(size_t i, uint64_t configured) const { return seeds_[i]->rows(configured); }

 private:
  Result<Attr> attr_of(const NodeId& n) const;
  // The node's dataset, once its scan is done (waits for it); EIO if it failed.
  Result<const Dataset*> dataset_of(const NodeId& n) const;
  // The node's dataset if it is ready, else null; never waits.
  const Dataset* ready_dataset(const NodeId& n) const;
  Attr dir_attr(uint64_t ino, uint32_t perms, uint32_t subdirs, int64_t mtime_ns) const;
  Attr file_attr(uint64_t ino, uint64_t size, int64_t mtime_ns) const;
  // What DLFS makes of a dataset: its audience's owner, group and mode.
  Attr view_dir_attr(const Dataset& ds, uint64_t ino, uint32_t subdirs) const;
  Attr view_file_attr(const Dataset& ds, uint64_t ino, uint64_t size) const;
  // Epoch views (namespace_views.cc).
  Result<Attr> view_attr(const NodeId& n) const;
  Result<Attr> view_lookup(const NodeId& parent, std::string_view name) const;
  using Emit = std::function<bool(std::string_view name, const Result<Attr>& attr)>;
  Status view_readdir(const NodeId& n, uint64_t child, const Emit& emit, bool kernel_keeps_entries) const;
  // A directory of W ranks' views: epochs/<e>/<W> (no context), or one in
  // a directory context (seeds/<s>/epochs/<e>/<W>, .../resume/<consumed>/<W'>).
  struct World {
    uint32_t epoch = 0, w = 1;
    std::shared_ptr<const ViewContext> context;
    std::optional<DirKey> resume;  // its resume/ directory, if it has one
  };
  Result<World> world_of(const Dataset& ds, const NodeId& n) const;
  Result<Attr> world_lookup(const Dataset& ds, const NodeId& p, std::string_view name) const;
  Status world_readdir(const Dataset& ds, const NodeId& n, uint64_t child, const Emit& emit,
                       bool kernel_keeps_entries) const;
  // Directory contexts (namespace_contexts.cc).
  Result<Attr> context_attr(const Dataset& ds, const NodeId& n) const;
  Result<Attr> context_lookup(const Dataset& ds, const NodeId& p, std::string_view name) const;
  Status context_readdir(const Dataset& ds, const NodeId& n, uint64_t child, const Emit& emit,
                         bool kernel_keeps_entries) const;
  // The inode of `key`'s directory, pinned (released if no attr comes of it);
  // counts: a consumed level's counts, parsed from its name.
  Result<Attr> context_child(const Dataset& ds, uint32_t dataset, const DirKey& key) const;
  Result<Attr> context_child_with(const Dataset& ds, uint32_t dataset, const DirKey& key,
                                  std::vector<uint64_t> counts) const;
  // The world directory W of context `id` (epoch or consumed level), pinned.
  Result<Attr> context_world(const Dataset& ds, uint32_t dataset, uint32_t id, uint64_t w) const;
  std::shared_ptr<const ViewContext> make_view_context(const Dataset& ds, uint32_t dataset, const DirKey& key,
                                                       std::vector<uint64_t> counts) const;
  // The "resume/<consumed>" name a lookup refused: one log line (rate limited).
  void refuse_resume(const Dataset& ds, const DirKey& resume, std::string_view name, const Status& why) const;
  SeedCounters& seed_counters(const Dataset& ds, uint32_t dataset, const ViewContext* c) const;
  Status read_raw(const NodeId& n, uint64_t offset, uint64_t size, cache::Gather& out) const;
  Status read_view(const NodeId& n, uint64_t offset, uint64_t size, cache::Gather& out) const;
  Status read_generated(const NodeId& n, uint64_t offset, uint64_t size, cache::Gather& out) const;
  // A view read's status, named after its dataset on failure; on success the
  // bytes gathered in `counted` (null: not view traffic) go to its counters.
  Status counted_view_read(const Dataset* ds, Status s, const cache::Gather* counted) const;
  Result<Attr> generate(std::shared_ptr<OpenFile> content, uint64_t size, std::shared_ptr<const EpochView> view) const;
  Result<Attr> generated_attr(const NodeId& n) const;
  Result<std::shared_ptr<const EpochView>> view_of(const NodeId& n) const;

  // The view ids of the dataset `n` belongs to.
  ViewRegistry& views_of(const NodeId& n) const { return *views_[n.dataset]; }

  DatasetSlots borrowed_;  // the slots of the second constructor
  const DatasetSlots& datasets_;
  // One per dataset, by index: the numbers of the views the kernel may name.
  // Destroyed before the datasets (their views read through them).
  std::vector<std::unique_ptr<ViewRegistry>> views_;
  std::vector<std::unique_ptr<DirContexts>> contexts_;  // by dataset index
  std::vector<std::unique_ptr<SeedStats>> seeds_;       // by dataset index
  mutable RefusalLog refusals_;
  mutable GeneratedFiles generated_;
  std::string client_socket_;
  std::vector<std::string> view_xattr_names() const;
  StatsText stats_text_;
  int64_t start_time_ns_;
  uint32_t uid_, gid_;
};

}  // namespace dlfs::fs
