// The config key table (fs/config/config_keys.h): every key parses from TOML into
// its member, its flag gives the same config as its TOML key, errors name the
// key, and docs/configuration.md is the generated list.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>
#include <spdlog/fmt/fmt.h>

#include "fs/config/config_keys.h"
#include "fs/config/config_file.h"
#include "provenance/dataset_format.h"

#ifndef DLFS_SOURCE_ROOT
#error "DLFS_SOURCE_ROOT (the source tree, for docs/configuration.md) must be defined"
#endif

namespace dlfs::fs {
namespace {

std::string str(const std::string& s) { return s; }
std::string str(bool b) { return b ? "true" : "false"; }
std::string str(double d) { return fmt::format("{}", d); }
std::string str(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}
template <typename T>
  requires std::is_integral_v<T>
std::string str(T v) { return std::to_string(v); }
template <NamedEnum E>
std::string str(E v) { return std::string(name_of(v)); }

// Which member each key must land in, written out independently of the table.
using Reader = std::function<std::string(const DaemonConfig&, const DatasetConfig&)>;
#define D(key, member) {key, [](const DaemonConfig& c, const DatasetConfig&) { return str(c.member); }}
#define S(key, member) {key, [](const DaemonConfig&, const DatasetConfig& d) { return str(d.member); }}
const std::map<std::string, Reader> kMembers = {
    D("daemon.mountpoint", mountpoint),          D("daemon.control_socket", control_socket),
    D("daemon.client_socket", client_socket),
    D("daemon.log_level", log_level),            D("daemon.fuse_threads", fuse_threads),
    D("daemon.allow_other", allow_other),        D("daemon.entry_timeout_s", entry_timeout_s),
    D("daemon.attr_timeout_s", attr_timeout_s),  D("daemon.passthrough", passthrough),  D("cache.memory_budget", memory_budget),
    D("daemon.fuse_uring", fuse_uring),          D("daemon.raw_overlay", raw_overlay),
    D("daemon.serve_despite_failed_datasets", serve_despite_failed_datasets),
    D("daemon.view_drop_behind", view_drop_behind),
    D("daemon.raw_push_size", raw_push_size),     D("daemon.metrics_address", metrics_address),
    D("cache.extent_size", extent_size),         D("cache.loader_threads", loader_threads),
    D("cache.load_staging", load_staging),
    D("cache.read_size", read_size),             D("cache.backend_requests", backend_requests),
    D("cluster.peers", peers),                   D("cluster.rank", rank),
    D("cluster.listen", listen),                 D("cluster.port", port),
    D("cluster.token_file", token_file),         D("cluster.token", token),
    D("cluster.heartbeat_ms", heartbeat_ms),     D("cluster.down_after_ms", down_after_ms),
    D("cluster.watch_peers", watch_peers),
    D("cluster.get_timeout_ms", get_timeout_ms), D("cluster.gets", gets),
    S("dataset.name", name),                     S("dataset.view_owner", view_owner),
    S("dataset.view_group", view_group),         S("dataset.view_mode", view_mode),
    S("dataset.backend", backend),               S("dataset.format", format.format),
    S("dataset.record_size", format.record_size), S("dataset.header_bytes", format.header_bytes),
    S("dataset.seed", plan.seed),                S("dataset.remainder", plan.remainder),
    S("dataset.shuffle_ratio", plan.shuffle_ratio), S("dataset.round_chunk", plan.round_chunk), S("dataset.round_span", plan.round_span),
    S("dataset.min_randomization", plan.min_randomization), S("dataset.world_size", plan.world_size),
    S("dataset.epochs_listed", plan.epochs_listed), S("dataset.order", plan.order),
    S("dataset.opportunistic_window", plan.opportunistic_window), S("dataset.readahead", plan.readahead),
    S("dataset.lmdb_spot_checks", format.lmdb_spot_checks), S("dataset.group_by", format.group_by),
    S("dataset.tfrecord_skip_bad_files", format.tfrecord_skip_bad_files),
};
#undef D
#undef S

std::string full_name(const ConfigKey& k) { return std::string(section_name(k.section)) + "." + k.key; }

// A format that reads `k`, "" if every format does.
std::string format_for(const ConfigKey& k) {
  const auto owners = provenance::option_owners(k.key);
  return owners.empty() ? "" : std::string(owners.front());
}

// A value of `k` other than its default: as TOML, as a flag's text, and as
// the member reads (str()).
struct Sample {
  std::string toml, flag, member;
};

Sample sample(const ConfigKey& k) {
  switch (k.kind) {
    case Kind::text: return {"\"v-" + k.key + "\"", "v-" + k.key, "v-" + k.key};
    case Kind::choice: {
      std::string c = k.choices.back() != default_text(k) ? k.choices.back() : k.choices.front();
      return {"\"" + c + "\"", c, c};
    }
    case Kind::share_or_size: return {"\"3GiB\"", "3GiB", "3GiB"};
    case Kind::boolean: {
      bool v = default_text(k) != "true";
      return {str(v), "", str(v)};
    }
    case Kind::integer: return {str(k.min + 7), str(k.min + 7), str(k.min + 7)};
    case Kind::number: return {"0.25", "0.25", "0.25"};
    case Kind::size: return {"\"12KiB\"", "12KiB", "12288"};
    case Kind::list: return {"[\"a:1\", \"b:2\"]", "a:1,b:2", "a:1,b:2"};
  }
  return {};
}

// A config file setting `k` to its sample (datasets get the keys they need).
std::string toml_with(const ConfigKey& k) {
  const Sample s = sample(k);
  if (k.section != Section::dataset) return "[" + std::string(section_name(k.section)) + "]\n" + k.key + " = " + s.toml + "\n";
  std::map<std::string, std::string> keys = {{"name", "\"ds\""}, {"backend", "\"/b\""}};
  if (!format_for(k).empty()) keys["format"] = "\"" + format_for(k) + "\"";
  keys[k.key] = s.toml;
  std::string text = "[[dataset]]\n";
  for (const auto& [key, value] : keys) text += key + " = " + value + "\n";
  return text;
}

// The same as flags.
std::vector<std::string> flags_with(const ConfigKey& k) {
  const Sample s = sample(k);
  std::map<std::string, std::string> flags;
  if (k.section == Section::dataset) {
    flags = {{"--name", "ds"}, {"--backend", "/b"}};
    if (!format_for(k).empty()) flags["--format"] = format_for(k);
  }
  flags[long_flag(k)] = s.flag;
  std::vector<std::string> args;
  for (const auto& [flag, value] : flags) {
    args.push_back(flag);
    if (!value.empty()) args.push_back(value);
  }
  return args;
}

Result<DaemonConfig> config_from_flags(const std::vector<std::string>& args) {
  CLI::App app{"test", "dlfsd"};
  ConfigFlags flags;
  add_config_flags(app, flags);
  std::vector<const char*> argv = {"dlfsd"};
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return Status(EINVAL, std::string("CLI11: ") + e.what());
  }
  DaemonConfig config;
  DLFS_RETURN_IF_ERROR(apply_config_flags(flags, config));
  return config;
}

std::string member(const ConfigKey& k, const DaemonConfig& c) {
  DatasetConfig none;
  return kMembers.at(full_name(k))(c, c.datasets.empty() ? none : c.datasets[0]);
}

TEST(ConfigKeys, TheTableAndTheTestAgreeOnTheKeys) {
  std::set<std::string> seen;
  for (const auto& k : config_keys()) {
    EXPECT_TRUE(kMembers.count(full_name(k))) << full_name(k) << ": add it to kMembers";
    EXPECT_TRUE(seen.insert(full_name(k)).second) << full_name(k) << " is declared twice";
    EXPECT_FALSE(k.help.empty()) << full_name(k);
    EXPECT_EQ(find_config_key(k.section, k.key), &k);
  }
  EXPECT_EQ(seen.size(), kMembers.size());
}

TEST(ConfigKeys, EveryKeyParsesFromTomlIntoItsMember) {
  for (const auto& k : config_keys()) {
    const std::string text = toml_with(k);
    auto c = parse_config(text, "test");
    ASSERT_TRUE(c.is_ok()) << full_name(k) << ": " << c.status().message() << "\n" << text;
    const Sample s = sample(k);
    EXPECT_NE(member(k, DaemonConfig{}), s.member) << full_name(k) << ": the sample is the default";
    EXPECT_EQ(member(k, *c), s.member) << full_name(k) << "\n" << text;
  }
}

// Every key's member, as text: two configs are the same if these are.
std::vector<std::string> all_members(const DaemonConfig& c) {
  std::vector<std::string> out;
  for (const auto& k : config_keys()) out.push_back(full_name(k) + "=" + member(k, c));
  return out;
}

TEST(ConfigKeys, AFlagAndItsTomlKeyGiveTheSameConfig) {
  int flags = 0;
  for (const auto& k : config_keys()) {
    if (k.flag.empty()) continue;
    ++flags;
    auto from_toml = parse_config(toml_with(k), "test");
    ASSERT_TRUE(from_toml.is_ok()) << full_name(k) << ": " << from_toml.status().message();
    auto from_flags = config_from_flags(flags_with(k));
    ASSERT_TRUE(from_flags.is_ok()) << long_flag(k) << ": " << from_flags.status().message();
    EXPECT_EQ(all_members(*from_flags), all_members(*from_toml)) << long_flag(k);
    EXPECT_EQ(member(k, *from_flags), sample(k).member) << long_flag(k);
  }
  EXPECT_GE(flags, 29);  // FlagsKeepTheirNames lists them
}

TEST(ConfigKeys, FlagsKeepTheirNames) {
  // The one-dataset flags scripts and docs use.
  for (const char* f : {"--mountpoint", "--backend", "--name", "--format", "--record-size", "--header-bytes",
                        "--memory-budget", "--extent-size", "--read-size", "--loader-threads", "--backend-requests",
                        "--fuse-threads", "--control-socket", "--log-level", "--seed", "--remainder",
                        "--shuffle-ratio", "--round-chunk", "--min-randomization", "--order",
                        "--opportunistic-window", "--no-readahead", "--world-size", "--epochs-listed", "--peers",
                        "--rank", "--listen", "--port", "--token-file"}) {
    bool found = false;
    for (const auto& k : config_keys()) found = found || long_flag(k) == f;
    EXPECT_TRUE(found) << f;
  }
}

TEST(ConfigKeys, SizesParseAsBefore) {
  auto c = parse_config("[cache]\nmemory_budget = \"16GiB\"\nextent_size = 65536\nread_size = \"1.5MiB\"\n", "x");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->memory_budget, "16GiB");
  EXPECT_EQ(c->extent_size, 65536u);
  EXPECT_EQ(c->read_size, 1536u << 10);
  auto n = parse_config("[cache]\nmemory_budget = 1073741824\n", "x");
  ASSERT_TRUE(n.is_ok()) << n.status().message();
  EXPECT_EQ(n->memory_budget, "1073741824");
  auto f = config_from_flags({"--memory-budget", "16GiB", "--extent-size", "64KiB"});
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->memory_budget, "16GiB");
  EXPECT_EQ(f->extent_size, 64u << 10);
}

TEST(ConfigKeys, UnknownDatasetKeyIsNamedWithTheValidOnes) {
  auto c = parse_config("[[dataset]]\nname = \"a\"\nbackend = \"/b\"\nsede = 3\n", "job.toml");
  ASSERT_FALSE(c.is_ok());
  const std::string m = c.status().message();
  EXPECT_NE(m.find("unknown key 'dataset[0].sede'"), std::string::npos) << m;
  for (const auto& k : config_keys()) {
    if (k.section == Section::dataset) {
      EXPECT_NE(m.find(k.key), std::string::npos) << k.key << " not listed: " << m;
    }
  }
  auto cluster = parse_config("[cluster]\npeer = [\"a\"]\n", "job.toml");
  ASSERT_FALSE(cluster.is_ok());
  EXPECT_NE(cluster.status().message().find("unknown key 'cluster.peer' (valid keys in [cluster]: peers, rank"),
            std::string::npos)
      << cluster.status().message();
}

TEST(ConfigKeys, RangesAreTheSameForTomlFlagsAndValidation) {
  auto t = parse_config("[[dataset]]\nname = \"a\"\nbackend = \"/b\"\nworld_size = 0\n", "x");
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("key 'dataset[0].world_size' must be an integer from 1 to 65535"),
            std::string::npos)
      << t.status().message();
  auto f = config_from_flags({"--backend", "/b", "--world-size", "0"});
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("--world-size must be an integer from 1 to 65535"), std::string::npos)
      << f.status().message();
  DaemonConfig c;
  c.mountpoint = "/mnt";
  c.datasets.push_back({"a", "/b", {}, {}});
  c.datasets[0].plan.world_size = 0;
  Status v = validate_config(c);
  EXPECT_NE(v.message().find("dataset 'a': world_size must be an integer from 1 to 65535 (is 0)"), std::string::npos)
      << v.message();
  c.datasets[0].plan.world_size = 1;
  c.extent_size = 1024;
  EXPECT_NE(validate_config(c).message().find("cache.extent_size must be a size"), std::string::npos);
  auto choice = config_from_flags({"--backend", "/b", "--order", "random"});
  ASSERT_FALSE(choice.is_ok());
  EXPECT_NE(choice.status().message().find("--order must be one of ordered, opportunistic (not 'random')"),
            std::string::npos)
      << choice.status().message();
  auto size = config_from_flags({"--extent-size", "8 parsecs"});
  ASSERT_FALSE(size.is_ok());
  EXPECT_NE(size.status().message().find("--extent-size: size '8 parsecs'"), std::string::npos)
      << size.status().message();
}

TEST(ConfigKeys, TomlTypesAreNotConverted) {
  for (const char* text : {"[daemon]\nfuse_threads = true\n", "[daemon]\nfuse_threads = 8.5\n",
                           "[daemon]\nallow_other = 1\n", "[daemon]\nmountpoint = 3\n",
                           "[cluster]\npeers = \"a,b\"\n", "[cache]\nextent_size = -4096\n"}) {
    auto c = parse_config(text, "x");
    EXPECT_FALSE(c.is_ok()) << text;
    EXPECT_NE(c.status().message().find("must be"), std::string::npos) << c.status().message();
  }
  auto n = parse_config("[daemon]\nentry_timeout_s = 5\nattr_timeout_s = 2.5\n", "x");
  ASSERT_TRUE(n.is_ok()) << n.status().message();
  EXPECT_EQ(n->entry_timeout_s, 5.0);
  EXPECT_EQ(n->attr_timeout_s, 2.5);
}

TEST(ConfigKeys, AFormatsOptionsAreRefusedForTheOthers) {
  for (const provenance::DatasetFormat* f : provenance::dataset_formats())
    for (std::string_view key : f->options())
      EXPECT_TRUE(find_config_key(Section::dataset, std::string(key))) << f->name() << " reads no key '" << key << "'";
  // Written in a file: refused even at its default value.
  auto t = parse_config("[[dataset]]\nname = \"a\"\nbackend = \"/b\"\nlmdb_spot_checks = 32\n", "x");
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(
      t.status().message().find("key 'dataset[0].lmdb_spot_checks' applies to format 'lmdb' only, not to 'files'"),
      std::string::npos)
      << t.status().message();
  // Made in code or by flags: refused once away from its default.
  DaemonConfig c;
  c.mountpoint = "/mnt";
  c.datasets.push_back({"a", "/b", {}, {}});
  c.datasets[0].format.format = "fixed";
  c.datasets[0].format.record_size = 10;
  c.datasets[0].format.group_by = provenance::GroupRule::first_dot;
  EXPECT_NE(validate_config(c).message().find("dataset 'a': group_by applies to formats 'files' and 'tar' only, not to "
                                              "'fixed'"),
            std::string::npos)
      << validate_config(c).message();
  c.datasets[0].format.format = "tar";
  EXPECT_NE(validate_config(c).message().find("record_size applies to format 'fixed' only, not to 'tar'"),
            std::string::npos)
      << validate_config(c).message();
  c.datasets[0].format.record_size = 0;
  EXPECT_TRUE(validate_config(c).is_ok()) << validate_config(c).message();
}

// `--format tar` alone serves shards as WebDataset reads them (its key rule,
// first-dot); last-dot stays last-dot; other formats keep a file a sample.
TEST(ConfigKeys, TarGroupsByWebDatasetsKeyUnlessTold) {
  auto tar = config_from_flags({"--mountpoint", "/mnt", "--backend", "/shards", "--format", "tar"});
  ASSERT_TRUE(tar.is_ok()) << tar.status().message();
  EXPECT_EQ(tar->datasets[0].format.group_by, provenance::GroupRule::first_dot);
  auto last = config_from_flags({"--mountpoint", "/mnt", "--backend", "/shards", "--format", "tar", "--group-by", "last-dot"});
  ASSERT_TRUE(last.is_ok()) << last.status().message();
  EXPECT_EQ(last->datasets[0].format.group_by, provenance::GroupRule::last_dot);
  auto files = config_from_flags({"--mountpoint", "/mnt", "--backend", "/data"});
  ASSERT_TRUE(files.is_ok()) << files.status().message();
  EXPECT_EQ(files->datasets[0].format.group_by, provenance::GroupRule::none);
  auto toml = parse_config("[[dataset]]\nname = \"w\"\nbackend = \"/s\"\nformat = \"tar\"\n", "x");
  ASSERT_TRUE(toml.is_ok()) << toml.status().message();
  EXPECT_EQ(toml->datasets[0].format.group_by, provenance::GroupRule::first_dot);
}

TEST(ConfigKeys, ZeroBackendRequestsMeansNoBound) {
  // docs/usage.md's example sets it; it used to be refused from TOML (1..4096).
  auto c = parse_config("[cache]\nbackend_requests = 0\n", "x");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->backend_requests, 0u);
}

TEST(ConfigKeys, OneDatasetFlags) {
  auto c = config_from_flags({"--backend", "/data/imagenet/", "--seed", "42", "--no-readahead"});
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_EQ(c->datasets.size(), 1u);
  EXPECT_EQ(c->datasets[0].name, "imagenet");
  EXPECT_EQ(c->datasets[0].backend, "/data/imagenet/");
  EXPECT_EQ(c->datasets[0].plan.seed, 42u);
  EXPECT_FALSE(c->datasets[0].plan.readahead);
  auto alone = config_from_flags({"--seed", "42"});
  ASSERT_FALSE(alone.is_ok());
  EXPECT_NE(alone.status().message().find("--seed needs --backend"), std::string::npos) << alone.status().message();
  auto none = config_from_flags({"--mountpoint", "/mnt"});
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->datasets.empty());
}

TEST(ConfigKeys, FlagsOverrideTheFile) {
  auto file = parse_config(
      "[daemon]\nmountpoint = \"/file\"\n[cluster]\ntoken = \"inline\"\npeers = [\"a\", \"b\"]\n"
      "[[dataset]]\nname = \"a\"\nbackend = \"/a\"\n",
      "x");
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  DaemonConfig c = *file;
  CLI::App app{"test", "dlfsd"};
  ConfigFlags flags;
  add_config_flags(app, flags);
  const char* argv[] = {"dlfsd", "--mountpoint", "/flag", "--token-file", "/t", "--peers", "c,d,e", "--backend", "/b"};
  app.parse(9, argv);
  ASSERT_TRUE(apply_config_flags(flags, c).is_ok());
  EXPECT_EQ(c.mountpoint, "/flag");
  EXPECT_EQ(c.token_file, "/t");
  EXPECT_EQ(c.token, "");  // --token-file replaces the file's inline token
  EXPECT_EQ(c.peers, (std::vector<std::string>{"c", "d", "e"}));
  ASSERT_EQ(c.datasets.size(), 2u);  // the file's, then the flags'
  EXPECT_EQ(c.datasets[1].name, "b");
}

std::string read_source_file(const std::string& relative) {
  std::ifstream in(std::string(DLFS_SOURCE_ROOT) + "/" + relative);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ConfigKeys, DocsListEveryKeyAsDlfsdPrintsThem) {
  const std::string path = "docs/configuration.md";
  const std::string doc = read_source_file(path);
  ASSERT_FALSE(doc.empty()) << path;
  const std::string table = config_keys_markdown();
  const bool ends_with_table =
      doc.size() >= table.size() && doc.compare(doc.size() - table.size(), table.size(), table) == 0;
  EXPECT_TRUE(ends_with_table) << path
                               << " must end with the output of `dlfsd --config-keys` (regenerate: keep the "
                                  "intro, replace the table). Expected table:\n"
                               << table;
  EXPECT_EQ(doc.find("| Section |"), doc.size() - table.size()) << "one table, at the end";
  for (const auto& k : config_keys())
    EXPECT_NE(table.find("`" + k.key + "`"), std::string::npos) << k.key;
}

TEST(ConfigKeys, TheUsageExampleParses) {
  const std::string readme = read_source_file("docs/usage.md");
  const size_t section = readme.find("## Configuration");
  ASSERT_NE(section, std::string::npos);
  const size_t begin = readme.find("```toml\n", section);
  ASSERT_NE(begin, std::string::npos);
  const size_t end = readme.find("```", begin + 8);
  ASSERT_NE(end, std::string::npos);
  auto c = parse_config(readme.substr(begin + 8, end - begin - 8), "docs/usage.md");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_TRUE(validate_config(*c).is_ok()) << validate_config(*c).message();
  EXPECT_GE(c->datasets.size(), 2u);
}

}  // namespace
}  // namespace dlfs::fs
