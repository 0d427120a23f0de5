// The .tfrecord.idx view (tfrecord datasets only): the DALI index of the
// rank's .tfrecord view, as DALI's tfrecord2idx writes it for a file: one
// "<offset> <size>\n" line per record, size including the 16 framing bytes.
// fn.readers.tfrecord needs an index per file; this one is computed from the
// samples' lengths, so nobody has to read the whole view to make it.
#include "fs/dataset/dataset.h"
#include "fs/views/view_format.h"
#include "provenance/tfrecord.h"

namespace dlfs::fs {
namespace {

struct TfrecordIdxText final : ViewLayout {
  std::string text;
  static std::shared_ptr<const TfrecordIdxText> of(const EpochView& view) {
    static const size_t slot = *view_format_index(".tfrecord.idx");
    return view.layout<TfrecordIdxText>(slot, [](const EpochView& v) {
      auto l = std::make_shared<TfrecordIdxText>();
      l->text.reserve(v.count() * 16);
      uint64_t offset = 0;
      for (uint64_t k = 0; k < v.count(); ++k) {
        const uint64_t size = provenance::tfrecord::kFramingBytes + v.sample_length(k);
        l->text += std::to_string(offset);
        l->text += ' ';
        l->text += std::to_string(size);
        l->text += '\n';
        offset += size;
      }
      return l;
    });
  }
};

class TfrecordIdxView final : public ViewFormat {
 public:
  std::string_view extension() const override { return ".tfrecord.idx"; }
  bool applies_to(const Dataset& ds) const override { return ds.manifest().options().format == "tfrecord"; }
  uint64_t size(const EpochView& view) const override { return TfrecordIdxText::of(view)->text.size(); }
  bool size_costs_work() const override { return true; }  // O(samples): not for every listing
  bool reads_ahead() const override { return false; }
  Status read(const ViewStream& s, uint64_t offset, uint64_t size, cache::Gather& out) const override {
    const auto idx = TfrecordIdxText::of(*s.view);
    const std::string& t = idx->text;
    if (offset >= t.size()) return Status::ok();
    // Copied: the text lives with the view, which may leave the registry's cache before the reply.
    out.add_copy(t.data() + offset, std::min<uint64_t>(size, t.size() - offset));
    return Status::ok();
  }
};

}  // namespace

const ViewFormat& tfrecord_idx_view() {
  static const TfrecordIdxView format;
  return format;
}

}  // namespace dlfs::fs
