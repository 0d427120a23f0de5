// The .tar view format (fs/views/view_format.h): the planned order reads
// through the view's TarLayout; in opportunistic order each lookup makes a
// stream of its own (fs/views/opportunistic_stream.h).
#include "fs/dataset/dataset.h"
#include "fs/views/opportunistic_stream.h"
#include "fs/views/tar_layout.h"
#include "fs/views/view_format.h"
#include "fs/views/view_stream.h"

namespace dlfs::fs {
namespace {

class TarView final : public ViewFormat {
 public:
  std::string_view extension() const override { return ".tar"; }
  uint64_t size(const EpochView& view) const override { return TarLayout::of(view)->size(); }
  // A tar stream in the planned order: identical bytes for every reader.
  Status read(const ViewStream& s, uint64_t offset, uint64_t size, cache::Gather& out) const override {
    return TarLayout::of(*s.view)->read(*s.view, offset, size, out, s.ring.get());
  }
  // Opportunistic order: each lookup may order the stream differently.
  bool per_lookup(const Dataset& ds) const override { return ds.planner().opportunistic(); }
  Result<std::unique_ptr<OpenFile>> open(const std::shared_ptr<const EpochView>& view) const override {
    return std::unique_ptr<OpenFile>(std::make_unique<OpportunisticStream>(
        view, make_read_ring(view), view->dataset().planner().config().opportunistic_window));
  }
};

}  // namespace

const ViewFormat& tar_view() {
  static const TarView format;
  return format;
}

}  // namespace dlfs::fs
