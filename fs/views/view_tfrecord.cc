// The .tfrecord view (tfrecord datasets only): rank r's samples in the
// epoch's order, each framed as a TFRecord record, so the view is itself a
// valid TFRecord file (tf.data.TFRecordDataset reads it unchanged). The
// 12-byte header is generated from the length; the data comes through the
// read path (whose check verifies the data's CRC before any byte is served);
// the 4-byte footer is that verified CRC.
#include <algorithm>

#include "fs/dataset/dataset.h"
#include "fs/views/view_format.h"
#include "fs/views/view_stream.h"
#include "provenance/tfrecord.h"

namespace dlfs::fs {
namespace {

namespace tf = provenance::tfrecord;

// Where each record of the view starts: record k is [begin[k], begin[k+1]).
struct TfrecordLayout final : ViewLayout {
  std::vector<uint64_t> begin;
  static std::shared_ptr<const TfrecordLayout> of(const EpochView& view);
};

std::shared_ptr<const TfrecordLayout> TfrecordLayout::of(const EpochView& view) {
  static const size_t slot = *view_format_index(".tfrecord");
  return view.layout<TfrecordLayout>(slot, [](const EpochView& v) {
    auto l = std::make_shared<TfrecordLayout>();
    l->begin.resize(v.count() + 1);
    for (uint64_t k = 0; k < v.count(); ++k) l->begin[k + 1] = l->begin[k] + tf::kFramingBytes + v.sample_length(k);
    return l;
  });
}

// Appends the bytes of [pos, end) that fall in record k (starting at
// `record_begin`) and advances pos.
Status read_record(const EpochView& view, uint64_t k, uint64_t record_begin, uint64_t& pos, uint64_t end,
                   cache::Gather& out, cache::ReadRing* ring) {
  const uint64_t len = view.sample_length(k);
  const uint64_t data_begin = record_begin + tf::kHeaderBytes, data_end = data_begin + len;
  const uint64_t record_end = data_end + tf::kFooterBytes;
  if (pos < data_begin) {
    const auto header = tf::make_header(len);
    const uint64_t n = std::min(end, data_begin) - pos;
    out.add_copy(header.data() + (pos - record_begin), n);
    pos += n;
  }
  if (pos < end && pos < data_end) {
    const uint64_t n = std::min(end, data_end) - pos;
    DLFS_RETURN_IF_ERROR(view.read_sample(k, pos - data_begin, n, out, ring));
    pos += n;
  }
  if (pos < end && pos < record_end) {
    DLFS_ASSIGN_OR_RETURN(const uint32_t crc, view.dataset().manifest().sample_masked_crc(view.sample_at(k)));
    const auto footer = tf::make_footer(crc);
    const uint64_t n = std::min(end, record_end) - pos;
    out.add_copy(footer.data() + (pos - data_end), n);
    pos += n;
  }
  return Status::ok();
}

class TfrecordView final : public ViewFormat {
 public:
  std::string_view extension() const override { return ".tfrecord"; }
  bool applies_to(const Dataset& ds) const override { return ds.manifest().options().format == "tfrecord"; }
  uint64_t size(const EpochView& view) const override { return TfrecordLayout::of(view)->begin.back(); }
  // A TFRecord stream in the planned order: identical bytes for every reader.
  Status read(const ViewStream& s, uint64_t offset, uint64_t size, cache::Gather& out) const override {
    const EpochView& v = *s.view;
    const auto layout = TfrecordLayout::of(v);
    const auto& begin = layout->begin;
    const uint64_t count = v.count(), end = std::min(begin.back(), offset + size);
    if (offset >= end) return Status::ok();
    // The record holding `offset`: O(log n), so a seek anywhere is cheap.
    uint64_t k = static_cast<uint64_t>(std::upper_bound(begin.begin(), begin.end(), offset) - begin.begin()) - 1;
    advance_ring(v, s.ring.get(), k);
    for (uint64_t pos = offset; pos < end && k < count; ++k)
      DLFS_RETURN_IF_ERROR(read_record(v, k, begin[k], pos, end, out, s.ring.get()));
    return Status::ok();
  }
};

}  // namespace

const ViewFormat& tfrecord_view() {
  static const TfrecordView format;
  return format;
}

}  // namespace dlfs::fs
