// The .index view: what rank r's stream holds, as text generated at open
// (direct I/O): a header line with the plan, then one line per position:
// k, sample id, offset of its data in the .tar view, length, member name.
#include "fs/dataset.h"
#include "fs/view_format.h"
#include "fs/view_tar.h"

namespace dlfs::fs {
namespace {

// A name is the last field of a tab-separated line: a backend file name may
// hold any byte but '/' and NUL, so tab, newline, carriage return and the
// backslash itself are written as \t, \n, \r and \\ (docs/views.md).
void append_escaped(std::string& out, const std::string& name) {
  for (char c : name) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      default: out += c;
    }
  }
}

std::string index_text(const EpochView& v) {
  const Dataset& ds = v.dataset();
  const plan::Planner& p = ds.planner();
  const ViewKey& key = v.key();
  std::string t = "# dlfs view dataset=" + ds.name() + " epoch=" + std::to_string(key.epoch) +
                  " world_size=" + std::to_string(key.world_size) + " rank=" + std::to_string(key.rank) +
                  " samples=" + std::to_string(v.count()) + " seed=" + std::to_string(p.seed()) +
                  " remainder=" + p.remainder_name() + " order=" + p.order_name() + " rounds=" +
                  std::to_string(v.rounds()) + " shuffle_ratio=" + v.xattr("user.dlfs.shuffle_ratio") +
                  " rl=" + v.xattr("user.dlfs.rl") +
                  (ds.manifest().samples_grouped() ? " group_by=" + ds.manifest().options().group_by : "") + "\n";
  const auto tar = TarLayout::of(v);
  t.reserve(t.size() + v.count() * 48);
  for (uint64_t k = 0; k < v.count(); ++k) {
    t += std::to_string(k);
    t += '\t';
    t += std::to_string(v.sample_at(k));
    t += '\t';
    const TarLayout::Span span = tar->index_span(v, k);
    t += std::to_string(span.offset);
    t += '\t';
    t += std::to_string(span.length);
    t += '\t';
    append_escaped(t, v.member_name(k));
    t += '\n';
  }
  return t;
}

class IndexView final : public ViewFormat {
 public:
  std::string_view extension() const override { return ".index"; }
  Result<OpenResult> open(const std::shared_ptr<const EpochView>& view) const override {
    OpenResult r;
    r.direct_io = true;
    r.file = std::make_unique<SnapshotFile>(index_text(*view));  // not counted as view traffic, as before
    return r;
  }
};

}  // namespace

const ViewFormat& index_view() {
  static const IndexView format;
  return format;
}

}  // namespace dlfs::fs
