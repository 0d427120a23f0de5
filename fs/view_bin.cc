// The .bin view: rank r's samples in the epoch's order as back-to-back
// fixed-size records, for datasets whose samples all have one size (fixed
// records, or LMDB values of one size): record k is at k * size.
#include "fs/dataset.h"
#include "fs/view_format.h"
#include "fs/view_stream.h"

namespace dlfs::fs {
namespace {

class BinFile final : public OpenFile {
 public:
  BinFile(std::shared_ptr<const EpochView> view, std::shared_ptr<cache::ReadRing> ring)
      : view_(std::move(view)), ring_(std::move(ring)), record_(view_->dataset().manifest().fixed_record_size()) {}

  Status read(uint64_t offset, uint64_t size, cache::Gather& out) override {
    const uint64_t end = std::min(view_->count() * record_, offset + size);
    if (offset < end) advance_ring(*view_, ring_.get(), offset / record_);
    for (uint64_t pos = offset; pos < end;) {
      const uint64_t k = pos / record_, in = pos % record_;
      const uint64_t n = std::min(end - pos, record_ - in);
      DLFS_RETURN_IF_ERROR(view_->read_sample(k, in, n, out, ring_.get()));
      pos += n;
    }
    return Status::ok();
  }
  const Dataset* dataset() const override { return &view_->dataset(); }

 private:
  std::shared_ptr<const EpochView> view_;
  std::shared_ptr<cache::ReadRing> ring_;
  const uint64_t record_;
};

class BinView final : public ViewFormat {
 public:
  std::string_view extension() const override { return ".bin"; }
  bool applies_to(const Dataset& ds) const override { return ds.manifest().fixed_record_size() > 0; }
  uint64_t size(const EpochView& view) const override {
    return view.count() * view.dataset().manifest().fixed_record_size();
  }
  Result<OpenResult> open(const std::shared_ptr<const EpochView>& view) const override {
    OpenResult r;
    r.keep_cache = true;  // a view's bytes are a pure function of its name: cacheable
    r.file = std::make_unique<BinFile>(view, make_read_ring(view));
    return r;
  }
};

}  // namespace

const ViewFormat& bin_view() {
  static const BinView format;
  return format;
}

}  // namespace dlfs::fs
