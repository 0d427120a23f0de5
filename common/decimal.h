// Canonical decimals in path names: digits only, no sign, no leading zero
// (so that one number has one name), nothing after them.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dlfs {

inline std::optional<uint64_t> parse_canonical_decimal(std::string_view s) {
  if (s.empty() || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace dlfs
