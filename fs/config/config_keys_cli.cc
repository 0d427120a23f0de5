// dlfsd's flags, made from the config key table (config_keys.h). Kept apart
// from config_keys.cc so that only dlfsd and its tests compile CLI11.
#include <filesystem>

#include <CLI/CLI.hpp>

#include "fs/config/config_keys.h"
#include "fs/config/config_file.h"
#include "provenance/dataset_format.h"

namespace dlfs::fs {
namespace {

const char* group_name(Section section) {
  switch (section) {
    case Section::daemon: return "Daemon ([daemon] in a config file)";
    case Section::cache: return "Cache ([cache])";
    case Section::cluster: return "Cluster ([cluster]; docs/deploy.md)";
    case Section::dataset: return "One dataset (a [[dataset]] in a config file; the flags need --backend)";
  }
  return "Options";
}

std::string type_name(const ConfigKey& k) {
  if (k.kind == Kind::choice) {
    std::string out;
    for (const auto& c : k.choices) out += (out.empty() ? "{" : ",") + c;
    return out + "}";
  }
  switch (k.kind) {
    case Kind::integer: return "INT";
    case Kind::number: return "FLOAT";
    case Kind::size:
    case Kind::share_or_size: return "SIZE";
    case Kind::list: return "LIST";
    default: return "TEXT";
  }
}

// Breaks `text` at spaces into lines of at most `width` characters; CLI11
// indents the lines after the first under the description column.
std::string wrap(const std::string& text, size_t width = 80) {
  std::string out;
  size_t line = 0;
  for (size_t b = 0; b < text.size();) {
    size_t e = text.find(' ', b);
    if (e == std::string::npos) e = text.size();
    const size_t word = e - b;
    if (line > 0 && line + 1 + word > width) {
      out += '\n';
      line = 0;
    } else if (line > 0) {
      out += ' ';
      ++line;
    }
    out += text.substr(b, word);
    line += word;
    b = e + 1;
  }
  return out;
}

// The flag's --help text: its meaning and its default.
std::string flag_description(const ConfigKey& k) {
  if (!k.flag_help.empty()) return wrap(k.flag_help);
  std::string text = meaning(k);
  if (!k.required || !k.default_note.empty()) text += " (default: " + default_text(k) + ")";
  return wrap(text);
}

bool given(const ConfigFlags& flags, size_t i) { return flags.option[i] && flags.option[i]->count() > 0; }

Status apply_flag(const ConfigKey& k, const std::string& text, const Target& target) {
  const std::string context = long_flag(k);
  Value value = k.flag_sets;
  if (k.kind != Kind::boolean) {
    auto parsed = value_from_text(k, text);
    if (!parsed) return in_context(parsed.status(), context);
    value = std::move(parsed).value();
  }
  DLFS_RETURN_IF_ERROR(in_context(check_value(k, value), context));
  DLFS_RETURN_IF_ERROR(store_value(k, value, target));
  if (!k.clears.empty())
    if (const ConfigKey* other = find_config_key(k.section, k.clears)) reset_value(*other, target);
  return Status::ok();
}

// The one dataset of --backend and the dataset flags. Its name defaults to
// the backend directory's ("/data/imagenet/" -> "imagenet").
Result<DatasetConfig> dataset_from_flags(const ConfigFlags& flags) {
  DatasetConfig d;
  const auto& keys = config_keys();
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i].section == Section::dataset && given(flags, i))
      DLFS_RETURN_IF_ERROR(apply_flag(keys[i], flags.text[i], Target{nullptr, &d}));
  if (d.name.empty()) {
    std::filesystem::path backend = std::filesystem::path(d.backend).lexically_normal();
    d.name = backend.filename().string();
    if (d.name.empty()) d.name = backend.parent_path().filename().string();
  }
  return d;
}

}  // namespace

void add_config_flags(CLI::App& app, ConfigFlags& flags) {
  const auto& keys = config_keys();
  flags.text.assign(keys.size(), "");  // options keep references into it: no resizing later
  flags.option.assign(keys.size(), nullptr);
  for (size_t i = 0; i < keys.size(); ++i) {
    const ConfigKey& k = keys[i];
    if (k.flag.empty()) continue;
    const std::string description = flag_description(k);
    CLI::Option* o = k.kind == Kind::boolean ? app.add_flag(k.flag, description)
                                             : app.add_option(k.flag, flags.text[i], description);
    if (k.kind != Kind::boolean) o->type_name(type_name(k));
    o->group(group_name(k.section));
    flags.option[i] = o;
  }
}

Status apply_config_flags(const ConfigFlags& flags, DaemonConfig& config) {
  const auto& keys = config_keys();
  const ConfigKey* dataset_flag = nullptr;  // a dataset flag given
  bool backend = false;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!given(flags, i)) continue;
    if (keys[i].section != Section::dataset) {
      DLFS_RETURN_IF_ERROR(apply_flag(keys[i], flags.text[i], Target{&config, nullptr}));
    } else {
      backend = backend || keys[i].key == "backend";
      if (!dataset_flag || dataset_flag->key == "backend") dataset_flag = &keys[i];
    }
  }
  if (!dataset_flag) return Status::ok();
  if (!backend)
    return Status(EINVAL, long_flag(*dataset_flag) +
                              " needs --backend: the dataset flags describe one dataset (with --config, set "
                              "them in a [[dataset]] section)");
  DLFS_ASSIGN_OR_RETURN(DatasetConfig d, dataset_from_flags(flags));
  provenance::apply_format_defaults(d.format);  // e.g. tar: WebDataset's key rule
  config.datasets.push_back(std::move(d));
  return Status::ok();
}

Result<DaemonConfig> config_from_file_and_flags(const std::string& path, const ConfigFlags& flags) {
  DaemonConfig config;
  if (!path.empty()) {
    auto loaded = load_config_file(path);
    if (!loaded) return loaded.status();
    config = std::move(loaded).value();
  }
  DLFS_RETURN_IF_ERROR(apply_config_flags(flags, config));
  return config;
}

}  // namespace dlfs::fs
