// The directory view <r>/: one file per position of rank r's stream, named
// "<k>-<member name>" with k zero-padded to the width of the last position
// (so `ls` and glob order is the epoch's order) and '/' and '%' escaped as
// %2F and %25 (the name is one path component), cut to NAME_MAX bytes. Each
// entry reads its sample.
#include <limits.h>

#include <charconv>
#include <cstdio>

#include "fs/dataset/dataset.h"
#include "fs/views/view_format.h"

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

// A member's relative path can be far longer than one name may be (NAME_MAX,
// which statfs reports and lookups enforce; FUSE itself stops at 1 KiB): a
// longer entry would be listed but could not be opened, nor copied to any
// other file system. The cut keeps the position, which alone makes the name
// unique, and ends on a UTF-8 character boundary.
std::string within_name_max(std::string name) {
  if (name.size() <= NAME_MAX) return name;
  size_t cut = NAME_MAX;
  while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
  name.resize(cut);
  return name;
}

class DirView final : public ViewFormat {
 public:
  std::string_view extension() const override { return ""; }
  bool is_directory() const override { return true; }
  bool reads_ahead() const override { return false; }  // entries are opened in any order
  // An entry is one sample's bytes; a sample group has several files, each
  // with its own name: the .tar view shows them, this one does not exist.
  bool applies_to(const Dataset& ds) const override { return !ds.manifest().samples_grouped(); }

  std::string entry_name(const EpochView& v, uint64_t k) const override {
    const int width = static_cast<int>(std::to_string(v.count() > 0 ? v.count() - 1 : 0).size());
    char pos[32];
    std::snprintf(pos, sizeof pos, "%0*llu-", width, static_cast<unsigned long long>(k));
    return within_name_max(pos + escape_entry(v.member_name(k)));
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
  // An entry is one sample's bytes, read without the view's ring (entries
  // are opened in any order).
  Status read_entry(const ViewStream& s, uint64_t k, uint64_t offset, uint64_t size,
                    cache::Gather& out) const override {
    if (k >= s.view->count()) return Status(ENOENT, "no such entry");
    const uint64_t len = s.view->sample_length(k);
    if (offset >= len) return Status::ok();
    return s.view->read_sample(k, offset, std::min(size, len - offset), out, nullptr);
  }
};

}  // namespace

const ViewFormat& dir_view() {
  static const DirView format;
  return format;
}

}  // namespace dlfs::fs
