#include "provenance/sample_groups.h"

#include <string>

namespace dlfs::provenance {

std::string_view group_key(std::string_view path, GroupRule rule) {
  const size_t slash = path.rfind('/');
  const size_t base = slash == std::string_view::npos ? 0 : slash + 1;
  size_t dot = std::string_view::npos;
  if (rule == GroupRule::first_dot) dot = path.find('.', base + 1);
  if (rule == GroupRule::last_dot) dot = path.rfind('.');
  // Skips a dot at the basename's first byte (hidden files): "." then leads the key.
  if (dot == std::string_view::npos || dot <= base) return path;
  return path.substr(0, dot);
}

std::vector<uint32_t> group_starts(const Manifest& tree, GroupRule rule) {
  std::vector<uint32_t> starts;
  std::string previous;
  bool first = true;
  for (uint32_t f = 0; f < tree.file_count(); ++f) {
    const std::string path = tree.file_path(f);
    const std::string_view key = group_key(path, rule);
    if (rule == GroupRule::none || first || key != previous) {
      starts.push_back(f);
      previous.assign(key);
      first = false;
    }
  }
  starts.push_back(tree.file_count());
  return starts;
}

}  // namespace dlfs::provenance
