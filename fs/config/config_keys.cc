#include "fs/config/config_keys.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <type_traits>

#include <spdlog/fmt/fmt.h>

#include "common/units.h"
#include "provenance/dataset_format.h"

namespace dlfs::fs {
namespace {

// A member's value as a Value: an enum by its name; 32-bit integers (which no
// size is) as int64_t, as integers read from TOML are.
template <typename M>
Value to_value(const M& member) {
  if constexpr (std::is_enum_v<M>) return std::string(name_of(member));
  else if constexpr (std::is_same_v<M, uint32_t>) return int64_t{member};
  else return member;
}

// A checked Value into a member: an enum from its name, integers of any
// width; false when the types do not match.
template <typename M>
bool from_value(M& member, const Value& value) {
  if constexpr (std::is_enum_v<M>) {
    const auto* name = std::get_if<std::string>(&value);
    const std::optional<M> e = name ? enum_named<M>(*name) : std::nullopt;
    if (e) member = *e;
    return e.has_value();
  } else {
    return std::visit(
        [&member](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          constexpr bool integers = std::is_integral_v<M> && !std::is_same_v<M, bool> && std::is_integral_v<V> &&
                                    !std::is_same_v<V, bool>;
          if constexpr (std::is_same_v<M, V> || integers) {
            member = static_cast<M>(v);
            return true;
          } else {
            return false;
          }
        },
        value);
  }
}

// The kind a member's type implies; sizes and shares are integers and
// strings that say so (.bytes(), .share_or_size()).
template <typename M>
constexpr Kind kind_of() {
  if constexpr (std::is_same_v<M, bool>) return Kind::boolean;
  else if constexpr (std::is_enum_v<M>) return Kind::choice;
  else if constexpr (std::is_integral_v<M>) return Kind::integer;
  else if constexpr (std::is_floating_point_v<M>) return Kind::number;
  else if constexpr (std::is_same_v<M, std::vector<std::string>>) return Kind::list;
  else return Kind::text;
}

// A table row under construction: Key(...).range(1, 4096).note("...").
struct Key {
  ConfigKey k;
  // `At`: a lambda without captures from a Target to the member's address.
  template <typename At>
  Key(Section section, const char* name, const char* flag, std::string help, At) {
    using M = std::remove_pointer_t<decltype(At{}(Target{}))>;
    k.section = section;
    k.key = name;
    k.flag = flag;
    k.kind = kind_of<M>();
    k.read = [](const Target& t) { return to_value(*At{}(t)); };
    k.store = [](const Target& t, const Value& v) { return from_value(*At{}(t), v); };
    k.help = std::move(help);
    if constexpr (std::is_enum_v<M>) k.choices = enum_name_list<M>();
  }
  Key& range(int64_t min, int64_t max = std::numeric_limits<int64_t>::max()) {
    k.min = min;
    k.max = max;
    return *this;
  }
  Key& within(double lo, double hi) {
    k.lo = lo;
    k.hi = hi;
    return *this;
  }
  Key& bytes(uint64_t at_least = 0) {
    k.kind = Kind::size;
    k.min_bytes = at_least;
    return *this;
  }
  Key& share_or_size() {
    k.kind = Kind::share_or_size;
    return *this;
  }
  Key& choices(std::vector<std::string> choices) {
    k.kind = Kind::choice;
    k.choices = std::move(choices);
    return *this;
  }
  Key& note(std::string default_note) {
    k.default_note = std::move(default_note);
    return *this;
  }
  Key& required() {
    k.required = true;
    return *this;
  }
  Key& flag_sets(bool value, std::string flag_help) {
    k.flag_sets = value;
    k.flag_help = std::move(flag_help);
    return *this;
  }
  Key& clears(std::string other) {
    k.clears = std::move(other);
    return *this;
  }
  operator ConfigKey() const { return k; }  // NOLINT: the table lists Keys
};

// A row per entry of a key list; `in` leads from a Target to the list's struct.
#define DLFS_ROW(section, in, member, Type, default_value, flag, help, ...) \
  Key(Section::section, #member, flag, help, [](const Target& t) { return &t.in member; }) __VA_ARGS__,
#define DLFS_DAEMON_ROW(...) DLFS_ROW(daemon, daemon->, __VA_ARGS__)
#define DLFS_CACHE_ROW(...) DLFS_ROW(cache, daemon->, __VA_ARGS__)
#define DLFS_CLUSTER_ROW(...) DLFS_ROW(cluster, daemon->, __VA_ARGS__)
#define DLFS_DATASET_ROW(...) DLFS_ROW(dataset, dataset->, __VA_ARGS__)
#define DLFS_FORMAT_ROW(...) DLFS_ROW(dataset, dataset->format., __VA_ARGS__)
#define DLFS_PLAN_ROW(...) DLFS_ROW(dataset, dataset->plan., __VA_ARGS__)

// In documentation order: [daemon], [cache], [cluster], [[dataset]] (its
// own keys, then its format's, then its plan's).
std::vector<ConfigKey> make_table() {
  return {
      DLFS_DAEMON_KEYS(DLFS_DAEMON_ROW)
      DLFS_CACHE_KEYS(DLFS_CACHE_ROW)
      DLFS_CLUSTER_KEYS(DLFS_CLUSTER_ROW)
      DLFS_DATASET_KEYS(DLFS_DATASET_ROW)
      DLFS_FORMAT_KEYS(DLFS_FORMAT_ROW)
      DLFS_PLAN_KEYS(DLFS_PLAN_ROW)
  };
}

#undef DLFS_ROW
#undef DLFS_DAEMON_ROW
#undef DLFS_CACHE_ROW
#undef DLFS_CLUSTER_ROW
#undef DLFS_DATASET_ROW
#undef DLFS_FORMAT_ROW
#undef DLFS_PLAN_ROW

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// 8388608 -> "8MiB"; sizes that are not a whole number of KiB stay bytes.
std::string size_text(uint64_t bytes) {
  const char* units[] = {"GiB", "MiB", "KiB"};
  for (int i = 0; i < 3; ++i) {
    uint64_t unit = uint64_t{1} << (10 * (3 - i));
    if (bytes != 0 && bytes % unit == 0) return std::to_string(bytes / unit) + units[i];
  }
  return std::to_string(bytes);
}

Status must_be(const ConfigKey& k) { return Status(EINVAL, expectation(k)); }

}  // namespace

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> table = make_table();
  return table;
}

const ConfigKey* find_config_key(Section section, const std::string& name) {
  for (const auto& k : config_keys())
    if (k.section == section && k.key == name) return &k;
  return nullptr;
}

const char* section_name(Section section) {
  switch (section) {
    case Section::daemon: return "daemon";
    case Section::cache: return "cache";
    case Section::cluster: return "cluster";
    case Section::dataset: return "dataset";
  }
  return "?";
}

std::string expectation(const ConfigKey& k) {
  constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();
  switch (k.kind) {
    case Kind::text: return "must be a string";
    case Kind::choice: return "must be one of " + join(k.choices, ", ");
    case Kind::share_or_size: return "must be a size (\"16GiB\") or a share of memory (\"50%\")";
    case Kind::boolean: return "must be true or false";
    case Kind::integer:
      if (k.max != kNoMax) return fmt::format("must be an integer from {} to {}", k.min, k.max);
      if (k.min == 0) return "must be a non-negative integer";
      if (k.min == 1) return "must be a positive integer";
      return fmt::format("must be an integer >= {}", k.min);
    case Kind::number:
      if (std::isinf(k.hi)) return k.lo == 0 ? "must be a non-negative number" : fmt::format("must be >= {}", k.lo);
      return fmt::format("must be a number from {} to {}", k.lo, k.hi);
    case Kind::size:
      return std::string("must be a size (bytes, or a string such as \"8MiB\")") +
             (k.min_bytes > 1 ? " of at least " + size_text(k.min_bytes) : k.min_bytes == 1 ? " above 0" : "");
    case Kind::list: return "must be an array of strings";
  }
  return "must be valid";
}

std::string default_text(const ConfigKey& k) {
  if (!k.default_note.empty()) return k.default_note;
  DaemonConfig daemon;
  DatasetConfig dataset;
  return value_text(k, read_value(k, Target{&daemon, &dataset}));
}

std::string value_text(const ConfigKey& k, const Value& v) {
  if (k.kind == Kind::size && std::holds_alternative<uint64_t>(v)) return size_text(std::get<uint64_t>(v));
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) return x;
        else if constexpr (std::is_same_v<T, bool>) return x ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::vector<std::string>>) return join(x, ",");
        else return fmt::format("{}", x);
      },
      v);
}

std::string long_flag(const ConfigKey& k) {
  size_t at = k.flag.find("--");
  return at == std::string::npos ? "" : k.flag.substr(at);
}

std::string meaning(const ConfigKey& k) {
  if (k.section != Section::dataset) return k.help;
  const std::string owners = provenance::option_owners_text(k.key, false);
  return owners.empty() ? k.help : k.help + " (" + owners + " only)";
}

Result<Value> value_from_text(const ConfigKey& k, const std::string& text) {
  switch (k.kind) {
    case Kind::text:
    case Kind::choice:
    case Kind::share_or_size: return Value(text);
    case Kind::boolean:
      if (text == "true" || text == "false") return Value(text == "true");
      return must_be(k);
    case Kind::integer: {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return must_be(k);
      return Value(v);
    }
    case Kind::number: {
      char* end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !std::isfinite(v)) return must_be(k);
      return Value(v);
    }
    case Kind::size: {
      auto bytes = parse_size(text);
      if (!bytes) return bytes.status();
      return Value(*bytes);
    }
    case Kind::list: {
      std::vector<std::string> items;
      for (size_t b = 0; b <= text.size();) {
        size_t e = text.find(',', b);
        if (e == std::string::npos) e = text.size();
        if (e > b) items.push_back(text.substr(b, e - b));
        b = e + 1;
      }
      return Value(std::move(items));
    }
  }
  return must_be(k);
}

Status check_value(const ConfigKey& k, const Value& v) {
  switch (k.kind) {
    case Kind::choice: {
      const auto* s = std::get_if<std::string>(&v);
      if (!s) return must_be(k);
      for (const auto& c : k.choices)
        if (c == *s) return Status::ok();
      return Status(EINVAL, expectation(k) + " (not '" + *s + "')");
    }
    case Kind::integer: {
      const auto* i = std::get_if<int64_t>(&v);
      if (!i || *i < k.min || *i > k.max) return must_be(k);
      return Status::ok();
    }
    case Kind::number: {
      const auto* d = std::get_if<double>(&v);
      if (!d || !(*d >= k.lo && *d <= k.hi)) return must_be(k);
      return Status::ok();
    }
    case Kind::size: {
      const auto* b = std::get_if<uint64_t>(&v);
      if (!b || *b < k.min_bytes) return must_be(k);
      return Status::ok();
    }
    default: return Status::ok();
  }
}

Status store_value(const ConfigKey& k, const Value& v, const Target& target) {
  if (k.store(target, v)) return Status::ok();
  return Status(EINVAL, "internal: config key '" + k.key + "' does not match its member's type");
}

Value read_value(const ConfigKey& k, const Target& target) {
  Value v = k.read(target);
  if (const auto* u = std::get_if<uint64_t>(&v); u && k.kind == Kind::integer) return static_cast<int64_t>(*u);
  return v;
}

void reset_value(const ConfigKey& k, const Target& target) {
  DaemonConfig daemon;
  DatasetConfig dataset;
  k.store(target, k.read(Target{&daemon, &dataset}));
}

Status in_context(const Status& s, const std::string& context) {
  if (s.is_ok()) return s;
  if (s.message().rfind("must ", 0) == 0) return Status(s.err(), context + " " + s.message());
  return s.with_context(context);
}

std::string type_text(const ConfigKey& k, std::string_view quote) {
  const auto literal = [quote](const std::string& text) { return std::string(quote) + text + std::string(quote); };
  switch (k.kind) {
    case Kind::text: return "string";
    case Kind::choice: {
      std::string out = "one of";
      for (size_t i = 0; i < k.choices.size(); ++i) out += (i ? ", " : " ") + literal(k.choices[i]);
      return out;
    }
    case Kind::share_or_size: return "size or share (" + literal("50%") + ")";
    case Kind::boolean: return "bool";
    case Kind::integer:
      if (k.max == std::numeric_limits<int64_t>::max()) return fmt::format("integer >= {}", k.min);
      return fmt::format("integer {}..{}", k.min, k.max);
    case Kind::number:
      if (std::isinf(k.hi)) return fmt::format("number >= {}", k.lo);
      return fmt::format("number {}..{}", k.lo, k.hi);
    case Kind::size:
      if (k.min_bytes > 1) return "size >= " + size_text(k.min_bytes);
      return k.min_bytes == 1 ? "size > 0" : "size";
    case Kind::list: return "list of strings";
  }
  return "?";
}

namespace {

// Text for a Markdown table cell: '|' and '<' would end the cell or start HTML.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|' || c == '<') out += '\\';
    out += c;
  }
  return out;
}

std::string flag_cell(const ConfigKey& k) {
  std::string out;
  for (size_t b = 0; b < k.flag.size();) {
    size_t e = k.flag.find(',', b);
    if (e == std::string::npos) e = k.flag.size();
    out += (out.empty() ? "`" : ", `") + k.flag.substr(b, e - b) + "`";
    b = e + 1;
  }
  if (!out.empty() && k.kind == Kind::boolean) out += k.flag_sets ? " (sets true)" : " (sets false)";
  return out;
}

std::string default_cell(const ConfigKey& k) {
  if (k.required) return k.default_note.empty() ? "required" : "required (flags: " + cell(k.default_note) + ")";
  if (!k.default_note.empty()) return cell(k.default_note);
  std::string value = default_text(k);
  return value.empty() ? "" : "`" + value + "`";
}

}  // namespace

std::string config_keys_markdown() {
  std::string out =
      "| Section | Key | Flag | Type | Default | Meaning |\n"
      "|---|---|---|---|---|---|\n";
  for (const auto& k : config_keys()) {
    std::string section = k.section == Section::dataset ? "[[dataset]]" : std::string("[") + section_name(k.section) + "]";
    out += "| `" + section + "` | `" + k.key + "` | " + flag_cell(k) + " | " + type_text(k, "`") + " | " +
           default_cell(k) + " | " + cell(meaning(k)) + " |\n";
  }
  return out;
}

}  // namespace dlfs::fs
