// The text of enums that config keys hold and stats print: an enum names its
// values once, next to its declaration, with a function that
// argument-dependent lookup finds,
//
//   enum class Toggle { automatic, on, off };
//   constexpr std::array<std::string_view, 3> enum_names(Toggle) { return {"auto", "on", "off"}; }
//
// in value order (the enum's values are 0, 1, ...). Config files, flags,
// --help and docs list the names in that order.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace dlfs {

template <typename E>
concept NamedEnum = std::is_enum_v<E> && requires(E e) { enum_names(e); };

// "?" for a value the enum does not name (a cast from a bad integer).
template <NamedEnum E>
constexpr std::string_view name_of(E value) {
  const auto names = enum_names(value);
  const auto i = static_cast<size_t>(value);
  return i < names.size() ? names[i] : "?";
}

template <NamedEnum E>
constexpr std::optional<E> enum_named(std::string_view text) {
  const auto names = enum_names(E{});
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == text) return static_cast<E>(i);
  return std::nullopt;
}

template <NamedEnum E>
std::vector<std::string> enum_name_list() {
  std::vector<std::string> out;
  for (std::string_view name : enum_names(E{})) out.emplace_back(name);
  return out;
}

}  // namespace dlfs
