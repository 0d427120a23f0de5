// The epoch-view part of the Namespace: /<dataset>/epochs/<e>/<W>/...
// (layout in docs/views.md). Epochs and world sizes exist when looked up;
// listings show the configured ones.
#include <sys/stat.h>

#include <charconv>

#include "fs/namespace.h"

namespace dlfs::fs {
namespace {

Status not_found() { return Status(ENOENT, "no such entry"); }

// Decimal without sign, leading zeros or trailing text; nullopt otherwise.
std::optional<uint64_t> parse_number(std::string_view s) {
  if (s.empty() || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

constexpr uint64_t world_index(uint64_t epoch, uint64_t w) { return epoch << 16 | w; }
constexpr uint64_t entry_index(uint64_t view, uint64_t k) { return view << 24 | k; }

bool is_view(NodeKind k) {
  return k == NodeKind::view_tar || k == NodeKind::view_bin || k == NodeKind::view_index || k == NodeKind::view_dir;
}

}  // namespace

Result<std::shared_ptr<const EpochView>> Namespace::view_of(const NodeId& n) const {
  const Dataset* ds = dataset_of(n);
  if (!ds) return not_found();
  const uint64_t id = n.kind == NodeKind::view_entry ? n.index >> 24 : n.index;
  return ds->views().get(*ds, static_cast<uint32_t>(id));
}

Result<Attr> Namespace::view_attr(const NodeId& n) const {
  const Dataset* ds = dataset_of(n);
  if (!ds) return not_found();
  const uint64_t ino = encode_ino(n);
  const int64_t mtime = ds->root_mtime_ns();
  switch (n.kind) {
    case NodeKind::epochs_dir: return dir_attr(ino, 0555, ds->planner().config().epochs_listed, mtime);
    case NodeKind::epoch_dir: return dir_attr(ino, 0555, 1, mtime);
    case NodeKind::world_dir: return dir_attr(ino, 0555, static_cast<uint32_t>(n.index & 0xffff), mtime);
    case NodeKind::view_dir: return dir_attr(ino, 0555, 0, mtime);
    case NodeKind::view_index: {
      Attr a = file_attr(ino, 0, mtime);  // generated at open, read with direct I/O
      return a;
    }
    case NodeKind::view_tar:
    case NodeKind::view_bin:
    case NodeKind::view_entry: {
      auto v = view_of(n);
      if (!v) return v.status();
      if (n.kind == NodeKind::view_tar) return file_attr(ino, (*v)->tar_size(), mtime);
      if (n.kind == NodeKind::view_bin) return file_attr(ino, (*v)->bin_size(), mtime);
      const uint64_t k = n.index & kMaxEntryPosition;
      if (k >= (*v)->count()) return not_found();
      return file_attr(ino, (*v)->sample_length(k), mtime);
    }
    default: return not_found();
  }
}

Result<Attr> Namespace::view_lookup(const NodeId& p, std::string_view name) const {
  const Dataset* ds = dataset_of(p);
  if (!ds) return not_found();
  switch (p.kind) {
    case NodeKind::epochs_dir: {
      auto e = parse_number(name);
      if (!e || *e > kMaxEpoch) return not_found();
      return view_attr({NodeKind::epoch_dir, p.dataset, *e});
    }
    case NodeKind::epoch_dir: {
      auto w = parse_number(name);
      if (!w || *w < 1 || *w > 65535) return not_found();
      return view_attr({NodeKind::world_dir, p.dataset, world_index(p.index, *w)});
    }
    case NodeKind::world_dir: {
      const uint64_t epoch = p.index >> 16, w = p.index & 0xffff;
      auto dot = name.find('.');
      auto r = parse_number(name.substr(0, dot));
      if (!r || *r >= w) return not_found();
      std::string_view ext = dot == std::string_view::npos ? "" : name.substr(dot);
      NodeKind kind;
      if (ext.empty()) kind = NodeKind::view_dir;
      else if (ext == ".tar") kind = NodeKind::view_tar;
      else if (ext == ".index") kind = NodeKind::view_index;
      else if (ext == ".bin" && ds->manifest().fixed_record_size() > 0)
        kind = NodeKind::view_bin;
      else return not_found();
      auto id = ds->views().id_of({static_cast<uint32_t>(epoch), static_cast<uint32_t>(w), static_cast<uint32_t>(*r)});
      if (!id) return id.status();
      return view_attr({kind, p.dataset, *id});
    }
    case NodeKind::view_dir: {
      auto dash = name.find('-');
      if (dash == std::string_view::npos) return not_found();
      auto k = std::string_view(name.substr(0, dash));
      uint64_t pos = 0;
      auto [ptr, ec] = std::from_chars(k.data(), k.data() + k.size(), pos);
      if (ec != std::errc() || ptr != k.data() + k.size() || pos > kMaxEntryPosition) return not_found();
      auto v = view_of(p);
      if (!v) return v.status();
      if (pos >= (*v)->count() || (*v)->entry_name(pos) != name) return not_found();
      return view_attr({NodeKind::view_entry, p.dataset, entry_index(p.index, pos)});
    }
    default: return Status(ENOTDIR, "not a directory");
  }
}

Status Namespace::view_readdir(const NodeId& n, uint64_t child, const Emit& emit) const {
  const Dataset* ds = dataset_of(n);
  if (!ds) return not_found();
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
    case NodeKind::world_dir: {
      const uint64_t epoch = n.index >> 16, w = n.index & 0xffff;
      const bool fixed = ds->manifest().fixed_record_size() > 0;
      const uint64_t per_rank = fixed ? 4 : 3;
      for (uint64_t c = child; c < w * per_rank; ++c) {
        const uint64_t r = c / per_rank;
        auto id = ds->views().id_of({static_cast<uint32_t>(epoch), static_cast<uint32_t>(w), static_cast<uint32_t>(r)});
        if (!id) return id.status();
        static constexpr NodeKind kinds[] = {NodeKind::view_dir, NodeKind::view_index, NodeKind::view_tar,
                                             NodeKind::view_bin};
        static constexpr const char* exts[] = {"", ".index", ".tar", ".bin"};
        const uint64_t i = c % per_rank;
        if (!emit(std::to_string(r) + exts[i], view_attr({kinds[i], n.dataset, *id}))) break;
      }
      return Status::ok();
    }
    case NodeKind::view_dir: {
      auto v = view_of(n);
      if (!v) return v.status();
      const uint64_t count = std::min((*v)->count(), kMaxEntryPosition + 1);
      for (uint64_t k = child; k < count; ++k)
        if (!emit((*v)->entry_name(k), view_attr({NodeKind::view_entry, n.dataset, entry_index(n.index, k)}))) break;
      return Status::ok();
    }
    default: return Status(ENOTDIR, "not a directory");
  }
}

Result<OpenResult> Namespace::view_open(const NodeId& n) const {
  if (!is_view(n.kind) && n.kind != NodeKind::view_entry) return Status(EISDIR, "is a directory");
  if (n.kind == NodeKind::view_dir) return Status(EISDIR, "is a directory");
  auto v = view_of(n);
  if (!v) return v.status();
  const Dataset* ds = dataset_of(n);
  ds->view_counters().opens.fetch_add(1, std::memory_order_relaxed);
  OpenResult r;
  if (n.kind == NodeKind::view_index) {
    r.direct_io = true;
    r.snapshot = std::make_shared<const std::string>((*v)->index_text());
    return r;
  }
  r.keep_cache = true;  // a view's bytes are a pure function of its name: cacheable
  r.view = *v;
  r.view_kind = n.kind;
  r.entry = n.index & kMaxEntryPosition;
  if ((n.kind == NodeKind::view_tar || n.kind == NodeKind::view_bin) && ds->planner().config().readahead)
    r.ring = (*v)->make_ring();
  if (n.kind == NodeKind::view_tar && ds->planner().opportunistic()) {
    // Each open may order the stream differently: no page cache for it.
    r.keep_cache = false;
    r.direct_io = true;
    auto view = *v;
    auto ring = r.ring;
    r.opportunistic = std::make_shared<OpportunisticStream>(
        view, ring, ds->planner().config().opportunistic_window,
        [view, ring](uint64_t k) { return view->resident(k) || (ring && ring->ready(k)); });
  }
  if (n.kind == NodeKind::view_entry && r.entry >= (*v)->count()) return not_found();
  return r;
}

Status Namespace::read_view(const OpenResult& f, uint64_t offset, uint64_t size, ReplyGather& out) const {
  out.reset(size);
  Status s;
  switch (f.view_kind) {
    case NodeKind::view_tar:
      s = f.opportunistic ? f.opportunistic->read(offset, size, out) : f.view->read_tar(offset, size, out, f.ring.get());
      break;
    case NodeKind::view_bin: s = f.view->read_bin(offset, size, out, f.ring.get()); break;
    case NodeKind::view_entry: s = f.view->read_entry(f.entry, offset, size, out); break;
    default: return Status(EINVAL, "not an epoch view");
  }
  if (!s) return s.with_context("dataset '" + f.view->dataset().name() + "'");
  auto& c = f.view->dataset().view_counters();
  c.requests.fetch_add(1, std::memory_order_relaxed);
  c.bytes.fetch_add(out.bytes(), std::memory_order_relaxed);
  return s;
}

Result<std::string> Namespace::getxattr(uint64_t ino, const std::string& name) const {
  auto n = decode_ino(ino);
  if (!n) return not_found();
  if (!is_view(n->kind)) return Status(ENODATA, "no such attribute");
  auto v = view_of(*n);
  if (!v) return v.status();
  std::string value = (*v)->xattr(name);
  if (value.empty()) return Status(ENODATA, "no such attribute");
  return value;
}

Result<std::vector<std::string>> Namespace::listxattr(uint64_t ino) const {
  auto n = decode_ino(ino);
  if (!n) return not_found();
  if (!is_view(n->kind)) return std::vector<std::string>{};
  return EpochView::xattr_names();
}

}  // namespace dlfs::fs
