// The directories named by a directory context (fs/namespace/dir_contexts.h):
//
//   /<dataset>/seeds/                          lists nothing: any seed exists when looked up
//   /<dataset>/seeds/<s>/epochs/<e>/<W>/...    the epochs/ tree with seed s
//   .../epochs/<e>/<W>/resume/                 lists nothing
//   .../resume/<consumed>/<W'>/<r'>.<fmt>      the rest of epoch e after W ranks
//                                              read <consumed>, over W' ranks
//
// Layout and rules in docs/views.md; the remainder is fs/views/resume_order.h.
#include "common/decimal.h"
#include "fs/namespace/namespace.h"

namespace dlfs::fs {
namespace {


constexpr uint64_t kMaxWorld = 65535;

DirKey seed_key(DirLevel level, uint64_t seed, uint32_t epoch = 0) { return {level, seed, true, epoch, 0, {}}; }

// The path of a context's directory below the dataset, for log lines.
std::string path_of(const Dataset& ds, const DirKey& k) {
  std::string p = ds.name() + "/";
  if (k.seeded) p += "seeds/" + std::to_string(k.seed) + "/";
  p += "epochs/" + std::to_string(k.epoch) + "/" + std::to_string(k.world) + "/resume";
  if (k.level == DirLevel::consumed) p += "/" + k.consumed;
  return p;
}

}  // namespace

std::shared_ptr<const ViewContext> Namespace::make_view_context(const Dataset& ds, uint32_t dataset, const DirKey& key,
                                                                std::vector<uint64_t> counts) const {
  std::shared_ptr<ViewContext> c;
  if (key.level == DirLevel::epoch) c = std::make_shared<ViewContext>(key.seed, true);
  else if (key.level == DirLevel::consumed)
    c = std::make_shared<ViewContext>(key.seed, key.seeded, key.world, std::move(counts), key.consumed);
  else return nullptr;
  c->counters = &seeds_[dataset]->of(key.seed, ds.planner().seed());
  return c;
}

Result<Attr> Namespace::context_child(const Dataset& ds, uint32_t dataset, const DirKey& key) const {
  return context_child_with(ds, dataset, key, {});
}

Result<Attr> Namespace::context_child_with(const Dataset& ds, uint32_t dataset, const DirKey& key,
                                           std::vector<uint64_t> counts) const {
  auto id = contexts_[dataset]->id_of(key, make_view_context(ds, dataset, key, std::move(counts)));
  if (!id) return id.status();
  auto a = context_attr(ds, {NodeKind::context_dir, dataset, *id});
  if (!a) contexts_[dataset]->release(*id);  // the kernel gets no inode: it will never forget this pin
  return a;
}

Result<Attr> Namespace::context_world(const Dataset& ds, uint32_t dataset, uint32_t id, uint64_t w) const {
  contexts_[dataset]->pin(id);
  auto a = context_attr(ds, {NodeKind::context_world_dir, dataset, uint64_t{id} << 16 | w});
  if (!a) contexts_[dataset]->release(id);
  return a;
}

Result<Attr> Namespace::context_attr(const Dataset& ds, const NodeId& n) const {
  const uint64_t ino = encode_ino(n);
  if (n.kind == NodeKind::seeds_dir) return view_dir_attr(ds, ino, 0);
  const uint64_t id = n.kind == NodeKind::context_world_dir ? n.index >> 16 : n.index;
  auto c = contexts_[n.dataset]->get(static_cast<uint32_t>(id));
  if (!c) return not_found();
  if (n.kind == NodeKind::context_world_dir) {
    if (c->key.level != DirLevel::epoch && c->key.level != DirLevel::consumed) return not_found();
    return view_dir_attr(ds, ino, static_cast<uint32_t>(n.index & 0xffff));
  }
  switch (c->key.level) {
    case DirLevel::seed: return view_dir_attr(ds, ino, 1);
    case DirLevel::seed_epochs: return view_dir_attr(ds, ino, ds.planner().config().epochs_listed);
    case DirLevel::epoch: return view_dir_attr(ds, ino, 1);
    case DirLevel::resume:
    case DirLevel::consumed: return view_dir_attr(ds, ino, 0);
  }
  return not_found();
}

void Namespace::refuse_resume(const Dataset& ds, const DirKey& resume, std::string_view name,
                              const Status& why) const {
  refusals_.refuse("[" + ds.name() + "] no resume view " + path_of(ds, resume) + "/" + std::string(name) + ": " +
                   why.message() + " (docs/views.md, \"Resuming an epoch on another world size\")");
}

Result<Attr> Namespace::context_lookup(const Dataset& ds, const NodeId& p, std::string_view name) const {
  if (p.kind == NodeKind::seeds_dir) {
    auto s = parse_canonical_decimal(name);  // any 64-bit seed
    if (!s) return not_found();
    return context_child(ds, p.dataset, seed_key(DirLevel::seed, *s));
  }
  const auto id = static_cast<uint32_t>(p.index);
  auto c = contexts_[p.dataset]->get(id);
  if (!c) return not_found();
  const DirKey& k = c->key;
  switch (k.level) {
    case DirLevel::seed:
      if (name != "epochs") return not_found();
      return context_child(ds, p.dataset, seed_key(DirLevel::seed_epochs, k.seed));
    case DirLevel::seed_epochs: {
      auto e = parse_canonical_decimal(name);
      if (!e || *e > kMaxEpoch) return not_found();
      return context_child(ds, p.dataset, seed_key(DirLevel::epoch, k.seed, static_cast<uint32_t>(*e)));
    }
    case DirLevel::epoch:
    case DirLevel::consumed: {
      auto w = parse_canonical_decimal(name);
      if (!w || *w < 1 || *w > kMaxWorld) return not_found();
      return context_world(ds, p.dataset, id, *w);
    }
    case DirLevel::resume: {
      // What a checkpoint holds, checked against the epoch: a name that does
      // not fit is refused, and said why once in the log (the user asked for
      // a path their checkpoint gave them).
      auto counts = parse_consumed(name, k.world);
      Status bad = counts ? check_consumed(ds.planner().shape().samples, k.world, *counts, ds.planner().remainder())
                          : counts.status();
      if (!bad) {
        refuse_resume(ds, k, name, bad);
        return not_found();
      }
      DirKey child = k;
      child.level = DirLevel::consumed;
      child.consumed = std::string(name);
      return context_child_with(ds, p.dataset, child, std::move(*counts));
    }
  }
  return not_found();
}

Status Namespace::context_readdir(const Dataset& ds, const NodeId& n, uint64_t child, const Emit& emit,
                                  bool kernel_keeps_entries) const {
  if (n.kind == NodeKind::seeds_dir) return Status::ok();  // seeds exist when looked up
  const auto id = static_cast<uint32_t>(n.index);
  auto c = contexts_[n.dataset]->get(id);
  if (!c) return not_found();
  const DirKey& k = c->key;
  // Only a readdirplus entry is an inode the kernel keeps (and forgets).
  auto add = [&](const std::string& name, Result<Attr> a, auto release) {
    const bool added = emit(name, a);
    if (a && !(added && kernel_keeps_entries)) release(*a);
    return added;
  };
  auto release_dir = [&](const Attr& a) {
    if (auto d = decode_ino(a.ino)) contexts_[n.dataset]->release(static_cast<uint32_t>(d->index));
  };
  auto release_world = [&](const Attr&) { contexts_[n.dataset]->release(id); };
  switch (k.level) {
    case DirLevel::seed:
      if (child == 0) add("epochs", context_child(ds, n.dataset, seed_key(DirLevel::seed_epochs, k.seed)), release_dir);
      return Status::ok();
    case DirLevel::seed_epochs:
      for (uint64_t e = child; e < ds.planner().config().epochs_listed; ++e)
        if (!add(std::to_string(e),
                 context_child(ds, n.dataset, seed_key(DirLevel::epoch, k.seed, static_cast<uint32_t>(e))),
                 release_dir))
          break;
      return Status::ok();
    case DirLevel::epoch: {
      const uint64_t w = ds.planner().config().world_size;
      if (child == 0) add(std::to_string(w), context_world(ds, n.dataset, id, w), release_world);
      return Status::ok();
    }
    case DirLevel::resume:    // the counts come from a checkpoint
    case DirLevel::consumed:  // any W' exists when looked up
      return Status::ok();
  }
  return Status::ok();
}

}  // namespace dlfs::fs
