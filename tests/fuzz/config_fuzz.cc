// Fuzz target: the TOML config (fs/config/config.cc: parse_config, validate_config,
// resolve_memory_budget; `tools/fuzz.sh config`). The input is a config file.
//
// Invariants: a bad config is an error with an errno whose message names the
// file (parsing) or is not empty (validation), never a crash, an exception or
// undefined behaviour; a valid config's memory budget resolves to an error or
// to at most the physical memory when it is a share.
#include <algorithm>
#include <cstdio>
#include <string>
#include <variant>

#include "fs/config/config.h"
#include "fs/config/config_file.h"
#include "fs/config/config_keys.h"
#include "provenance/dataset_format.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace dlfs::fs;

const std::string kOrigin = "'fuzz.toml'";
constexpr uint64_t kPhysical = 16ull << 30;

[[noreturn]] void fail(const std::string& what) { dlfs::fuzz::fail("config_fuzz", what); }

void check_error(const dlfs::Status& s, const std::string& prefix) {
  if (s.err() <= 0) fail("an error without an errno: " + s.message());
  if (s.message().rfind(prefix, 0) != 0) fail("error does not start with '" + prefix + "': " + s.message());
}

// ---- seeds: TOML written from the key table, every key at its default ----

std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string toml_value(const ConfigKey& k, const Value& v) {
  return std::visit(
      [&](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) return toml_string(x);
        else if constexpr (std::is_same_v<T, bool>) return x ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string a = "[";
          for (const auto& item : x) a += (a.size() > 1 ? ", " : "") + toml_string(item);
          return a + "]";
        } else if constexpr (std::is_same_v<T, double>) {
          char buf[64];
          std::snprintf(buf, sizeof buf, "%.17g", x);
          std::string d = buf;
          return d.find_first_of(".en") == std::string::npos ? d + ".0" : d;  // a TOML float
        } else if constexpr (std::is_same_v<T, uint64_t>) {
          // sizes as text with a unit ("8MiB"), other unsigned values as integers
          return k.kind == Kind::size ? toml_string(value_text(k, v)) : std::to_string(x);
        } else return std::to_string(x);
      },
      v);
}

// One section's keys at their defaults in `target` (dataset keys: those of `format`).
std::string section_text(Section section, const Target& target, const std::string& format) {
  std::string out;
  for (const ConfigKey& k : config_keys()) {
    if (k.section != section) continue;
    const auto owners = dlfs::provenance::option_owners(k.key);
    if (!owners.empty() && std::find(owners.begin(), owners.end(), format) == owners.end()) continue;
    out += k.key + " = " + toml_value(k, read_value(k, target)) + "\n";
  }
  return out;
}

// Every key of the table: [daemon], [cache], [cluster] and one [[dataset]]
// per format (a format's own keys only in its dataset).
std::string every_key() {
  DaemonConfig daemon;
  daemon.mountpoint = "/mnt/dlfs";
  std::string text;
  for (Section s : {Section::daemon, Section::cache, Section::cluster})
    text += std::string("[") + section_name(s) + "]\n" + section_text(s, Target{&daemon, nullptr}, "");
  const ConfigKey* format_key = find_config_key(Section::dataset, "format");
  if (!format_key) fail("the key table has no dataset.format");
  for (const std::string& format : format_key->choices) {
    DatasetConfig d;
    d.name = "ds_" + format;
    d.backend = "/data/" + format;
    d.format.format = format;
    if (format == "fixed") d.format.record_size = 3072;
    if (format == "tar") d.format.group_by = dlfs::provenance::GroupRule::first_dot;  // tar needs a group rule
    text += "\n[[dataset]]\n" + section_text(Section::dataset, Target{nullptr, &d}, format);
  }
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto c = parse_config(text, kOrigin);
  if (!c) {
    check_error(c.status(), "config " + kOrigin + ": ");
    return 0;
  }
  if (dlfs::Status s = validate_config(*c); !s) {
    check_error(s, "");
    if (s.message().empty()) fail("an empty error message");
    return 0;
  }
  auto budget = resolve_memory_budget(c->memory_budget, kPhysical);
  if (!budget) {
    check_error(budget.status(), "memory budget");
  } else if (c->memory_budget.ends_with("%") && *budget > kPhysical) {
    fail("memory budget '" + c->memory_budget + "' resolved to more than the physical memory");
  }
  return 0;
}

std::vector<dlfs::fuzz::Seed> dlfs::fuzz::seeds() {
  using namespace dlfs::fs;
  const std::string minimal = "[daemon]\nmountpoint = \"/mnt/x\"\n[[dataset]]\nname = \"ds\"\nbackend = \"/data\"\n";
  std::vector<Seed> out = {
      {"every_key.toml", every_key()},
      {"minimal.toml", minimal},
      {"budget_share.toml", minimal + "[cache]\nmemory_budget = \"12.5%\"\n"},
      {"budget_size.toml", minimal + "[cache]\nmemory_budget = \"1.5 GiB\"\nextent_size = 65536\n"},
      // Numbers at the edges of what strtod reads (resolved only at start-up).
      {"budget_inf.toml", minimal + "[cache]\nmemory_budget = \"inf%\"\n"},
      {"budget_hex.toml", minimal + "[cache]\nmemory_budget = \"0x1p4%\"\n"},
      {"budget_tiny.toml", minimal + "[cache]\nmemory_budget = \"1e-300%\"\n"},
      {"cluster.toml", minimal + "[cluster]\npeers = [\"a:1\", \"b\"]\nrank = 1\ntoken = \"t\"\n"},
      {"fixed.toml", "[daemon]\nmountpoint = \"/m\"\n[[dataset]]\nname = \"f\"\nbackend = \"/d\"\nformat = \"fixed\"\n"
                     "record_size = \"3KiB\"\nheader_bytes = 16\n"},
      {"syntax_error.toml", "[daemon\nmountpoint = 1\n"},
      {"wrong_type.toml", minimal + "[cache]\nloader_threads = \"many\"\n"},
  };
  // The valid seeds must parse and validate, or the fuzzer would start from errors only.
  for (const Seed& s : out) {
    if (s.name.find("error") != std::string::npos || s.name.find("wrong") != std::string::npos) continue;
    auto c = parse_config(s.bytes, "'" + s.name + "'");
    if (!c) ::fail("seed " + s.name + " does not parse: " + c.status().message());
    if (Status v = validate_config(*c); !v) ::fail("seed " + s.name + " is not valid: " + v.message());
  }
  return out;
}
