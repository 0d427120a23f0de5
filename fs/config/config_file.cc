#include "fs/config/config_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include <spdlog/fmt/fmt.h>
#include <toml++/toml.h>

#include "common/units.h"
#include "common/user_db.h"
#include "fs/config/config_keys.h"
#include "provenance/dataset_format.h"

namespace dlfs::fs {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Refuses keys of `table` that are not in `allowed`.
Status check_keys(const toml::table& table, const std::string& where,
                  const std::vector<std::string>& allowed, const std::string& origin) {
  for (const auto& [key, node] : table) {
    std::string k(key.str());
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
      return Status(EINVAL, "config " + origin + ": unknown key '" + (where.empty() ? "" : where + ".") + k +
                                "' (valid keys" + (where.empty() ? "" : " in [" + where + "]") + ": " +
                                join(allowed) + ")");
  }
  return Status::ok();
}

std::string key_name(const std::string& section, const std::string& key) {
  return section.empty() ? key : section + "." + key;
}

// A TOML value as the key's Value (types as config_keys.h says; no implicit
// conversions: `fuse_threads = true` is an error); errors start with "must be"
// or name the text at fault.
Result<Value> value_from_toml(const ConfigKey& k, const toml::node& n) {
  const Status wrong(EINVAL, expectation(k));
  switch (k.kind) {
    case Kind::text:
    case Kind::choice:
      if (auto v = n.value<std::string>()) return Value(*v);
      return wrong;
    case Kind::share_or_size:
      if (auto i = n.value_exact<int64_t>()) return Value(std::to_string(*i));
      if (auto v = n.value<std::string>()) return Value(*v);
      return wrong;
    case Kind::boolean:
      if (auto v = n.value_exact<bool>()) return Value(*v);
      return wrong;
    case Kind::integer:
      if (auto v = n.value_exact<int64_t>()) return Value(*v);
      return wrong;
    case Kind::number:  // 1 and 1.0 alike
      if (auto v = n.value_exact<double>()) return Value(*v);
      if (auto i = n.value_exact<int64_t>()) return Value(static_cast<double>(*i));
      return wrong;
    case Kind::size: {
      if (auto i = n.value_exact<int64_t>()) {
        if (*i < 0) return wrong;
        return Value(static_cast<uint64_t>(*i));
      }
      auto s = n.value<std::string>();
      if (!s) return wrong;
      auto bytes = parse_size(*s);
      if (!bytes) return bytes.status();
      return Value(*bytes);
    }
    case Kind::list: {
      const toml::array* a = n.as_array();
      if (!a) return wrong;
      std::vector<std::string> items;
      for (const auto& e : *a) {
        auto v = e.value<std::string>();
        if (!v) return wrong;
        items.push_back(*v);
      }
      return Value(std::move(items));
    }
  }
  return wrong;
}

// Every key of `t` (one section, `where` in errors: "cache", "dataset[2]")
// into `target`, through the key table.
Status parse_section(const toml::table& t, Section section, const std::string& where, const std::string& origin,
                     const Target& target) {
  std::vector<std::string> allowed;
  for (const auto& k : config_keys())
    if (k.section == section) allowed.push_back(k.key);
  DLFS_RETURN_IF_ERROR(check_keys(t, where, allowed, origin));
  for (const auto& k : config_keys()) {
    if (k.section != section) continue;
    const toml::node* n = t.get(k.key);
    if (!n) continue;
    const std::string context = "config " + origin + ": key '" + key_name(where, k.key) + "'";
    auto value = value_from_toml(k, *n);
    if (!value) return in_context(value.status(), context);
    DLFS_RETURN_IF_ERROR(in_context(check_value(k, *value), context));
    DLFS_RETURN_IF_ERROR(store_value(k, *value, target));
  }
  return Status::ok();
}

Status parse_dataset(const toml::table& t, const std::string& origin, size_t index, DaemonConfig& c) {
  const std::string where = "dataset[" + std::to_string(index) + "]";
  DatasetConfig d;
  DLFS_RETURN_IF_ERROR(parse_section(t, Section::dataset, where, origin, Target{nullptr, &d}));
  auto format = provenance::find_dataset_format(d.format.format);  // the key's choices: it exists
  if (!format) return format.status().with_context("config " + origin + ": " + where);
  for (const auto& k : config_keys()) {
    if (k.section != Section::dataset) continue;
    // A format's option written for another format is refused even at its
    // default value, which validate_config could not tell from unset.
    if (t.get(k.key))
      if (std::string why = provenance::foreign_option(**format, k.key); !why.empty())
        return Status(EINVAL, "config " + origin + ": key '" + key_name(where, k.key) + "' " + why);
    if (k.required && !t.get(k.key))
      return Status(EINVAL, "config " + origin + ": " + (d.name.empty() ? where : "dataset '" + d.name + "'") +
                                " has no '" + k.key + "'");
  }
  c.datasets.push_back(std::move(d));
  return Status::ok();
}

}  // namespace

Result<DaemonConfig> parse_config(const std::string& text, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& src = e.source();
    return Status(EINVAL, "config " + origin + ": line " + std::to_string(src.begin.line) + ", column " +
                              std::to_string(src.begin.column) + ": " + std::string(e.description()));
  }
  DaemonConfig c;
  DLFS_RETURN_IF_ERROR(check_keys(root, "", {"daemon", "cache", "cluster", "dataset"}, origin));
  for (Section section : {Section::daemon, Section::cluster, Section::cache}) {
    const std::string name = section_name(section);
    const toml::node* n = root.get(name);
    if (!n) continue;
    if (!n->is_table())
      return Status(EINVAL, "config " + origin + ": '" + name + "' must be a table ([" + name + "])");
    DLFS_RETURN_IF_ERROR(parse_section(*n->as_table(), section, name, origin, Target{&c, nullptr}));
  }
  if (const toml::node* n = root.get("dataset")) {
    const toml::array* arr = n->as_array();
    if (!arr || !arr->is_array_of_tables())
      return Status(EINVAL, "config " + origin + ": 'dataset' must be an array of tables ([[dataset]])");
    for (size_t i = 0; i < arr->size(); ++i)
      DLFS_RETURN_IF_ERROR(parse_dataset(*arr->get(i)->as_table(), origin, i, c));
  }
  for (auto& d : c.datasets) provenance::apply_format_defaults(d.format);
  return c;
}

Result<DaemonConfig> load_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::from_errno(errno, "config file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_config(ss.str(), "'" + path + "'");
}


namespace {

// The key table's ranges and choices, for configs not read from TOML or flags.
Status check_ranges(Section scope, const Target& target, const std::string& prefix) {
  for (const auto& k : config_keys()) {
    if ((k.section == Section::dataset) != (scope == Section::dataset)) continue;
    Value v = read_value(k, target);
    const std::string name = scope == Section::dataset ? k.key : key_name(section_name(k.section), k.key);
    if (Status s = check_value(k, v); !s)
      return Status(EINVAL, prefix + name + " " + s.message() + " (is " + value_text(k, v) + ")");
  }
  return Status::ok();
}

// view_owner and view_group name a user and a group this node knows, and
// view_mode is octal: a typo must not leave the views open or closed.
Status check_view_access(const DatasetConfig& d) {
  if (!d.view_owner.empty()) DLFS_RETURN_IF_ERROR(resolve_user(d.view_owner).status().with_context("view_owner"));
  if (!d.view_group.empty()) DLFS_RETURN_IF_ERROR(resolve_group(d.view_group).status().with_context("view_group"));
  if (!d.view_mode.empty()) DLFS_RETURN_IF_ERROR(parse_view_mode(d.view_mode).status());
  return Status::ok();
}

}  // namespace

Status validate_config(const DaemonConfig& c) {
  if (c.mountpoint.empty())
    return Status(EINVAL, "no mountpoint: pass --mountpoint or set daemon.mountpoint in the config");
  if (c.datasets.empty())
    return Status(EINVAL, "no dataset: pass --backend DIR or add a [[dataset]] to the config");
  DaemonConfig daemon = c;  // a copy: targets point at mutable configs
  DLFS_RETURN_IF_ERROR(check_ranges(Section::daemon, Target{&daemon, nullptr}, ""));
  std::set<std::string> names;
  for (auto& d : daemon.datasets) {
    bool valid = !d.name.empty() && d.name != "." && d.name != ".." && d.name[0] != '.' &&
                 std::all_of(d.name.begin(), d.name.end(), [](char ch) {
                   return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.';
                 });
    if (!valid)
      return Status(EINVAL, "dataset name '" + d.name +
                                "' is not valid (letters, digits, '-', '_', '.'; not starting with '.')");
    if (!names.insert(d.name).second) return Status(EINVAL, "dataset name '" + d.name + "' is used twice");
    DLFS_RETURN_IF_ERROR(provenance::check_format_options(d.format).with_context("dataset '" + d.name + "'"));
    DLFS_RETURN_IF_ERROR(check_ranges(Section::dataset, Target{nullptr, &d}, "dataset '" + d.name + "': "));
    DLFS_RETURN_IF_ERROR(check_view_access(d).with_context("dataset '" + d.name + "'"));
  }
  if (c.datasets.size() > 0xfffe) return Status(EINVAL, "too many datasets (at most 65534)");
  if (!c.metrics_address.empty() && c.metrics_address != "off")
    DLFS_RETURN_IF_ERROR(parse_metrics_address(c.metrics_address).status());
  // A watched peer answers once a heartbeat: a silence bound that is not
  // longer than that marks every peer down between two pongs.
  if (c.down_after_ms <= c.heartbeat_ms)
    return Status(EINVAL, "[cluster] down_after_ms (" + std::to_string(c.down_after_ms) +
                              ") must be longer than heartbeat_ms (" + std::to_string(c.heartbeat_ms) +
                              "): a peer answers once a heartbeat (take 3 heartbeats or more)");
  return Status::ok();
}


}  // namespace dlfs::fs
