// The registry of dataset formats: one line per format (DLFS_DATASET_FORMATS).
#include "provenance/dataset_format.h"

#include <algorithm>

namespace dlfs::provenance {

// X(name): format_<name>.cc defines `const DatasetFormat& name##_format()`.
#define DLFS_DATASET_FORMATS(X) \
  X(files)                      \
  X(fixed)                      \
  X(lmdb)                       \
  X(tfrecord)                   \
  X(tar)

#define DLFS_DECLARE_FORMAT(name) const DatasetFormat& name##_format();
DLFS_DATASET_FORMATS(DLFS_DECLARE_FORMAT)
#undef DLFS_DECLARE_FORMAT

const std::vector<const DatasetFormat*>& dataset_formats() {
#define DLFS_LIST_FORMAT(name) &name##_format(),
  static const std::vector<const DatasetFormat*> all = {DLFS_DATASET_FORMATS(DLFS_LIST_FORMAT)};
#undef DLFS_LIST_FORMAT
  return all;
}

SampleMember SampleTable::member(const Manifest& tree, uint64_t i, uint32_t) const {
  const SampleLocation at_i = at(tree, i);
  return {member_name(tree, i), 0, at_i.length, at_i.file};
}

Result<const DatasetFormat*> find_dataset_format(std::string_view name) {
  std::string names;
  for (const DatasetFormat* f : dataset_formats()) {
    if (f->name() == name) return f;
    names += (names.empty() ? "" : ", ") + std::string(f->name());
  }
  return Status(EINVAL, "unknown dataset format '" + std::string(name) + "' (use " + names + ")");
}

std::vector<std::string_view> option_owners(std::string_view key) {
  std::vector<std::string_view> owners;
  for (const DatasetFormat* f : dataset_formats()) {
    const auto own = f->options();
    if (std::find(own.begin(), own.end(), key) != own.end()) owners.push_back(f->name());
  }
  return owners;
}

std::string option_owners_text(std::string_view key, bool quoted) {
  const auto owners = option_owners(key);
  if (owners.empty()) return "";
  const std::string q = quoted ? "'" : "";
  std::string text = owners.size() == 1 ? "format " : "formats ";
  for (size_t i = 0; i < owners.size(); ++i)
    text += (i == 0 ? "" : i + 1 == owners.size() ? " and " : ", ") + q + std::string(owners[i]) + q;
  return text;
}

std::string foreign_option(const DatasetFormat& format, std::string_view key) {
  const auto owners = option_owners(key);
  if (owners.empty() || std::find(owners.begin(), owners.end(), format.name()) != owners.end()) return "";
  return "applies to " + option_owners_text(key, true) + " only, not to '" + std::string(format.name()) + "'";
}

// An option is set when it differs from its default: FormatOptions made in
// code (tools, tests) say no more than that.
Status check_format_options(const FormatOptions& options) {
  DLFS_ASSIGN_OR_RETURN(const DatasetFormat* format, find_dataset_format(options.format));
  const FormatOptions defaults;
#define DLFS_REFUSE_FOREIGN(member, ...)                                 \
  if (!(options.member == defaults.member))                              \
    if (std::string why = foreign_option(*format, #member); !why.empty()) \
      return Status(EINVAL, #member " " + why);
  DLFS_FORMAT_KEYS(DLFS_REFUSE_FOREIGN)
#undef DLFS_REFUSE_FOREIGN
  return format->check_options(options);
}

void apply_format_defaults(FormatOptions& options) {
  if (auto format = find_dataset_format(options.format); format.is_ok()) (*format)->apply_defaults(options);
}

std::vector<std::string> dataset_format_names() {
  std::vector<std::string> names;
  for (const DatasetFormat* f : dataset_formats()) names.emplace_back(f->name());
  return names;
}

std::string dataset_format_help() {
  std::string help = "Dataset format:";
  const auto& formats = dataset_formats();
  for (size_t i = 0; i < formats.size(); ++i)
    help += std::string(i == 0 ? " " : i + 1 == formats.size() ? " or " : ", ") + std::string(formats[i]->name()) +
            " (" + std::string(formats[i]->summary()) + ")";
  return help;
}

}  // namespace dlfs::provenance
