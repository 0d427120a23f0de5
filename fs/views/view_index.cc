// The .index view: what rank r's stream holds, as text: a header line with
// the plan, then one line per position: k, sample id, offset of its data in
// the .tar view, length, member name. A pure function of the view, built on
// first use and kept with it (a layout slot), like the tar member offsets.
#include "fs/dataset/dataset.h"
#include "fs/views/view_format.h"
#include "fs/views/tar_layout.h"

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
  const provenance::Manifest& m = ds.manifest();
  const std::string group_by = m.samples_grouped() ? " group_by=" + std::string(name_of(m.options().group_by)) : "";
  // A resumed epoch: whose counts it is the rest of (docs/views.md).
  const ViewContext* c = v.context();
  const std::string resumed = c && c->resumed() ? " resume_world_size=" + std::to_string(c->resume_world()) +
                                                      " consumed=" + consumed_name(c->consumed())
                                                : "";
  std::string t = "# dlfs view dataset=" + ds.name() + " epoch=" + std::to_string(key.epoch) +
                  " world_size=" + std::to_string(key.world_size) + " rank=" + std::to_string(key.rank) +
                  " samples=" + std::to_string(v.count()) + " seed=" + std::to_string(v.seed()) +
                  " remainder=" + p.remainder_name() + " order=" + p.order_name() + " rounds=" +
                  std::to_string(v.rounds()) + " shuffle_ratio=" + v.xattr("user.dlfs.shuffle_ratio") +
                  " rl=" + v.xattr("user.dlfs.rl") + resumed + group_by + "\n";
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

struct IndexText final : ViewLayout {
  std::string text;
  static std::shared_ptr<const IndexText> of(const EpochView& view) {
    static const size_t slot = *view_format_index(".index");
    return view.layout<IndexText>(slot, [](const EpochView& v) {
      auto l = std::make_shared<IndexText>();
      l->text = index_text(v);
      return l;
    });
  }
};

class IndexView final : public ViewFormat {
 public:
  std::string_view extension() const override { return ".index"; }
  uint64_t size(const EpochView& view) const override { return IndexText::of(view)->text.size(); }
  bool size_costs_work() const override { return true; }  // O(samples): not for every listing
  bool reads_ahead() const override { return false; }
  Status read(const ViewStream& s, uint64_t offset, uint64_t size, cache::Gather& out) const override {
    const auto index = IndexText::of(*s.view);
    const std::string& t = index->text;
    if (offset >= t.size()) return Status::ok();
    // Copied: the text lives with the view, which another thread may evict
    // from the registry's cache before the reply is sent.
    out.add_copy(t.data() + offset, std::min<uint64_t>(size, t.size() - offset));
    return Status::ok();
  }
};

}  // namespace

const ViewFormat& index_view() {
  static const IndexView format;
  return format;
}

}  // namespace dlfs::fs
