#include "fs/config.h"

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

Status type_error(const std::string& origin, const std::string& section, const std::string& key,
                  const char* expected) {
  return Status(EINVAL, "config " + origin + ": key '" + key_name(section, key) + "' must be " + expected);
}

Status get_string(const toml::table& t, const std::string& origin, const std::string& section,
                  const std::string& key, std::string& out) {
  const toml::node* n = t.get(key);
  if (!n) return Status::ok();
  auto v = n->value<std::string>();
  if (!v) return type_error(origin, section, key, "a string");
  out = *v;
  return Status::ok();
}

Status get_bool(const toml::table& t, const std::string& origin, const std::string& section,
                const std::string& key, bool& out) {
  const toml::node* n = t.get(key);
  if (!n) return Status::ok();
  auto v = n->value<bool>();
  if (!v) return type_error(origin, section, key, "true or false");
  out = *v;
  return Status::ok();
}

Status get_unsigned(const toml::table& t, const std::string& origin, const std::string& section,
                    const std::string& key, unsigned& out) {
  const toml::node* n = t.get(key);
  if (!n) return Status::ok();
  auto v = n->value<int64_t>();
  if (!v || *v < 1 || *v > 4096) return type_error(origin, section, key, "an integer from 1 to 4096");
  out = static_cast<unsigned>(*v);
  return Status::ok();
}

Status get_double(const toml::table& t, const std::string& origin, const std::string& section,
                  const std::string& key, double& out) {
  const toml::node* n = t.get(key);
  if (!n) return Status::ok();
  auto v = n->value<double>();
  if (!v || *v < 0) return type_error(origin, section, key, "a non-negative number");
  out = *v;
  return Status::ok();
}

// Sizes may be integers (bytes) or strings with units ("8MiB").
Status get_size(const toml::table& t, const std::string& origin, const std::string& section,
                const std::string& key, uint64_t& out) {
  const toml::node* n = t.get(key);
  if (!n) return Status::ok();
  if (auto i = n->value_exact<int64_t>()) {
    if (*i < 0) return type_error(origin, section, key, "a non-negative size");
    out = static_cast<uint64_t>(*i);
    return Status::ok();
  }
  auto s = n->value<std::string>();
  if (!s) return type_error(origin, section, key, "a size (bytes, or a string such as \"8MiB\")");
  auto parsed = parse_size(*s);
  if (!parsed) return parsed.status().with_context("config " + origin + ": key '" + key_name(section, key) + "'");
  out = *parsed;
  return Status::ok();
}

Status parse_daemon(const toml::table& t, const std::string& origin, DaemonConfig& c) {
  DLFS_RETURN_IF_ERROR(check_keys(t, "daemon",
                                  {"mountpoint", "control_socket", "log_level", "fuse_threads", "allow_other",
                                   "entry_timeout_s", "attr_timeout_s"},
                                  origin));
  DLFS_RETURN_IF_ERROR(get_string(t, origin, "daemon", "mountpoint", c.mountpoint));
  DLFS_RETURN_IF_ERROR(get_string(t, origin, "daemon", "control_socket", c.control_socket));
  DLFS_RETURN_IF_ERROR(get_string(t, origin, "daemon", "log_level", c.log_level));
  DLFS_RETURN_IF_ERROR(get_unsigned(t, origin, "daemon", "fuse_threads", c.fuse_threads));
  DLFS_RETURN_IF_ERROR(get_bool(t, origin, "daemon", "allow_other", c.allow_other));
  DLFS_RETURN_IF_ERROR(get_double(t, origin, "daemon", "entry_timeout_s", c.entry_timeout_s));
  DLFS_RETURN_IF_ERROR(get_double(t, origin, "daemon", "attr_timeout_s", c.attr_timeout_s));
  return Status::ok();
}

Status parse_cache(const toml::table& t, const std::string& origin, DaemonConfig& c) {
  DLFS_RETURN_IF_ERROR(
      check_keys(t, "cache", {"memory_budget", "extent_size", "loader_threads", "read_size", "backend_requests"},
                 origin));
  if (const toml::node* n = t.get("memory_budget")) {
    if (auto i = n->value_exact<int64_t>()) c.memory_budget = std::to_string(*i);
    else DLFS_RETURN_IF_ERROR(get_string(t, origin, "cache", "memory_budget", c.memory_budget));
  }
  DLFS_RETURN_IF_ERROR(get_size(t, origin, "cache", "extent_size", c.extent_size));
  DLFS_RETURN_IF_ERROR(get_unsigned(t, origin, "cache", "loader_threads", c.loader_threads));
  DLFS_RETURN_IF_ERROR(get_unsigned(t, origin, "cache", "backend_requests", c.backend_requests));
  DLFS_RETURN_IF_ERROR(get_size(t, origin, "cache", "read_size", c.read_size));
  return Status::ok();
}

Status parse_cluster(const toml::table& t, const std::string& origin, DaemonConfig& c) {
  DLFS_RETURN_IF_ERROR(check_keys(t, "cluster",
                                  {"peers", "rank", "listen", "port", "token_file", "token", "heartbeat_ms",
                                   "down_after_ms", "get_timeout_ms"},
                                  origin));
  if (const toml::node* n = t.get("peers")) {
    const toml::array* a = n->as_array();
    if (!a) return type_error(origin, "cluster", "peers", "an array of \"host:port\" strings");
    for (const auto& e : *a) {
      auto v = e.value<std::string>();
      if (!v) return type_error(origin, "cluster", "peers", "an array of \"host:port\" strings");
      c.peers.push_back(*v);
    }
  }
  if (const toml::node* n = t.get("rank")) {
    auto v = n->value_exact<int64_t>();
    if (!v || *v < -1) return type_error(origin, "cluster", "rank", "an integer >= 0 (or -1: find this host)");
    c.rank = *v;
  }
  DLFS_RETURN_IF_ERROR(get_string(t, origin, "cluster", "listen", c.listen));
  DLFS_RETURN_IF_ERROR(get_string(t, origin, "cluster", "token_file", c.token_file));
  DLFS_RETURN_IF_ERROR(get_string(t, origin, "cluster", "token", c.token));
  for (auto [key, out] : {std::pair<const char*, uint64_t*>{"port", &c.port}, {"heartbeat_ms", &c.heartbeat_ms},
                          {"down_after_ms", &c.down_after_ms}, {"get_timeout_ms", &c.get_timeout_ms}}) {
    if (const toml::node* n = t.get(key)) {
      auto v = n->value_exact<int64_t>();
      if (!v || *v <= 0) return type_error(origin, "cluster", key, "a positive integer");
      *out = static_cast<uint64_t>(*v);
    }
  }
  if (c.port > 65535) return type_error(origin, "cluster", "port", "a port number (1..65535)");
  return Status::ok();
}

Status parse_dataset(const toml::table& t, const std::string& origin, size_t index, DaemonConfig& c) {
  std::string where = "dataset[" + std::to_string(index) + "]";
  DLFS_RETURN_IF_ERROR(check_keys(t, where,
                                  {"name", "backend", "format", "record_size", "header_bytes", "seed", "remainder",
                                   "shuffle_ratio", "round_chunk", "min_randomization", "world_size",
                                   "epochs_listed", "order", "opportunistic_window", "readahead", "lmdb_spot_checks"},
                                  origin));
  DatasetConfig d;
  DLFS_RETURN_IF_ERROR(get_string(t, origin, where, "name", d.name));
  DLFS_RETURN_IF_ERROR(get_string(t, origin, where, "backend", d.backend));
  std::string format = "files";
  DLFS_RETURN_IF_ERROR(get_string(t, origin, where, "format", format));
  auto f = provenance::find_dataset_format(format);
  if (!f) return f.status().with_context("config " + origin + ": key '" + where + ".format'");
  d.format.format = format;
  DLFS_RETURN_IF_ERROR(get_size(t, origin, where, "record_size", d.format.record_size));
  DLFS_RETURN_IF_ERROR(get_size(t, origin, where, "header_bytes", d.format.header_bytes));
  if (const toml::node* n = t.get("lmdb_spot_checks")) {
    auto v = n->value_exact<int64_t>();
    if (!v || *v < 0 || *v > 1000000) return type_error(origin, where, "lmdb_spot_checks", "an integer 0..1000000");
    if (d.format.format != "lmdb")
      return Status(EINVAL, "config " + origin + ": key '" + where + ".lmdb_spot_checks' applies to format 'lmdb' only");
    d.format.lmdb_spot_leaves = static_cast<uint32_t>(*v);
  }
  if (const toml::node* n = t.get("seed")) {
    auto v = n->value_exact<int64_t>();
    if (!v || *v < 0) return type_error(origin, where, "seed", "a non-negative integer");
    d.plan.seed = static_cast<uint64_t>(*v);
  }
  DLFS_RETURN_IF_ERROR(get_string(t, origin, where, "remainder", d.plan.remainder));
  DLFS_RETURN_IF_ERROR(get_string(t, origin, where, "order", d.plan.order));
  DLFS_RETURN_IF_ERROR(get_bool(t, origin, where, "readahead", d.plan.readahead));
  if (const toml::node* n = t.get("opportunistic_window")) {
    auto v = n->value_exact<int64_t>();
    if (!v || *v < 1) return type_error(origin, where, "opportunistic_window", "a positive integer");
    d.plan.opportunistic_window = static_cast<uint64_t>(*v);
  }
  DLFS_RETURN_IF_ERROR(get_double(t, origin, where, "shuffle_ratio", d.plan.shuffle_ratio));
  DLFS_RETURN_IF_ERROR(get_size(t, origin, where, "round_chunk", d.plan.round_chunk));
  DLFS_RETURN_IF_ERROR(get_double(t, origin, where, "min_randomization", d.plan.min_randomization));
  unsigned w = d.plan.world_size, el = d.plan.epochs_listed;
  DLFS_RETURN_IF_ERROR(get_unsigned(t, origin, where, "world_size", w));
  DLFS_RETURN_IF_ERROR(get_unsigned(t, origin, where, "epochs_listed", el));
  d.plan.world_size = w;
  d.plan.epochs_listed = el;
  if (d.name.empty()) return Status(EINVAL, "config " + origin + ": " + where + " has no 'name'");
  if (d.backend.empty()) return Status(EINVAL, "config " + origin + ": dataset '" + d.name + "' has no 'backend'");
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
  if (const toml::node* n = root.get("daemon")) {
    if (!n->is_table()) return Status(EINVAL, "config " + origin + ": 'daemon' must be a table ([daemon])");
    DLFS_RETURN_IF_ERROR(parse_daemon(*n->as_table(), origin, c));
  }
  if (const toml::node* n = root.get("cluster")) {
    if (!n->is_table()) return Status(EINVAL, "config " + origin + ": 'cluster' must be a table ([cluster])");
    DLFS_RETURN_IF_ERROR(parse_cluster(*n->as_table(), origin, c));
  }
  if (const toml::node* n = root.get("cache")) {
    if (!n->is_table()) return Status(EINVAL, "config " + origin + ": 'cache' must be a table ([cache])");
    DLFS_RETURN_IF_ERROR(parse_cache(*n->as_table(), origin, c));
  }
  if (const toml::node* n = root.get("dataset")) {
    const toml::array* arr = n->as_array();
    if (!arr || !arr->is_array_of_tables())
      return Status(EINVAL, "config " + origin + ": 'dataset' must be an array of tables ([[dataset]])");
    for (size_t i = 0; i < arr->size(); ++i)
      DLFS_RETURN_IF_ERROR(parse_dataset(*arr->get(i)->as_table(), origin, i, c));
  }
  return c;
}

Result<DaemonConfig> load_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::from_errno(errno, "config file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_config(ss.str(), "'" + path + "'");
}

Result<std::string> load_job_token(const DaemonConfig& c) {
  if (!c.token.empty() && !c.token_file.empty())
    return Status(EINVAL, "cluster: set token or token_file, not both");
  if (c.token_file.empty()) return c.token;
  const std::string what = "job token file '" + c.token_file + "'";
  int fd = ::open(c.token_file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return Status::from_errno(errno, what);
  struct stat st {};
  ::fstat(fd, &st);
  std::string token;
  Status s;
  if (!S_ISREG(st.st_mode)) s = Status(EINVAL, what + " is not a regular file");
  else if (st.st_mode & 077)
    s = Status(EPERM, what + " can be read by others (mode " + fmt::format("{:o}", st.st_mode & 0777) +
                          "): chmod 600 it");
  else if (st.st_uid != ::geteuid()) s = Status(EPERM, what + " is not owned by the daemon's user");
  else if (st.st_size > 4096) s = Status(EINVAL, what + " is larger than 4 KiB: is it the right file?");
  else {
    token.resize(static_cast<size_t>(st.st_size));
    ssize_t n = ::read(fd, token.data(), token.size());
    if (n < 0) s = Status::from_errno(errno, what);
    else token.resize(static_cast<size_t>(n));
  }
  ::close(fd);
  if (!s) return s;
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.empty()) return Status(EINVAL, what + " is empty");
  return token;
}

Status validate_config(const DaemonConfig& c) {
  if (c.mountpoint.empty())
    return Status(EINVAL, "no mountpoint: pass --mountpoint or set daemon.mountpoint in the config");
  if (c.datasets.empty())
    return Status(EINVAL, "no dataset: pass --backend DIR or add a [[dataset]] to the config");
  if (c.extent_size < 4096) return Status(EINVAL, "cache.extent_size must be at least 4 KiB");
  if (c.read_size < 4096) return Status(EINVAL, "cache.read_size must be at least 4 KiB");
  std::set<std::string> names;
  for (const auto& d : c.datasets) {
    bool valid = !d.name.empty() && d.name != "." && d.name != ".." && d.name[0] != '.' &&
                 std::all_of(d.name.begin(), d.name.end(), [](char ch) {
                   return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.';
                 });
    if (!valid)
      return Status(EINVAL, "dataset name '" + d.name +
                                "' is not valid (letters, digits, '-', '_', '.'; not starting with '.')");
    if (!names.insert(d.name).second) return Status(EINVAL, "dataset name '" + d.name + "' is used twice");
    const std::string ds = "dataset '" + d.name + "': ";
    auto format = provenance::find_dataset_format(d.format.format);
    if (!format) return format.status().with_context("dataset '" + d.name + "'");
    DLFS_RETURN_IF_ERROR((*format)->check_options(d.format).with_context("dataset '" + d.name + "'"));
    if (d.plan.remainder != "pad" && d.plan.remainder != "drop")
      return Status(EINVAL, ds + "remainder '" + d.plan.remainder + "' is not \"pad\" or \"drop\"");
    if (d.plan.order != "ordered" && d.plan.order != "opportunistic")
      return Status(EINVAL, ds + "order '" + d.plan.order + "' is not \"ordered\" or \"opportunistic\"");
    if (d.plan.shuffle_ratio < 0 || d.plan.shuffle_ratio > 1)
      return Status(EINVAL, ds + "shuffle_ratio " + std::to_string(d.plan.shuffle_ratio) +
                                " is not in (0, 1] (0 or absent: from the memory budget)");
    if (d.plan.round_chunk == 0) return Status(EINVAL, ds + "round_chunk must be at least 1 byte");
    if (d.plan.min_randomization < 0 || d.plan.min_randomization > 1)
      return Status(EINVAL, ds + "min_randomization " + std::to_string(d.plan.min_randomization) +
                                " is not in [0, 1]");
    if (d.plan.world_size < 1 || d.plan.world_size > 65535)
      return Status(EINVAL, ds + "world_size must be from 1 to 65535");
  }
  if (c.datasets.size() > 0xfffe) return Status(EINVAL, "too many datasets (at most 65534)");
  return Status::ok();
}

Result<uint64_t> resolve_memory_budget(const std::string& text, uint64_t physical_bytes) {
  if (!text.empty() && text.back() == '%') {
    double pct = 0;
    try {
      size_t pos = 0;
      pct = std::stod(text.substr(0, text.size() - 1), &pos);
      if (pos != text.size() - 1) throw std::invalid_argument("trailing");
    } catch (...) {
      return Status(EINVAL, "memory budget '" + text + "' is not a percentage such as \"50%\"");
    }
    if (pct <= 0 || pct > 100) return Status(EINVAL, "memory budget '" + text + "' must be between 0% and 100%");
    return static_cast<uint64_t>(static_cast<double>(physical_bytes) * pct / 100.0);
  }
  auto r = parse_size(text);
  if (!r) return r.status().with_context("memory budget");
  return *r;
}

}  // namespace dlfs::fs
