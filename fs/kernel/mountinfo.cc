#include "fs/kernel/mountinfo.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace dlfs::fs {
namespace {

// The kernel writes space, tab, newline and backslash in paths as \ooo
// (three octal digits); anything else is literal.
std::string unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned value = 0;
    if (s[i] == '\\' && i + 4 <= s.size() &&
        std::from_chars(s.data() + i + 1, s.data() + i + 4, value, 8).ptr == s.data() + i + 4 && value < 256) {
      out += static_cast<char>(value);
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<std::string_view> split_spaces(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t at = 0;
  while (at < line.size()) {
    size_t end = line.find(' ', at);
    if (end == std::string_view::npos) end = line.size();
    if (end > at) fields.push_back(line.substr(at, end - at));
    at = end + 1;
  }
  return fields;
}

bool to_int(std::string_view s, int& out) {
  return !s.empty() && std::from_chars(s.data(), s.data() + s.size(), out).ptr == s.data() + s.size();
}

// "36 35 98:0 /root /mnt rw,noatime shared:1 - ext4 /dev/sda1 rw": six fixed
// fields, optional fields up to "-", then type, source, super options.
std::optional<MountEntry> parse_line(std::string_view line) {
  const auto f = split_spaces(line);
  if (f.size() < 9) return std::nullopt;
  MountEntry m;
  if (!to_int(f[0], m.id) || !to_int(f[1], m.parent)) return std::nullopt;
  size_t sep = 6;
  while (sep < f.size() && f[sep] != "-") ++sep;
  if (sep + 2 >= f.size()) return std::nullopt;
  const size_t colon = f[2].find(':');
  if (colon != std::string_view::npos) {
    int major_number = 0, minor_number = 0;
    if (to_int(f[2].substr(0, colon), major_number) && to_int(f[2].substr(colon + 1), minor_number) &&
        major_number >= 0 && minor_number >= 0) {
      m.dev_major = static_cast<unsigned>(major_number);
      m.dev_minor = static_cast<unsigned>(minor_number);
    }
  }
  m.mount_point = unescape(f[4]);
  m.fstype = unescape(f[sep + 1]);
  m.source = unescape(f[sep + 2]);
  return m;
}

}  // namespace

std::vector<MountEntry> parse_mountinfo(std::string_view text) {
  std::vector<MountEntry> table;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    if (auto m = parse_line(text.substr(at, end - at))) table.push_back(std::move(*m));
    at = end + 1;
  }
  return table;
}

std::optional<MountEntry> topmost_mount_at(const std::vector<MountEntry>& table, const std::string& path) {
  std::vector<const MountEntry*> here;
  for (const auto& m : table)
    if (m.mount_point == path) here.push_back(&m);
  // Mounted on top of another at the same path = its parent is that one.
  for (const MountEntry* candidate : here) {
    bool covered = false;
    for (const MountEntry* other : here) covered = covered || other->parent == candidate->id;
    if (!covered) return *candidate;
  }
  if (!here.empty()) return *here.back();  // a cycle cannot happen; be defined anyway
  return std::nullopt;
}

bool is_dlfs_mount(const MountEntry& m) {
  return m.source == kMountName && (m.fstype == "fuse." + std::string(kMountName) || m.fstype == "fuse");
}

Result<std::vector<MountEntry>> read_mountinfo() {
  std::ifstream in("/proc/self/mountinfo");
  if (!in) return Status::from_errno(errno, "/proc/self/mountinfo");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_mountinfo(text.str());
}

}  // namespace dlfs::fs
