// The registry of dataset formats: one line per format (DLFS_DATASET_FORMATS).
#include "provenance/dataset_format.h"

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
