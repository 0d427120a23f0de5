// The epoch-view part of the Namespace: /<dataset>/epochs/<e>/<W>/...
// (layout in docs/views.md). Epochs and world sizes exist when looked up;
// listings show the configured ones. What a view file is and how it reads
// belongs to its ViewFormat (fs/views/view_formats.cc); this file only names them.
#include <sys/stat.h>

#include "common/decimal.h"
#include "fs/namespace/namespace.h"
#include "fs/views/view_format.h"

namespace dlfs::fs {
namespace {


constexpr uint64_t world_index(uint64_t epoch, uint64_t w) { return epoch << 16 | w; }
constexpr uint64_t entry_index(uint64_t view, uint64_t k) { return view << 24 | k; }
constexpr uint64_t entry_view(uint64_t index) { return index >> 24; }
constexpr uint64_t entry_position(uint64_t index) { return index & kMaxEntryPosition; }

// A view's format number comes from its inode number; one that nobody handed
// out may name no registered format (callers check before format_of).
bool format_known(const NodeId& n) { return n.format < view_formats().size(); }
const ViewFormat& format_of(const NodeId& n) { return *view_formats().at(n.format); }

NodeId view_node(uint32_t dataset, size_t format, uint64_t id) {
  return NodeId{NodeKind::view, dataset, id, static_cast<uint8_t>(format)};
}

}  // namespace

void Namespace::forget(uint64_t ino, uint64_t nlookup) const {
  auto n = decode_ino(ino);
  if (!n) return;
  // A generated file lives as long as the kernel keeps its inode: the kernel
  // forgets an inode once, with every lookup it counted.
  if (n->kind == NodeKind::generated) return generated_.forget(n->index);
  // Never waits: the kernel holds no view of a dataset that is not ready.
  if (!ready_dataset(*n)) return;
  // Only view and context inodes pin anything else.
  if (n->kind == NodeKind::view) views_of(*n).release(static_cast<uint32_t>(n->index), nlookup);
  if (n->kind == NodeKind::context_dir) contexts_[n->dataset]->release(static_cast<uint32_t>(n->index), nlookup);
  if (n->kind == NodeKind::context_world_dir)
    contexts_[n->dataset]->release(static_cast<uint32_t>(n->index >> 16), nlookup);
}

Result<std::shared_ptr<const EpochView>> Namespace::view_of(const NodeId& n) const {
  DLFS_ASSIGN_OR_RETURN(const Dataset* ds, dataset_of(n));
  if (!format_known(n)) return not_found();
  const uint64_t id = n.kind == NodeKind::view_entry ? entry_view(n.index) : n.index;
  return views_of(n).get(*ds, static_cast<uint32_t>(id));
}

Result<Attr> Namespace::view_attr(const NodeId& n) const {
  DLFS_ASSIGN_OR_RETURN(const Dataset* ds, dataset_of(n));
  const uint64_t ino = encode_ino(n);
  switch (n.kind) {
    case NodeKind::epochs_dir: return view_dir_attr(*ds, ino, ds->planner().config().epochs_listed);
    case NodeKind::epoch_dir: return view_dir_attr(*ds, ino, 1);
    case NodeKind::world_dir: return view_dir_attr(*ds, ino, static_cast<uint32_t>(n.index & 0xffff));
    case NodeKind::seeds_dir:
    case NodeKind::context_dir:
    case NodeKind::context_world_dir: return context_attr(*ds, n);
    case NodeKind::view: {
      if (!format_known(n)) return not_found();
      const ViewFormat& f = format_of(n);
      if (f.is_directory()) return view_dir_attr(*ds, ino, 0);
      auto v = view_of(n);
      if (!v) return v.status();
      Attr a = view_file_attr(*ds, ino, f.size(**v));
      a.lookup_only = f.size_costs_work();
      return a;
    }
    case NodeKind::view_entry: {
      auto v = view_of(n);
      if (!v) return v.status();
      const uint64_t k = entry_position(n.index);
      if (k >= (*v)->count()) return not_found();
      return view_file_attr(*ds, ino, format_of(n).entry_size(**v, k));
    }
    default: return not_found();
  }
}

Result<Attr> Namespace::view_lookup(const NodeId& p, std::string_view name) const {
  DLFS_ASSIGN_OR_RETURN(const Dataset* ds, dataset_of(p));
  if (!format_known(p)) return not_found();
  switch (p.kind) {
    case NodeKind::epochs_dir: {
      auto e = parse_canonical_decimal(name);
      if (!e || *e > kMaxEpoch) return not_found();
      return view_attr({NodeKind::epoch_dir, p.dataset, *e});
    }
    case NodeKind::epoch_dir: {
      auto w = parse_canonical_decimal(name);
      if (!w || *w < 1 || *w > 65535) return not_found();
      return view_attr({NodeKind::world_dir, p.dataset, world_index(p.index, *w)});
    }
    case NodeKind::world_dir:
    case NodeKind::context_world_dir: return world_lookup(*ds, p, name);
    case NodeKind::seeds_dir:
    case NodeKind::context_dir: return context_lookup(*ds, p, name);
    case NodeKind::view: {
      if (!format_of(p).is_directory()) return Status(ENOTDIR, "not a directory");
      auto v = view_of(p);
      if (!v) return v.status();
      auto k = format_of(p).find_entry(**v, name);
      if (!k || *k > kMaxEntryPosition) return not_found();
      ds->view_counters().lookups.fetch_add(1, std::memory_order_relaxed);
      return view_attr({NodeKind::view_entry, p.dataset, entry_index(p.index, *k), p.format});
    }
    default: return Status(ENOTDIR, "not a directory");
  }
}

Status Namespace::view_readdir(const NodeId& n, uint64_t child, const Emit& emit, bool kernel_keeps_entries) const {
  DLFS_ASSIGN_OR_RETURN(const Dataset* ds, dataset_of(n));
  if (!format_known(n)) return not_found();
  switch (n.kind) {
    case NodeKind::epochs_dir:
      for (uint64_t e = child; e < ds->planner().config().epochs_listed; ++e)
        if (!emit(std::to_string(e), view_attr({NodeKind::epoch_dir, n.dataset, e}))) break;
      return Status::ok();
    case NodeKind::epoch_dir: {
      const uint64_t w = ds->planner().config().world_size;
      if (child == 0) emit(std::to_string(w), view_attr({NodeKind::world_dir, n.dataset, world_index(n.index, w)}));
      return Status::ok();
    }
    case NodeKind::world_dir:
    case NodeKind::context_world_dir: return world_readdir(*ds, n, child, emit, kernel_keeps_entries);
    case NodeKind::seeds_dir:
    case NodeKind::context_dir: return context_readdir(*ds, n, child, emit, kernel_keeps_entries);
    case NodeKind::view: {
      if (!format_of(n).is_directory()) return Status(ENOTDIR, "not a directory");
      auto v = view_of(n);
      if (!v) return v.status();
      const uint64_t count = std::min((*v)->count(), kMaxEntryPosition + 1);
      for (uint64_t k = child; k < count; ++k)
        if (!emit(format_of(n).entry_name(**v, k),
                  view_attr({NodeKind::view_entry, n.dataset, entry_index(n.index, k), n.format})))
          break;
      return Status::ok();
    }
    default: return Status(ENOTDIR, "not a directory");
  }
}

Result<Namespace::World> Namespace::world_of(const Dataset& ds, const NodeId& n) const {
  World w;
  w.w = static_cast<uint32_t>(n.index & 0xffff);
  if (n.kind == NodeKind::world_dir) {
    w.epoch = static_cast<uint32_t>(n.index >> 16);
    w.resume = DirKey{DirLevel::resume, ds.planner().seed(), false, w.epoch, w.w, {}};
    return w;
  }
  auto c = contexts_[n.dataset]->get(static_cast<uint32_t>(n.index >> 16));
  if (!c || !c->views) return not_found();
  w.epoch = c->key.epoch;
  w.context = c->views;
  if (c->key.level == DirLevel::epoch) w.resume = DirKey{DirLevel::resume, c->key.seed, true, w.epoch, w.w, {}};
  return w;
}

SeedCounters& Namespace::seed_counters(const Dataset& ds, uint32_t dataset, const ViewContext* c) const {
  if (c && c->counters) return *c->counters;
  return c ? seeds_[dataset]->of(c->seed(), ds.planner().seed()) : seeds_[dataset]->configured();
}

Result<Attr> Namespace::world_lookup(const Dataset& ds, const NodeId& p, std::string_view name) const {
  DLFS_ASSIGN_OR_RETURN(const World world, world_of(ds, p));
  if (name == "resume" && world.resume) return context_child(ds, p.dataset, *world.resume);
  auto dot = name.find('.');
  auto r = parse_canonical_decimal(name.substr(0, dot));
  if (!r || *r >= world.w) return not_found();
  auto format = view_format_index(dot == std::string_view::npos ? "" : name.substr(dot));
  if (!format || !view_formats()[*format]->applies_to(ds)) return not_found();
  auto id = views_of(p).id_of({world.epoch, world.w, static_cast<uint32_t>(*r), world.context});
  if (!id) return id.status();
  const ViewFormat& f = *view_formats()[*format];
  SeedCounters& seed = seed_counters(ds, p.dataset, world.context.get());
  auto count_lookup = [&](const EpochView* v) {  // v: a data format's view (its samples count)
    ds.view_counters().lookups.fetch_add(1, std::memory_order_relaxed);
    seed.lookups.fetch_add(1, std::memory_order_relaxed);
    if (v) seed.samples.fetch_add(v->count(), std::memory_order_relaxed);
  };
  if (f.per_lookup(ds)) {  // a new stream for this lookup, not an inode naming the view
    auto v = views_of(p).get(ds, *id);
    views_of(p).release(*id);
    if (!v) return v.status();
    count_lookup(f.size_costs_work() ? nullptr : v->get());
    DLFS_ASSIGN_OR_RETURN(std::unique_ptr<OpenFile> stream, f.open(*v));
    const uint64_t size = f.size(**v);
    return generate(std::move(stream), size, *v);
  }
  auto a = view_attr(view_node(p.dataset, *format, *id));
  if (!a) {
    views_of(p).release(*id);  // the kernel gets no inode: it will never forget this pin
    return a;
  }
  if (f.is_directory()) return a;
  if (f.size_costs_work()) {
    count_lookup(nullptr);
  } else if (auto v = views_of(p).get(ds, *id)) {  // cached: view_attr built it
    count_lookup(v->get());
  }
  return a;
}

// Each rank's views, in registry order: "<r>", "<r>.index", "<r>.tar", ...
// (resume/ is not listed: it exists when looked up).
Status Namespace::world_readdir(const Dataset& ds, const NodeId& n, uint64_t child, const Emit& emit,
                                bool kernel_keeps_entries) const {
  DLFS_ASSIGN_OR_RETURN(const World world, world_of(ds, n));
  const uint64_t w = world.w;
  std::vector<size_t> formats;
  for (size_t f = 0; f < view_formats().size(); ++f)
    if (view_formats()[f]->applies_to(ds)) formats.push_back(f);
  for (uint64_t c = child; c < w * formats.size(); ++c) {
    const uint64_t r = c / formats.size();
    const size_t f = formats[c % formats.size()];
    auto id = views_of(n).id_of({world.epoch, world.w, static_cast<uint32_t>(r), world.context});
    if (!id) return id.status();
    const ViewFormat& format = *view_formats()[f];
    const std::string name = std::to_string(r) + std::string(format.extension());
    Result<Attr> a = Status::ok();
    if (format.per_lookup(ds) || format.size_costs_work()) {
      // Listed by name only: the size is made (or costs work) at lookup.
      Attr only = view_file_attr(ds, encode_ino(view_node(n.dataset, f, *id)), 0);
      only.lookup_only = true;
      a = only;
    } else {
      a = view_attr(view_node(n.dataset, f, *id));
    }
    const bool added = emit(name, a);
    // Only an entry of a readdirplus reply is an inode the kernel keeps (and forgets).
    if (!(added && kernel_keeps_entries && a && !a->lookup_only)) views_of(n).release(*id);
    if (!added) break;
  }
  return Status::ok();
}

Status Namespace::read_view(const NodeId& n, uint64_t offset, uint64_t size, cache::Gather& out) const {
  DLFS_ASSIGN_OR_RETURN(const Dataset* ds, dataset_of(n));
  if (!format_known(n)) return not_found();
  const ViewFormat& f = format_of(n);
  if (n.kind == NodeKind::view && f.is_directory()) return Status(EISDIR, "is a directory");
  const uint64_t id = n.kind == NodeKind::view_entry ? entry_view(n.index) : n.index;
  auto stream = views_of(n).stream(*ds, static_cast<uint32_t>(id), f.reads_ahead());
  if (!stream) return stream.status();
  Status s = n.kind == NodeKind::view ? f.read(*stream, offset, size, out)
                                      : f.read_entry(*stream, entry_position(n.index), offset, size, out);
  // The .index is text about the view, not view traffic.
  if (s && !f.size_costs_work()) {
    SeedCounters& seed = seed_counters(*ds, n.dataset, stream->view->context());
    seed.requests.fetch_add(1, std::memory_order_relaxed);
    seed.bytes.fetch_add(out.bytes(), std::memory_order_relaxed);
  }
  return counted_view_read(ds, std::move(s), f.size_costs_work() ? nullptr : &out);
}

namespace {
constexpr const char* kClientSocketXattr = "user.dlfs.client_socket";
constexpr const char* kDatasetXattr = "user.dlfs.dataset";
}  // namespace

Result<std::string> Namespace::getxattr(uint64_t ino, const std::string& name) const {
  auto n = decode_ino(ino);
  if (!n) return not_found();
  std::shared_ptr<const EpochView> view;
  if (n->kind == NodeKind::generated) {  // an opportunistic stream describes its view
    DLFS_ASSIGN_OR_RETURN(const GeneratedFiles::File f, generated_.get(n->index));
    view = f.view;
  } else if (n->kind == NodeKind::view) {
    DLFS_ASSIGN_OR_RETURN(view, view_of(*n));
  }
  if (!view) return Status(ENODATA, "no such attribute");
  if (name == kClientSocketXattr && !client_socket_.empty()) return client_socket_;
  if (name == kDatasetXattr && !client_socket_.empty()) return view->dataset().name();
  std::string value = view->xattr(name);
  if (value.empty()) return Status(ENODATA, "no such attribute");
  return value;
}

Result<std::vector<std::string>> Namespace::listxattr(uint64_t ino) const {
  auto n = decode_ino(ino);
  if (!n) return not_found();
  if (n->kind == NodeKind::generated) {
    DLFS_ASSIGN_OR_RETURN(const GeneratedFiles::File f, generated_.get(n->index));
    if (f.view) return view_xattr_names();
  }
  if (n->kind != NodeKind::view) return std::vector<std::string>{};
  return view_xattr_names();
}

std::vector<std::string> Namespace::view_xattr_names() const {
  std::vector<std::string> names = EpochView::xattr_names();
  if (!client_socket_.empty()) {
    names.push_back(kClientSocketXattr);
    names.push_back(kDatasetXattr);
  }
  return names;
}

}  // namespace dlfs::fs
