// The config key table: one row per key dlfsd takes, made in config_keys.cc
// from the key lists (common/key_list.h: fs/config/config.h,
// plan/plan_config.h, provenance/format_options.h). From it come the TOML
// parsing (fs/config/config_file.cc), the dlfsd flags (add_config_flags
// below), validate_config's range checks, and the documented list
// (`dlfsd --config-keys`, docs/configuration.md).
//
// A key's default is the member's value in a default-constructed
// DaemonConfig / DatasetConfig, unless the key gives a note
// (`default_note`: "0: no bound").
//
// Adding a key: docs/internals.md, "Adding a config key".
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"
#include "fs/config/config.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace dlfs::fs {

// [daemon], [cache] and [cluster] keys go into DaemonConfig; [[dataset]] keys
// into the DatasetConfig of each [[dataset]] (or of the one dataset the flags
// describe with --backend).
enum class Section { daemon, cache, cluster, dataset };

enum class Kind {
  text,           // a string
  choice,         // one of `choices`: an enum member by name, or a string (format)
  share_or_size,  // memory_budget: "50%" or a size; kept as text, resolved at start
  boolean,
  integer,        // within [min, max]
  number,         // a double within [lo, hi]
  size,           // bytes: an integer, or text with a unit ("8MiB"); at least min_bytes
  list,           // TOML: an array of strings; a flag: comma-separated
};

// What a key's value is while it travels from TOML or a flag into its member
// (a choice: its name).
using Value = std::variant<std::string, bool, int64_t, uint64_t, double, std::vector<std::string>>;

// The config a key is read from or written to: `daemon` for [daemon],
// [cache] and [cluster] keys, `dataset` for [[dataset]] keys.
struct Target {
  DaemonConfig* daemon = nullptr;
  DatasetConfig* dataset = nullptr;
};

struct ConfigKey {
  Section section = Section::daemon;
  std::string key;              // in TOML
  std::string flag;             // CLI11 names ("-m,--mountpoint"); "" = TOML only
  Kind kind = Kind::text;
  Value (*read)(const Target&) = nullptr;                // the member's value
  bool (*store)(const Target&, const Value&) = nullptr;  // false: the value's type is not the member's
  std::string help;             // one line: the meaning (--help and the docs)
  std::string default_note;     // shown instead of the member's default value
  bool required = false;        // every [[dataset]] must set it (documented for [daemon])
  int64_t min = std::numeric_limits<int64_t>::min();  // Kind::integer
  int64_t max = std::numeric_limits<int64_t>::max();
  double lo = 0;                                       // Kind::number
  double hi = std::numeric_limits<double>::infinity();
  uint64_t min_bytes = 0;                              // Kind::size
  std::vector<std::string> choices;                    // Kind::choice (an enum member: its names)
  // Kind::boolean with a flag: the flag takes no value and sets the key to
  // this ("--no-readahead" sets readahead = false); flag_help says so.
  bool flag_sets = true;
  std::string flag_help;        // --help text when it differs from `help`
  std::string clears;           // set by a flag, also resets this key of the section to its default
};

// Every key, in documentation order: [daemon], [cache], [cluster], [[dataset]].
const std::vector<ConfigKey>& config_keys();
// The key of `section` called `key`, or nullptr.
const ConfigKey* find_config_key(Section section, const std::string& key);

const char* section_name(Section section);  // "daemon", ..., "dataset"
// "must be an integer from 1 to 4096": what a value of `key` has to be.
std::string expectation(const ConfigKey& key);
// The default as text: the note, or the member of a default-constructed config ("8MiB").
std::string default_text(const ConfigKey& key);
// A value as text ("8MiB", "true", "a,b").
std::string value_text(const ConfigKey& key, const Value& value);
// The flag's long name ("--mountpoint"), "" if none.
std::string long_flag(const ConfigKey& key);
// The help, and which formats read the key if not all: "... (format lmdb only)".
std::string meaning(const ConfigKey& key);

// The type as the docs say it ("integer 1..4096", "one of auto, on, off"),
// each literal between `quote`s (Markdown: a backquote).
std::string type_text(const ConfigKey& key, std::string_view quote = "");

// A flag's text as the key's value ("8MiB", "1,2,3" for lists); errors start
// with "must be" or name the text.
Result<Value> value_from_text(const ConfigKey& key, const std::string& text);
// Range and choice checks, shared by TOML, flags and validate_config.
Status check_value(const ConfigKey& key, const Value& value);
// Stores a checked value into the key's member of `target`.
Status store_value(const ConfigKey& key, const Value& value, const Target& target);
// The member's current value.
Value read_value(const ConfigKey& key, const Target& target);
// Resets the key's member to its default.
void reset_value(const ConfigKey& key, const Target& target);
// `context` + " must be ..." or `context` + ": " + detail.
Status in_context(const Status& s, const std::string& context);

// The table as Markdown: section, key, flag, type, default, meaning.
// `dlfsd --config-keys` prints it; docs/configuration.md ends with it.
std::string config_keys_markdown();

// ---- dlfsd flags (config_keys_cli.cc, linked into dlfsd and its tests) ----

// The flags of the table's keys, once CLI11 has parsed them.
struct ConfigFlags {
  std::vector<std::string> text;       // per config_keys() entry: the flag's value
  std::vector<CLI::Option*> option;    // per entry: nullptr without a flag
};

// Adds a CLI11 option for every key with a flag, grouped by section.
void add_config_flags(CLI::App& app, ConfigFlags& flags);

// Applies the flags given over `config` (a config file's, or defaults):
// [daemon], [cache] and [cluster] keys replace the file's values; --backend
// adds one dataset made of the dataset flags (name: the backend directory's
// by default). Dataset flags without --backend are an error.
Status apply_config_flags(const ConfigFlags& flags, DaemonConfig& config);

// The config file at `path` (none if ""), then the flags over it.
Result<DaemonConfig> config_from_file_and_flags(const std::string& path, const ConfigFlags& flags);

}  // namespace dlfs::fs
