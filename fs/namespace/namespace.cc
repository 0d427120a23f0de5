#include "fs/namespace/namespace.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include <algorithm>

namespace dlfs::fs {
namespace {

constexpr std::string_view kControlDirName = ".dlfs";
constexpr std::string_view kStatsName = "stats";
constexpr std::string_view kRawName = "raw";
constexpr std::string_view kEpochsName = "epochs";
constexpr std::string_view kSeedsName = "seeds";

// Read-only, and no special bits: the write bits go, and so do setuid,
// setgid and sticky (the mount is nosuid, but `cp -a` out of raw/ by root
// would otherwise make a setuid-root copy of a backend file).
uint32_t ro(uint32_t perms) { return perms & 0555; }

// Every permission bit of the classes in `classes` (fs/dataset/audience.h).
uint32_t class_bits(unsigned classes) {
  return ((classes & kOwnerClass) ? 0700u : 0) | ((classes & kGroupClass) ? 070u : 0) | ((classes & kOtherClass) ? 07u : 0);
}


}  // namespace

namespace {
std::vector<std::unique_ptr<ViewRegistry>> registries_for(const DatasetSlots& datasets) {
  std::vector<std::unique_ptr<ViewRegistry>> r;
  for (size_t i = 0; i < datasets.size(); ++i) r.push_back(std::make_unique<ViewRegistry>());
  return r;
}
template <typename T, typename... Args>
std::vector<std::unique_ptr<T>> one_each(const DatasetSlots& datasets, Args... args) {
  std::vector<std::unique_ptr<T>> r;
  for (size_t i = 0; i < datasets.size(); ++i) r.push_back(std::make_unique<T>(args...));
  return r;
}
}  // namespace

Namespace::Namespace(const DatasetSlots& datasets, StatsText stats_text, int64_t start_time_ns, uint32_t uid,
                     uint32_t gid)
    : datasets_(datasets),
      views_(registries_for(datasets)),
      contexts_(one_each<DirContexts>(datasets, kMaxDirContexts)),
      seeds_(one_each<SeedStats>(datasets)),
      stats_text_(std::move(stats_text)),
      start_time_ns_(start_time_ns),
      uid_(uid),
      gid_(gid) {}

namespace {
DatasetSlots borrow_all(const std::vector<std::unique_ptr<Dataset>>& datasets) {
  DatasetSlots slots;
  for (const auto& d : datasets) slots.push_back(DatasetSlot::borrowing(*d));
  return slots;
}
}  // namespace

Namespace::Namespace(const std::vector<std::unique_ptr<Dataset>>& datasets, StatsText stats_text,
                     int64_t start_time_ns, uint32_t uid, uint32_t gid)
    : borrowed_(borrow_all(datasets)),
      datasets_(borrowed_),
      views_(registries_for(borrowed_)),
      contexts_(one_each<DirContexts>(borrowed_, kMaxDirContexts)),
      seeds_(one_each<SeedStats>(borrowed_)),
      stats_text_(std::move(stats_text)),
      start_time_ns_(start_time_ns),
      uid_(uid),
      gid_(gid) {}

Result<const Dataset*> Namespace::dataset_of(const NodeId& n) const {
  if (n.dataset >= datasets_.size()) return not_found();
  DLFS_ASSIGN_OR_RETURN(Dataset * ds, datasets_[n.dataset]->wait());
  return ds;
}

const Dataset* Namespace::ready_dataset(const NodeId& n) const {
  return n.dataset < datasets_.size() ? datasets_[n.dataset]->get() : nullptr;
}

const DatasetSlot* Namespace::unsettled_slot(uint64_t ino, bool attr_only) const {
  auto n = decode_ino(ino);
  if (!n || n->kind == NodeKind::root || n->kind == NodeKind::control_dir || n->kind == NodeKind::stats_file ||
      n->kind == NodeKind::generated || n->dataset >= datasets_.size())
    return nullptr;
  // The dataset directory's own attributes are known before the scan.
  if (attr_only && n->kind == NodeKind::dataset_dir) return nullptr;
  const DatasetSlot* slot = datasets_[n->dataset].get();
  return slot->settled() ? nullptr : slot;
}

Attr Namespace::dir_attr(uint64_t ino, uint32_t perms, uint32_t subdirs, int64_t mtime_ns) const {
  Attr a;
  a.ino = ino;
  a.mode = S_IFDIR | ro(perms);
  a.nlink = 2 + subdirs;  // find(1) relies on this to skip stat() in leaf directories
  a.size = 4096;
  a.mtime_ns = mtime_ns;
  a.uid = uid_;
  a.gid = gid_;
  return a;
}

Attr Namespace::file_attr(uint64_t ino, uint64_t size, int64_t mtime_ns) const {
  Attr a;
  a.ino = ino;
  a.mode = S_IFREG | 0444;
  a.size = size;
  a.mtime_ns = mtime_ns;
  a.uid = uid_;
  a.gid = gid_;
  return a;
}

namespace {
void give_to(Attr& a, const Audience& audience, uint32_t perms) {
  a.uid = audience.uid;
  a.gid = audience.gid;
  a.mode = (a.mode & S_IFMT) | perms;
}
}  // namespace

Attr Namespace::view_dir_attr(const Dataset& ds, uint64_t ino, uint32_t subdirs) const {
  Attr a = dir_attr(ino, 0, subdirs, ds.root_mtime_ns());
  give_to(a, ds.audience(), ds.audience().dir_mode());
  return a;
}

Attr Namespace::view_file_attr(const Dataset& ds, uint64_t ino, uint64_t size) const {
  Attr a = file_attr(ino, size, ds.root_mtime_ns());
  give_to(a, ds.audience(), ds.audience().file_mode());
  return a;
}

Result<Attr> Namespace::attr_of(const NodeId& n) const {
  const uint64_t ino = encode_ino(n);
  switch (n.kind) {
    case NodeKind::root:
      return dir_attr(ino, 0555, static_cast<uint32_t>(datasets_.size()) + 1, start_time_ns_);
    case NodeKind::control_dir:
      return dir_attr(ino, 0555, 0, start_time_ns_);
    case NodeKind::stats_file: {  // the name in listings; each lookup generates the file
      Attr a = file_attr(ino, 0, start_time_ns_);
      a.fresh_each_lookup = a.lookup_only = true;
      return a;
    }
    case NodeKind::generated: return generated_attr(n);
    default: break;
  }
  if (n.kind == NodeKind::dataset_dir) {  // known before the scan ends: listing the root never waits
    if (n.dataset >= datasets_.size()) return not_found();
    return dir_attr(ino, 0555, 2, datasets_[n.dataset]->root_mtime_ns());
  }
  DLFS_ASSIGN_OR_RETURN(const Dataset* ds, dataset_of(n));
  const auto& m = ds->manifest();
  switch (n.kind) {
    case NodeKind::raw_dir: {
      if (n.index >= m.dir_count()) return not_found();
      const auto d = static_cast<uint32_t>(n.index);
      uint32_t perms = m.dir_mode(d);
      // raw/ itself: no class the backend directory's parents keep out.
      if (d == provenance::kRootDir) perms &= class_bits(ds->audience().raw_root_classes);
      Attr a = dir_attr(ino, perms, static_cast<uint32_t>(m.dir_subdirs(d).size()), m.dir_mtime_ns(d));
      a.uid = m.dir_owner(d).uid;
      a.gid = m.dir_owner(d).gid;
      return a;
    }
    case NodeKind::raw_file: {
      if (n.index >= m.file_count()) return not_found();
      auto f = static_cast<uint32_t>(n.index);
      Attr a;
      a.ino = ino;
      a.mode = S_IFREG | ro(m.file_mode(f));
      a.size = m.file_size(f);
      a.mtime_ns = m.file_mtime_ns(f);
      a.uid = m.file_owner(f).uid;  // the backend's: the kernel checks them (default_permissions)
      a.gid = m.file_owner(f).gid;
      return a;
    }
    default: return view_attr(n);
  }
}

Result<Attr> Namespace::getattr(uint64_t ino) const {
  auto n = decode_ino(ino);
  if (!n) return not_found();
  return attr_of(*n);
}

Result<Attr> Namespace::lookup(uint64_t parent, std::string_view name, const Reader* reader) const {
  // No DLFS name is longer (backend names come from file systems with this
  // limit; view names are short or cut to it), and statfs promises it: longer
  // is ENAMETOOLONG, as on any other file system, not "no such entry". FUSE
  // itself passes names of up to 1 KiB.
  if (name.size() > NAME_MAX) return Status(ENAMETOOLONG, "name longer than " + std::to_string(NAME_MAX) + " bytes");
  auto p = decode_ino(parent);
  if (!p) return not_found();
  switch (p->kind) {
    case NodeKind::root:
      if (name == kControlDirName) return attr_of({NodeKind::control_dir, 0, 0});
      for (size_t i = 0; i < datasets_.size(); ++i)
        if (datasets_[i]->name() == name) return attr_of({NodeKind::dataset_dir, static_cast<uint32_t>(i), 0});
      return not_found();
    case NodeKind::control_dir: {
      if (name != kStatsName) return not_found();
      auto text = std::make_shared<SnapshotFile>(stats_text_(reader));
      const uint64_t size = text->size();
      return generate(std::move(text), size, nullptr);
    }
    case NodeKind::dataset_dir:
      if (name == kRawName) return attr_of({NodeKind::raw_dir, p->dataset, provenance::kRootDir});
      if (name == kEpochsName) return attr_of({NodeKind::epochs_dir, p->dataset, 0});
      // Not listed (the dataset directory lists what it always did): another
      // job's seed, looked up by name (docs/views.md).
      if (name == kSeedsName) return attr_of({NodeKind::seeds_dir, p->dataset, 0});
      return not_found();
    case NodeKind::raw_dir: {
      DLFS_ASSIGN_OR_RETURN(const Dataset* ds, dataset_of(*p));
      if (p->index >= ds->manifest().dir_count()) return not_found();
      auto dir = static_cast<uint32_t>(p->index);
      if (auto f = ds->manifest().find_file(dir, name)) {
        ds->raw_counters().lookups.fetch_add(1, std::memory_order_relaxed);
        return attr_of({NodeKind::raw_file, p->dataset, *f});
      }
      if (auto d = ds->manifest().find_subdir(dir, name)) return attr_of({NodeKind::raw_dir, p->dataset, *d});
      return not_found();
    }
    default:
      return view_lookup(*p, name);
  }
}

Status Namespace::opendir(uint64_t ino) const {
  auto a = getattr(ino);
  if (!a) return a.status();
  if (!S_ISDIR(a->mode)) return Status(ENOTDIR, "not a directory");
  return Status::ok();
}

Status Namespace::readdir(uint64_t ino, uint64_t offset, const DirFiller& add, bool kernel_keeps_entries) const {
  auto n = decode_ino(ino);
  if (!n) return not_found();
  auto self = attr_of(*n);
  if (!self) return self.status();
  if (!S_ISDIR(self->mode)) return Status(ENOTDIR, "not a directory");

  // Entry k of the listing has offset k and next offset k + 1.
  // Entries 0 and 1 are "." and ".."; children follow.
  uint64_t k = offset;
  auto emit = [&](std::string_view name, const Result<Attr>& a) {
    if (!a) return true;  // vanished: skip (cannot happen for an immutable tree)
    if (!add(name, *a, k + 1)) return false;
    ++k;
    return true;
  };
  if (k == 0 && !emit(".", self)) return Status::ok();
  if (k == 1) {
    Result<Attr> parent = self;  // the kernel fixes up ".." itself; any directory attr will do
    if (!emit("..", parent)) return Status::ok();
  }
  const uint64_t first_child = 2;
  auto child_index = [&] { return k - first_child; };

  switch (n->kind) {
    case NodeKind::root: {
      // datasets, then .dlfs
      while (child_index() < datasets_.size()) {
        auto i = static_cast<uint32_t>(child_index());
        if (!emit(datasets_[i]->name(), attr_of({NodeKind::dataset_dir, i, 0}))) return Status::ok();
      }
      if (child_index() == datasets_.size()) emit(kControlDirName, attr_of({NodeKind::control_dir, 0, 0}));
      return Status::ok();
    }
    case NodeKind::control_dir:
      if (child_index() == 0) emit(kStatsName, attr_of({NodeKind::stats_file, 0, 0}));
      return Status::ok();
    case NodeKind::dataset_dir:
      if (child_index() == 0 && !emit(kRawName, attr_of({NodeKind::raw_dir, n->dataset, provenance::kRootDir})))
        return Status::ok();
      if (child_index() == 1) emit(kEpochsName, attr_of({NodeKind::epochs_dir, n->dataset, 0}));
      return Status::ok();
    case NodeKind::raw_dir: {
      DLFS_ASSIGN_OR_RETURN(const Dataset* ds, dataset_of(*n));
      const auto& m = ds->manifest();
      auto dir = static_cast<uint32_t>(n->index);
      auto subdirs = m.dir_subdirs(dir);
      auto files = m.dir_files(dir);
      while (child_index() < subdirs.size()) {
        uint32_t d = subdirs[child_index()];
        if (!emit(m.dir_name(d), attr_of({NodeKind::raw_dir, n->dataset, d}))) return Status::ok();
      }
      while (child_index() < subdirs.size() + files.size()) {
        uint32_t f = files[child_index() - subdirs.size()];
        if (!emit(m.file_name(f), attr_of({NodeKind::raw_file, n->dataset, f}))) return Status::ok();
      }
      return Status::ok();
    }
    default:
      return view_readdir(*n, child_index(), emit, kernel_keeps_entries);
  }
}

Status Namespace::open(uint64_t ino, int flags) const {
  if ((flags & O_ACCMODE) != O_RDONLY || (flags & (O_TRUNC | O_CREAT | O_APPEND)))
    return Status(EROFS, "read-only file system");
  auto a = getattr(ino);
  if (!a) return a.status();
  if (S_ISDIR(a->mode)) return Status(EISDIR, "is a directory");
  return Status::ok();
}

Status Namespace::read(uint64_t ino, uint64_t offset, uint64_t size, cache::Gather& out) const {
  out.reset(size);
  auto n = decode_ino(ino);
  if (!n) return not_found();
  switch (n->kind) {
    case NodeKind::raw_file: return read_raw(*n, offset, size, out);
    case NodeKind::view:
    case NodeKind::view_entry: return read_view(*n, offset, size, out);
    case NodeKind::generated: return read_generated(*n, offset, size, out);
    default: {
      auto a = attr_of(*n);
      if (!a) return a.status();
      return Status(S_ISDIR(a->mode) ? EISDIR : EINVAL, S_ISDIR(a->mode) ? "is a directory" : "not readable");
    }
  }
}

Status Namespace::read_raw(const NodeId& n, uint64_t offset, uint64_t size, cache::Gather& out) const {
  DLFS_ASSIGN_OR_RETURN(const Dataset* ds, dataset_of(n));
  if (n.index >= ds->manifest().file_count()) return not_found();
  const auto& m = ds->manifest();
  auto f = static_cast<uint32_t>(n.index);
  uint64_t fsize = m.file_size(f);
  if (offset >= fsize || size == 0) return Status::ok();
  uint64_t len = std::min(size, fsize - offset);
  auto& c = ds->raw_counters();
  Status s = ds->reader().read_bytes(m.file_data_offset(f) + offset, len, out, c.reads);
  if (!s) return s.with_context("dataset '" + ds->name() + "'");
  c.requests.fetch_add(1, std::memory_order_relaxed);
  c.bytes.fetch_add(len, std::memory_order_relaxed);
  return Status::ok();
}

Result<Attr> Namespace::generate(std::shared_ptr<OpenFile> content, uint64_t size,
                                 std::shared_ptr<const EpochView> view) const {
  const uint64_t number = generated_.add({std::move(content), size, std::move(view)});
  return generated_attr({NodeKind::generated, 0, number});
}

Result<Attr> Namespace::generated_attr(const NodeId& n) const {
  DLFS_ASSIGN_OR_RETURN(const GeneratedFiles::File f, generated_.get(n.index));
  const Dataset* ds = f.content->dataset();
  Attr a = ds ? view_file_attr(*ds, encode_ino(n), f.size) : file_attr(encode_ino(n), f.size, start_time_ns_);
  a.fresh_each_lookup = a.lookup_only = true;
  return a;
}

Status Namespace::read_generated(const NodeId& n, uint64_t offset, uint64_t size, cache::Gather& out) const {
  DLFS_ASSIGN_OR_RETURN(const GeneratedFiles::File f, generated_.get(n.index));
  const Dataset* ds = f.content->dataset();  // an opportunistic stream's; null for stats
  Status s = f.content->read(offset, size, out);
  return ds ? counted_view_read(ds, std::move(s), &out) : s;
}

Status Namespace::counted_view_read(const Dataset* ds, Status s, const cache::Gather* counted) const {
  if (!s) return s.with_context("dataset '" + ds->name() + "'");
  if (!counted) return s;
  auto& c = ds->view_counters();
  c.requests.fetch_add(1, std::memory_order_relaxed);
  c.bytes.fetch_add(counted->bytes(), std::memory_order_relaxed);
  return s;
}

FsTotals Namespace::totals() const {
  FsTotals t;
  for (const auto& slot : datasets_) {  // what is served so far: statfs never waits
    const Dataset* d = slot->get();
    if (!d) continue;
    t.bytes += d->manifest().total_bytes();
    t.files += d->manifest().file_count() + d->manifest().dir_count();
  }
  return t;
}

std::pair<const Dataset*, uint32_t> Namespace::raw_file_of(uint64_t ino) const {
  auto n = decode_ino(ino);
  if (!n || n->kind != NodeKind::raw_file) return {nullptr, 0};
  const Dataset* ds = ready_dataset(*n);
  if (!ds || n->index >= ds->manifest().file_count()) return {nullptr, 0};
  return {ds, static_cast<uint32_t>(n->index)};
}

}  // namespace dlfs::fs
