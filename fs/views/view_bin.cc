// The .bin view: rank r's samples in the epoch's order as back-to-back
// fixed-size records, for datasets whose samples all have one size (fixed
// records, or LMDB values of one size): record k is at k * size.
#include "fs/dataset/dataset.h"
#include "fs/views/view_format.h"
#include "fs/views/view_stream.h"

namespace dlfs::fs {
namespace {

class BinView final : public ViewFormat {
 public:
  std::string_view extension() const override { return ".bin"; }
  bool applies_to(const Dataset& ds) const override { return ds.manifest().fixed_record_size() > 0; }
  uint64_t size(const EpochView& view) const override {
    return view.count() * view.dataset().manifest().fixed_record_size();
  }
  Status read(const ViewStream& s, uint64_t offset, uint64_t size, cache::Gather& out) const override {
    const EpochView& v = *s.view;
    const uint64_t record = v.dataset().manifest().fixed_record_size();
    const uint64_t end = std::min(v.count() * record, offset + size);
    if (offset < end) advance_ring(v, s.ring.get(), offset / record);
    for (uint64_t pos = offset; pos < end;) {
      const uint64_t k = pos / record, in = pos % record;
      const uint64_t n = std::min(end - pos, record - in);
      DLFS_RETURN_IF_ERROR(v.read_sample(k, in, n, out, s.ring.get()));
      pos += n;
    }
    return Status::ok();
  }
};

}  // namespace

const ViewFormat& bin_view() {
  static const BinView format;
  return format;
}

}  // namespace dlfs::fs
