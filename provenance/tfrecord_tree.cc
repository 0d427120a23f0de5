#include "provenance/tfrecord_tree.h"

#include <fcntl.h>

#include "common/unique_fd.h"

namespace dlfs::provenance::tfrecord {
namespace {

// The records file f's index gives, or the index's problem (ENOENT: none).
Result<std::vector<Record>> read_index(const Manifest& tree, uint32_t f) {
  const auto idx = tree.find_file(tree.file_parent(f), std::string(tree.file_name(f)) + ".idx");
  if (!idx) return Status(ENOENT, "no index");
  const std::string path = tree.root() + "/" + tree.file_path(*idx);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::from_errno(errno, "opening " + path);
  std::string text(tree.file_size(*idx), '\0');
  DLFS_RETURN_IF_ERROR(read_exact(fd.get(), std::as_writable_bytes(std::span(text)), 0, path, "the index"));
  return parse_index(text, tree.file_size(f), path);
}

}  // namespace

bool is_index(const Manifest& tree, uint32_t f) {
  const std::string_view name = tree.file_name(f);
  return name.size() > 4 && name.ends_with(".idx") &&
         tree.find_file(tree.file_parent(f), name.substr(0, name.size() - 4)).has_value();
}

Result<std::vector<File>> locate_files(const Manifest& tree, bool use_indexes, std::vector<std::string>* skipped) {
  std::vector<File> files;
  for (uint32_t f = 0; f < tree.file_count(); ++f) {
    if (is_index(tree, f)) continue;
    File file{f, tree.root() + "/" + tree.file_path(f), {}, false, {}};
    if (use_indexes) {
      auto indexed = read_index(tree, f);
      if (indexed) {
        file.records = std::move(indexed).value();
        file.indexed = true;
      } else if (indexed.status().err() != ENOENT) {
        file.why_scanned = indexed.status().message();
      }
    }
    if (!file.indexed) {
      UniqueFd fd(::open(file.path.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd.valid()) return Status::from_errno(errno, "opening " + file.path);
      auto scanned = scan(fd.get(), tree.file_size(f), file.path);
      if (!scanned && skipped && scanned.status().err() == EIO) {
        skipped->push_back(scanned.status().message());
        continue;
      }
      if (!scanned) return scanned.status();
      file.records = std::move(scanned).value();
    }
    files.push_back(std::move(file));
  }
  return files;
}

}  // namespace dlfs::provenance::tfrecord
