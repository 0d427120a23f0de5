#include "fs/config/config_keys.h"
#include "provenance/sample_groups.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <type_traits>

#include <spdlog/fmt/fmt.h>

#include "common/units.h"
#include "provenance/dataset_format.h"

namespace dlfs::fs {
namespace {

// Where a key's value lives: DAEMON(fuse_threads), DATASET(plan.seed).
#define DAEMON(member) [](const Target& t) -> Field { return &t.daemon->member; }
#define DATASET(member) [](const Target& t) -> Field { return &t.dataset->member; }

// A table entry under construction: Key(...).range(1, 4096).note("...").
struct Key {
  ConfigKey k;
  Key(Section section, const char* name, const char* flag, Kind kind, Field (*field)(const Target&),
      std::string help) {
    k.section = section;
    k.key = name;
    k.flag = flag;
    k.kind = kind;
    k.field = field;
    k.help = std::move(help);
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
  Key& at_least(uint64_t bytes) {
    k.min_bytes = bytes;
    return *this;
  }
  Key& choices(std::vector<std::string> choices) {
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
  Key& only_format(std::string format) {
    k.only_format = std::move(format);
    return *this;
  }
  Key& clears(std::string other) {
    k.clears = std::move(other);
    return *this;
  }
  operator ConfigKey() const { return k; }  // NOLINT: the table lists Keys
};

// "Dataset format: files (a file a sample), fixed (...), ...": the registry's
// names and summaries (provenance/dataset_formats.cc).
std::string format_help() {
  std::string help = "Dataset format:";
  const auto& formats = provenance::dataset_formats();
  for (size_t i = 0; i < formats.size(); ++i)
    help += std::string(i == 0 ? " " : i + 1 == formats.size() ? " or " : ", ") + std::string(formats[i]->name()) +
            " (" + std::string(formats[i]->summary()) + ")";
  return help;
}

std::vector<std::string> format_names() {
  std::vector<std::string> names;
  for (const auto* f : provenance::dataset_formats()) names.emplace_back(f->name());
  return names;
}

std::vector<ConfigKey> daemon_keys() {
  const Section s = Section::daemon;
  return {
      Key(s, "mountpoint", "-m,--mountpoint", Kind::text, DAEMON(mountpoint),
          "Where to mount (an existing, empty directory)")
          .required(),
      Key(s, "control_socket", "--control-socket", Kind::text, DAEMON(control_socket), "Control socket path")
          .note("/run/dlfs/<mountpoint>.sock"),
      Key(s, "log_level", "--log-level", Kind::text, DAEMON(log_level), "trace, debug, info, warn, error or off"),
      Key(s, "fuse_threads", "--fuse-threads", Kind::integer, DAEMON(fuse_threads), "Most FUSE worker threads")
          .range(1, 4096),
      Key(s, "allow_other", "", Kind::boolean, DAEMON(allow_other),
          "Let every user read the mount (when dlfsd runs as root)"),
      Key(s, "entry_timeout_s", "", Kind::number, DAEMON(entry_timeout_s),
          "Seconds the kernel may cache names (the tree is immutable)"),
      Key(s, "attr_timeout_s", "", Kind::number, DAEMON(attr_timeout_s), "Seconds the kernel may cache attributes"),
      Key(s, "passthrough", "--passthrough", Kind::choice, DAEMON(passthrough),
          "While a dataset loads, the kernel reads raw files not in memory yet straight from their backend files "
          "(FUSE passthrough: Linux 6.9+, dlfsd as root; else ignored): auto (datasets on local file systems; not "
          "on NFS, Lustre, GPFS and other network file systems, where the kernel's extra open of each file is a "
          "server round trip), on, off. Such an open file is checked against the scan when opened, not at each "
          "read (docs/architecture.md, passthrough)")
          .choices({"auto", "on", "off"}),
      Key(s, "fuse_uring", "--fuse-uring", Kind::choice, DAEMON(fuse_uring),
          "FUSE requests reach dlfsd through one io_uring queue per CPU, answered on the CPU that sent them, "
          "instead of /dev/fuse (Linux 6.14+): auto (when the kernel offers it: "
          "/sys/module/fuse/parameters/enable_uring is Y), on (also sets that parameter, as root), off "
          "(fs/kernel/wire/fuse_uring.h)")
          .choices({"auto", "on", "off"}),
      Key(s, "raw_overlay", "--raw-overlay", Kind::choice, DAEMON(raw_overlay),
          "Each dataset's raw/ under a read-only overlayfs mounted over it (as root), whose files answer ioctls "
          "in the kernel: Python's open() then costs no round trip to dlfsd for its isatty(), which the kernel "
          "forwards on every FUSE file. auto (as root, with allow_other), off (fs/kernel/raw_overlay.h)")
          .choices({"auto", "off"}),
      Key(s, "view_drop_behind", "--view-drop-behind", Kind::size, DAEMON(view_drop_behind),
          "Page cache an epoch view file keeps behind a reader that reads it in order; what lies further behind "
          "is dropped as the reader moves on (a view is read once per epoch, and its bytes stay in dlfsd's "
          "memory: the page cache would hold the dataset a second time). 0 keeps every page, as for other files "
          "(fs/kernel/drop_behind.h)"),
      Key(s, "raw_push_size", "--raw-push-size", Kind::size, DAEMON(raw_push_size),
          "Raw files up to this size, in memory, are put in the kernel's page cache when a reader's open() asks "
          "isatty() of them (Python's open() does, right before it reads; the kernel forwards that ioctl to dlfsd "
          "at every open), or, under the raw overlay, when the overlay looks them up: the read that follows then "
          "costs no request. Once per kernel inode; 0: never"),
      Key(s, "serve_despite_failed_datasets", "", Kind::boolean, DAEMON(serve_despite_failed_datasets),
          "A dataset whose scan fails after the mount answers EIO and the others stay served, instead of dlfsd "
          "unmounting and exiting 2 (one node only; docs/stats.md, dataset states)"),
  };
}

std::vector<ConfigKey> cache_keys() {
  const Section s = Section::cache;
  return {
      Key(s, "memory_budget", "--memory-budget", Kind::share_or_size, DAEMON(memory_budget),
          "Memory for dataset bytes: a size (16GiB) or a share of RAM (50%)"),
      Key(s, "extent_size", "--extent-size", Kind::size, DAEMON(extent_size),
          "Unit of loading, residency and checksums")
          .at_least(4096),
      Key(s, "loader_threads", "--loader-threads", Kind::integer, DAEMON(loader_threads),
          "Backend reads in flight while loading")
          .range(1, 4096),
      Key(s, "load_staging", "--load-staging", Kind::choice, DAEMON(load_staging),
          "While readers read the backend for bytes not loaded yet, read the loader's next extents ahead into the "
          "page cache (8 files in flight) and load them from there afterwards, instead of loading beside the "
          "readers and reading those bytes twice: auto (datasets on local file systems, where it was measured), "
          "on, off (cache/load_stager.h)")
          .choices({"auto", "on", "off"}),
      Key(s, "read_size", "--read-size", Kind::size, DAEMON(read_size), "Largest single backend read").at_least(4096),
      Key(s, "backend_requests", "--backend-requests", Kind::integer, DAEMON(backend_requests),
          "Backend reads in flight per dataset at most, from any source (loader, rounds, reads of samples not in "
          "memory): LMDBIO's staggering")
          .range(0, 4096)
          .note("0 (no bound)"),
  };
}

// docs/deploy.md
std::vector<ConfigKey> cluster_keys() {
  const Section s = Section::cluster;
  return {
      Key(s, "peers", "--peers", Kind::list, DAEMON(peers),
          "The job's daemons, host[:port] each, index = rank (the flag: comma-separated)")
          .note("from Slurm (SLURM_JOB_NODELIST, SLURM_NODEID), else a cluster of one"),
      Key(s, "rank", "--rank", Kind::integer, DAEMON(rank), "This node's index in the peers")
          .range(-1, 65535)
          .note("-1 (found from this host's addresses)"),
      Key(s, "listen", "--listen", Kind::text, DAEMON(listen), "Address of the UCX listener").note("every address"),
      Key(s, "port", "--port", Kind::integer, DAEMON(port), "UCX listener port, and the port of peers given without one")
          .range(1, 65535),
      Key(s, "token_file", "--token-file", Kind::text, DAEMON(token_file),
          "The job's shared secret: a file only its owner can read; this or token is required with more than one "
          "node (the flag also drops the file's token)")
          .note("none")
          .clears("token"),
      Key(s, "token", "", Kind::text, DAEMON(token),
          "The job's shared secret inline, instead of token_file (discouraged: configs get copied)")
          .note("none"),
      Key(s, "heartbeat_ms", "", Kind::integer, DAEMON(heartbeat_ms),
          "Each node pings every peer this often (milliseconds)")
          .range(1),
      Key(s, "down_after_ms", "", Kind::integer, DAEMON(down_after_ms),
          "A peer that has not answered for this long is down (milliseconds)")
          .range(1),
      Key(s, "get_timeout_ms", "", Kind::integer, DAEMON(get_timeout_ms),
          "A remote read slower than this is redone from the backend (milliseconds)")
          .range(1),
      Key(s, "gets", "", Kind::choice, DAEMON(gets),
          "How remote reads go: auto (one-sided ucp_get where a transport reads so, as shared memory or RDMA; "
          "DLFS's own request/reply messages where UCX would emulate the get, as over TCP, so that a peer "
          "killed mid-read cannot take this node down), rma (always ucp_get), am (always messages)")
          .choices({"auto", "rma", "am"}),
  };
}

// The format and the epoch views' plan (docs/views.md).
std::vector<ConfigKey> dataset_keys() {
  const Section s = Section::dataset;
  return {
      Key(s, "name", "-n,--name", Kind::text, DATASET(name), "Dataset name in the mount")
          .required()
          .note("the backend directory's name"),
      Key(s, "backend", "-b,--backend", Kind::text, DATASET(backend),
          "Dataset directory on backend storage (the flag: one-dataset mode)")
          .required(),
      Key(s, "format", "--format", Kind::choice, DATASET(format.format), format_help()).choices(format_names()),
      Key(s, "record_size", "--record-size", Kind::size, DATASET(format.record_size),
          "fixed: bytes per record (e.g. 3073)"),
      Key(s, "header_bytes", "--header-bytes", Kind::size, DATASET(format.header_bytes),
          "fixed: bytes to skip at the start of every file"),
      Key(s, "group_by", "--group-by", Kind::choice, DATASET(format.group_by),
          "files, tar: consecutive files (tar members) with one key are one sample (first-dot: the "
          "WebDataset key, n0153/x of n0153/x.jpg and n0153/x.cls; tar needs one)")
          .choices(provenance::group_rule_names()),
      Key(s, "seed", "--seed", Kind::integer, DATASET(plan.seed),
          "Job seed of the epoch views: same seed, same orders on every node and restart")
          .range(0),
      Key(s, "remainder", "--remainder", Kind::choice, DATASET(plan.remainder),
          "When samples do not divide by W: pad (wrap, as DistributedSampler) or drop")
          .choices({"pad", "drop"}),
      Key(s, "shuffle_ratio", "--shuffle-ratio", Kind::number, DATASET(plan.shuffle_ratio),
          "R: share of the dataset resident per round (0 < R <= 1)")
          .within(0, 1)
          .note("0 (from the memory budget)"),
      Key(s, "round_chunk", "--round-chunk", Kind::size, DATASET(plan.round_chunk),
          "Unit rounds are built and loaded in (chunks of whole samples)")
          .at_least(1),
      Key(s, "min_randomization", "--min-randomization", Kind::number, DATASET(plan.min_randomization),
          "Refuse to start if the randomization level is below this")
          .within(0, 1),
      Key(s, "world_size", "--world-size", Kind::integer, DATASET(plan.world_size),
          "World size shown in epoch listings (any can be opened)")
          .range(1, 65535),
      Key(s, "epochs_listed", "--epochs-listed", Kind::integer, DATASET(plan.epochs_listed),
          "Epochs shown in listings (any can be opened)")
          .range(1, 1000000),
      Key(s, "order", "--order", Kind::choice, DATASET(plan.order),
          "ordered (exactly the plan) or opportunistic (tar streams yield whichever of the next "
          "opportunistic_window planned samples is ready first)")
          .choices({"ordered", "opportunistic"}),
      Key(s, "opportunistic_window", "--opportunistic-window", Kind::integer, DATASET(plan.opportunistic_window),
          "Samples an opportunistic stream may look ahead")
          .range(1, int64_t{1} << 30),
      Key(s, "readahead", "--no-readahead", Kind::boolean, DATASET(plan.readahead),
          "Per-stream read-ahead rings for samples that are not resident")
          .flag_sets(false, "No read-ahead rings: samples that are not resident are read when asked for"),
      Key(s, "lmdb_spot_checks", "", Kind::integer, DATASET(format.lmdb_spot_leaves),
          "Random leaf pages compared with the sidecar's locations at open")
          .range(0, 1000000)
          .only_format("lmdb"),
      Key(s, "tfrecord_skip_bad_files", "", Kind::boolean, DATASET(format.tfrecord_skip_bad_files),
          "A TFRecord file with a bad length CRC or a truncated record is left out of the samples "
          "(logged with file and offset; still in raw/) instead of failing the load")
          .only_format("tfrecord"),
  };
}

#undef DAEMON
#undef DATASET

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

// Copies an int64_t, uint64_t, bool, double, string or list into a member of a
// matching type; a mismatch is a table error (the unit test stores every key).
struct Store {
  const ConfigKey& k;
  template <typename M, typename V>
  Status operator()(M* member, const V& v) const {
    if constexpr (std::is_same_v<M, V>) {
      *member = v;
    } else if constexpr (std::is_integral_v<M> && !std::is_same_v<M, bool> && std::is_integral_v<V> &&
                         !std::is_same_v<V, bool>) {
      *member = static_cast<M>(v);
    } else {
      return Status(EINVAL, "internal: config key '" + k.key + "' does not match its member's type");
    }
    return Status::ok();
  }
};

}  // namespace

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> table = [] {
    std::vector<ConfigKey> all;
    for (auto part : {daemon_keys(), cache_keys(), cluster_keys(), dataset_keys()})
      for (auto& k : part) all.push_back(std::move(k));
    return all;
  }();
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
  return std::visit(Store{k}, k.field(target), v);
}

Value read_value(const ConfigKey& k, const Target& target) {
  return std::visit(
      [&k](auto* member) -> Value {
        using M = std::remove_pointer_t<decltype(member)>;
        if constexpr (std::is_same_v<M, uint32_t>) return int64_t{*member};
        else if constexpr (std::is_same_v<M, uint64_t>) {
          if (k.kind == Kind::integer) return static_cast<int64_t>(*member);
          return *member;
        } else return *member;
      },
      k.field(target));
}

void reset_value(const ConfigKey& k, const Target& target) {
  DaemonConfig daemon;
  DatasetConfig dataset;
  std::visit(
      [&](auto* member) {
        using P = decltype(member);
        *member = *std::get<P>(k.field(Target{&daemon, &dataset}));
      },
      k.field(target));
}

Status in_context(const Status& s, const std::string& context) {
  if (s.is_ok()) return s;
  if (s.message().rfind("must ", 0) == 0) return Status(s.err(), context + " " + s.message());
  return s.with_context(context);
}

namespace {

std::string type_text(const ConfigKey& k) {
  switch (k.kind) {
    case Kind::text: return "string";
    case Kind::choice: {
      std::string out = "one of";
      for (size_t i = 0; i < k.choices.size(); ++i) out += (i ? ", `" : " `") + k.choices[i] + "`";
      return out;
    }
    case Kind::share_or_size: return "size or share (`50%`)";
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
    std::string meaning = k.help;
    if (!k.only_format.empty()) meaning += " (format " + k.only_format + " only)";
    out += "| `" + section + "` | `" + k.key + "` | " + flag_cell(k) + " | " + type_text(k) + " | " + default_cell(k) +
           " | " + cell(meaning) + " |\n";
  }
  return out;
}

}  // namespace dlfs::fs
