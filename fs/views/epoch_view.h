// EpochView: rank r of W in epoch e (docs/views.md): which sample is at each
// position k of the rank's stream, what it is called, and where its bytes
// are read (through the dataset's one SampleReader). Immutable once built;
// open files share it, so reads take no lock to find their samples.
//
// How the stream is laid out as a file (tar members, fixed records, a
// directory, an index) belongs to the view formats (fs/views/view_format.h); a
// format that needs a per-view table (the tar member offsets) keeps it here,
// built once on first use (layout()).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/gather.h"
#include "cache/read_ring.h"
#include "cache/sample_reader.h"
#include "common/status.h"
#include "plan/epoch_plan.h"
#include "fs/views/resume_order.h"
#include "fs/views/view_context.h"
#include "plan/round_plan.h"

namespace dlfs::fs {

class Dataset;

struct ViewKey {
  ViewKey() = default;
  ViewKey(uint32_t e, uint32_t w, uint32_t r, std::shared_ptr<const ViewContext> c = nullptr)
      : epoch(e), world_size(w), rank(r), context(std::move(c)) {}
  uint32_t epoch = 0;
  uint32_t world_size = 1;
  uint32_t rank = 0;
  // Another seed, a resumed epoch (fs/views/view_context.h); null: neither.
  std::shared_ptr<const ViewContext> context;
  bool operator==(const ViewKey& o) const {
    return epoch == o.epoch && world_size == o.world_size && rank == o.rank &&
           same_context(context.get(), o.context.get());
  }
  bool operator<(const ViewKey& o) const {
    if (std::tie(epoch, world_size, rank) != std::tie(o.epoch, o.world_size, o.rank))
      return std::tie(epoch, world_size, rank) < std::tie(o.epoch, o.world_size, o.rank);
    return context_less(context.get(), o.context.get());
  }
};

// At most this many view formats (fs/views/view_formats.cc): one layout slot each.
inline constexpr size_t kMaxViewFormats = 32;

// A view format's per-view table (fs/views/tar_layout.h's member offsets).
struct ViewLayout {
  virtual ~ViewLayout() = default;
};

class EpochView : public std::enable_shared_from_this<EpochView> {
 public:
  // O(1): the order comes from the planner's epoch cache; a resumed epoch's
  // remainder is O(N) once per context and epoch (shared by its views).
  // EINVAL when the key's consumed counts do not fit the epoch.
  static Result<std::shared_ptr<const EpochView>> build(const Dataset& ds, ViewKey key);

  const ViewKey& key() const { return key_; }
  const Dataset& dataset() const { return ds_; }
  uint64_t count() const { return count_; }  // samples in this view
  // Position k's place in the epoch order (through the remainder when resumed).
  uint64_t position(uint64_t k) const {
    if (resume_)
      return resume_->positions[resume_position(resume_->size(), key_.world_size, key_.rank, k)];
    return plan::global_position(plan_, key_.rank, k);
  }
  uint64_t sample_at(uint64_t k) const { return order_->order[position(k)]; }
  uint64_t sample_length(uint64_t k) const;
  std::string member_name(uint64_t k) const;  // the sample's path inside views
  uint32_t rounds() const { return static_cast<uint32_t>(order_->rounds.size()); }
  uint64_t seed() const { return seed_; }  // of this view's order
  const ViewContext* context() const { return key_.context.get(); }

  // Appends bytes [from, from + n) of position k's sample; `ring` is the
  // open stream's read-ahead (may be null).
  Status read_sample(uint64_t k, uint64_t from, uint64_t n, cache::Gather& out, cache::ReadRing* ring) const;
  // Whether position k's bytes are in memory right now (no ring needed).
  bool in_memory(uint64_t k) const;

  // Plan description as extended attributes ("" if `name` is not one of ours).
  std::string xattr(const std::string& name) const;
  static const std::vector<std::string>& xattr_names();

  // The layout of format slot `slot`, built by `build` on first use.
  template <typename L, typename Build>
  std::shared_ptr<const L> layout(size_t slot, Build&& build) const {
    auto& l = layouts_.at(slot);
    std::call_once(l.once, [&] { l.value = build(*this); });
    return std::static_pointer_cast<const L>(l.value);
  }

 private:
  EpochView(const Dataset& ds, ViewKey key) : ds_(ds), key_(key) {}
  // Round buffers hold the configured seed's rounds: another seed's view
  // reads its samples past them (resident extents, its ring, the backend).
  cache::SampleContext sample_context(uint64_t k, cache::ReadRing* ring) const {
    return {round_order_, position(k), ring, k};
  }
  struct LayoutSlot {
    std::once_flag once;
    std::shared_ptr<const ViewLayout> value;
  };

  const Dataset& ds_;
  ViewKey key_;
  plan::PlanKey plan_;
  uint64_t count_ = 0;
  std::shared_ptr<const plan::EpochOrder> order_;
  const std::shared_ptr<const plan::EpochOrder>* round_order_ = nullptr;  // &order_ for the configured seed
  uint64_t seed_ = 0;
  std::shared_ptr<const ResumeOrder> resume_;  // the remainder of a resumed epoch, else null
  mutable std::array<LayoutSlot, kMaxViewFormats> layouts_;  // by view format (fs/views/view_formats.cc)
};

}  // namespace dlfs::fs
