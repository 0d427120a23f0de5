#include "fs/views/epoch_view.h"

#include <cstdio>

#include "fs/dataset/dataset.h"

namespace dlfs::fs {
namespace {

std::string fmt_double(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6f", v);
  return b;
}

}  // namespace

Result<std::shared_ptr<const EpochView>> EpochView::build(const Dataset& ds, ViewKey key) {
  if (key.world_size == 0 || key.rank >= key.world_size)
    return Status(EINVAL, "rank " + std::to_string(key.rank) + " is not below world size " +
                              std::to_string(key.world_size));
  std::shared_ptr<EpochView> v(new EpochView(ds, key));
  const plan::Planner& p = ds.planner();
  const ViewContext* c = key.context.get();
  v->plan_ = p.key(key.epoch, key.world_size);
  v->seed_ = c ? c->seed() : p.seed();
  v->order_ = p.order(key.epoch, v->seed_);
  if (v->seed_ == p.seed()) v->round_order_ = &v->order_;
  if (c && c->resumed()) {
    auto rest = c->remainder(key.epoch, p.shape().samples, p.remainder());
    if (!rest) return rest.status();
    v->resume_ = std::move(*rest);
    v->count_ = v->resume_->size() == 0 ? 0 : resume_per_rank(v->resume_->size(), key.world_size, p.remainder());
  } else {
    v->count_ = p.shape().samples == 0 ? 0 : plan::samples_per_rank(v->plan_);
  }
  return std::shared_ptr<const EpochView>(std::move(v));
}

uint64_t EpochView::sample_length(uint64_t k) const { return ds_.manifest().sample(sample_at(k)).length; }

std::string EpochView::member_name(uint64_t k) const { return ds_.manifest().member_name(sample_at(k)); }

Status EpochView::read_sample(uint64_t k, uint64_t from, uint64_t n, cache::Gather& out,
                              cache::ReadRing* ring) const {
  return ds_.reader().read_sample(sample_at(k), from, n, sample_context(k, ring), out, ds_.view_counters().reads);
}

bool EpochView::in_memory(uint64_t k) const { return ds_.reader().in_memory(sample_at(k), sample_context(k, nullptr)); }

const std::vector<std::string>& EpochView::xattr_names() {
  static const std::vector<std::string> names = {
      "user.dlfs.seed",    "user.dlfs.epoch",  "user.dlfs.world_size", "user.dlfs.rank",
      "user.dlfs.samples", "user.dlfs.remainder", "user.dlfs.order",   "user.dlfs.rounds",
      "user.dlfs.shuffle_ratio", "user.dlfs.rl"};
  return names;
}

std::string EpochView::xattr(const std::string& name) const {
  const plan::Planner& p = ds_.planner();
  if (name == "user.dlfs.seed") return std::to_string(seed_);
  if (name == "user.dlfs.epoch") return std::to_string(key_.epoch);
  if (name == "user.dlfs.world_size") return std::to_string(key_.world_size);
  if (name == "user.dlfs.rank") return std::to_string(key_.rank);
  if (name == "user.dlfs.samples") return std::to_string(count_);
  if (name == "user.dlfs.remainder") return p.remainder_name();
  if (name == "user.dlfs.order") return p.order_name();
  if (name == "user.dlfs.rounds") return std::to_string(rounds());
  if (name == "user.dlfs.shuffle_ratio") return fmt_double(p.ratio());
  if (name == "user.dlfs.rl") return fmt_double(p.randomization_level(seed_));
  return "";
}

}  // namespace dlfs::fs
