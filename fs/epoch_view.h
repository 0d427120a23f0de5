// EpochView: rank r of W in epoch e, as a tar stream, a record stream, an
// index and a directory (docs/views.md). Immutable once built; open file
// handles share it, so reads take no lock to find their samples.
//
// Reads gather sample bytes straight from where they are resident (the
// storage buffer, or the pinned round buffer when the epoch runs in rounds)
// and generate tar headers and padding in the reply's arena; bytes that are
// not resident are read from the backend into the arena.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plan/epoch_plan.h"
#include "cache/read_ring.h"
#include "plan/round_plan.h"
#include "common/status.h"
#include "fs/reply_gather.h"

namespace dlfs::fs {

class Dataset;

// An order of a view's members other than the planned one (an opportunistic
// stream's): member j is planned position planned[j] and starts at begin[j]
// in the tar stream; begin has one more entry than planned (the end).
struct MemberOrder {
  std::vector<uint64_t> planned;
  std::vector<uint64_t> begin;
};

struct ViewKey {
  uint32_t epoch = 0;
  uint32_t world_size = 1;
  uint32_t rank = 0;
  bool operator==(const ViewKey&) const = default;
};

class EpochView : public std::enable_shared_from_this<EpochView> {
 public:
  // Builds the view's order and tar layout: O(samples in the view).
  static Result<std::shared_ptr<const EpochView>> build(const Dataset& ds, ViewKey key);

  const ViewKey& key() const { return key_; }
  const Dataset& dataset() const { return ds_; }
  uint64_t count() const { return count_; }                   // samples in this view
  uint64_t position(uint64_t k) const { return plan::global_position(plan_, key_.rank, k); }
  uint64_t sample_at(uint64_t k) const { return order_->order[position(k)]; }
  uint64_t tar_size() const { return member_begin_.back() + 1024; }
  uint64_t bin_size() const;                                  // fixed format only
  uint64_t tar_data_offset(uint64_t k) const;                 // where member k's bytes start
  std::string member_name(uint64_t k) const;                  // tar member name
  std::string entry_name(uint64_t k) const;                   // directory view entry name
  uint64_t sample_length(uint64_t k) const;

  // Each reads up to `size` bytes at `offset` into `out` (short at the end).
  // `ring` is the open stream's read-ahead (may be null): samples that are
  // not resident come from it when it has them.
  // `served` (opportunistic streams) must cover every member the range touches.
  Status read_tar(uint64_t offset, uint64_t size, ReplyGather& out, cache::ReadRing* ring,
                  const MemberOrder* served = nullptr) const;
  uint64_t member_bytes(uint64_t k) const { return member_begin_[k + 1] - member_begin_[k]; }
  Status read_bin(uint64_t offset, uint64_t size, ReplyGather& out, cache::ReadRing* ring) const;
  Status read_entry(uint64_t k, uint64_t offset, uint64_t size, ReplyGather& out) const;
  // A read-ahead ring for one open stream of this view, registered with the
  // dataset's prefetcher.
  std::shared_ptr<cache::ReadRing> make_ring() const;
  // Whether position k's bytes are resident right now (no ring needed).
  bool resident(uint64_t k) const;
  std::string index_text() const;
  std::string xattr(const std::string& name) const;  // "" if not one of ours
  static const std::vector<std::string>& xattr_names();

 private:
  EpochView(const Dataset& ds, ViewKey key) : ds_(ds), key_(key) {}
  // Appends bytes [from, from + n) of position k's sample.
  Status add_sample(uint64_t k, uint64_t from, uint64_t n, ReplyGather& out, cache::ReadRing* ring = nullptr) const;
  // The bytes of one piece of sample k, from round memory, resident extents,
  // the read-ahead ring or the fetcher. `placed`: the round chunks and the
  // ring were filled from the current offsets (false after an LMDB repair).
  Status add_sample_bytes(uint64_t k, uint64_t from, uint64_t n, ReplyGather& out, cache::ReadRing* ring,
                          bool placed) const;
  // LMDB overflow values: the 16-byte page header before the value must be
  // its own (EBADMSG otherwise). Read from round memory when pinned there.
  Status check_lmdb_header(uint64_t k, bool placed, ReplyGather& out) const;

  const Dataset& ds_;
  ViewKey key_;
  plan::PlanKey plan_;
  uint64_t count_ = 0;
  std::shared_ptr<const plan::EpochOrder> order_;
  std::vector<uint64_t> member_begin_;  // tar offset of each member's first header byte, plus the end
};

}  // namespace dlfs::fs
