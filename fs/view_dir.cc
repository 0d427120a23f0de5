// The directory view <r>/: one file per position of rank r's stream, named
// "<k>-<member name>" with k zero-padded to the width of the last position
// (so `ls` and glob order is the epoch's order) and '/' and '%' escaped as
// %2F and %25 (the name is one path component). Each entry reads its sample.
#include <charconv>
#include <cstdio>

#include "fs/dataset.h"
#include "fs/view_format.h"

namespace dlfs::fs {
namespace {

std::string escape_entry(const std::string& name) {
  std::string out;
  out.reserve(name.size() + 8);
  for (char c : name) {
    if (c == '%') out += "%25";
    else if (c == '/') out += "%2F";
    else out += c;
  }
  return out;
}

class EntryFile final : public OpenFile {
 public:
  EntryFile(std::shared_ptr<const EpochView> view, uint64_t k) : view_(std::move(view)), k_(k) {}
  Status read(uint64_t offset, uint64_t size, cache::Gather& out) override {
    const uint64_t len = view_->sample_length(k_);
    if (offset >= len) return Status::ok();
    return view_->read_sample(k_, offset, std::min(size, len - offset), out, nullptr);
  }
  const Dataset* dataset() const override { return &view_->dataset(); }

 private:
  std::shared_ptr<const EpochView> view_;
  const uint64_t k_;
};

class DirView final : public ViewFormat {
 public:
  std::string_view extension() const override { return ""; }
  bool is_directory() const override { return true; }

  std::string entry_name(const EpochView& v, uint64_t k) const override {
    const int width = static_cast<int>(std::to_string(v.count() > 0 ? v.count() - 1 : 0).size());
    char pos[32];
    std::snprintf(pos, sizeof pos, "%0*llu-", width, static_cast<unsigned long long>(k));
    return pos + escape_entry(v.member_name(k));
  }
  std::optional<uint64_t> find_entry(const EpochView& v, std::string_view name) const override {
    auto dash = name.find('-');
    if (dash == std::string_view::npos) return std::nullopt;
    uint64_t k = 0;
    auto [ptr, ec] = std::from_chars(name.data(), name.data() + dash, k);
    if (ec != std::errc() || ptr != name.data() + dash || k >= v.count()) return std::nullopt;
    if (entry_name(v, k) != name) return std::nullopt;
    return k;
  }
  uint64_t entry_size(const EpochView& v, uint64_t k) const override { return v.sample_length(k); }
  Result<OpenResult> open_entry(const std::shared_ptr<const EpochView>& view, uint64_t k) const override {
    if (k >= view->count()) return Status(ENOENT, "no such entry");
    OpenResult r;
    r.keep_cache = true;
    r.file = std::make_unique<EntryFile>(view, k);
    return r;
  }
};

}  // namespace

const ViewFormat& dir_view() {
  static const DirView format;
  return format;
}

}  // namespace dlfs::fs
