// The registry of view formats: one line per format (DLFS_VIEW_FORMATS), in
// the order listings show them for each rank.
#include <cstring>

#include "fs/views/view_format.h"

namespace dlfs::fs {

// X(name): view_<name>.cc defines `const ViewFormat& name##_view()`.
#define DLFS_VIEW_FORMATS(X) \
  X(dir)                     \
  X(index)                   \
  X(tar)                     \
  X(bin)                     \
  X(tfrecord)                \
  X(tfrecord_idx)

#define DLFS_DECLARE_VIEW(name) const ViewFormat& name##_view();
DLFS_VIEW_FORMATS(DLFS_DECLARE_VIEW)
#undef DLFS_DECLARE_VIEW

const std::vector<const ViewFormat*>& view_formats() {
#define DLFS_LIST_VIEW(name) &name##_view(),
  static const std::vector<const ViewFormat*> all = {DLFS_VIEW_FORMATS(DLFS_LIST_VIEW)};
#undef DLFS_LIST_VIEW
  static_assert(kMaxViewFormats >= 6);
  return all;
}

std::optional<size_t> view_format_index(std::string_view extension) {
  const auto& all = view_formats();
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i]->extension() == extension) return i;
  return std::nullopt;
}

Status ViewFormat::read(const ViewStream&, uint64_t, uint64_t, cache::Gather&) const {
  return Status(EISDIR, "is a directory");
}

Result<std::unique_ptr<OpenFile>> ViewFormat::open(const std::shared_ptr<const EpochView>&) const {
  return Status(EINVAL, "this view format has no per-lookup streams");
}

Status ViewFormat::read_entry(const ViewStream&, uint64_t, uint64_t, uint64_t, cache::Gather&) const {
  return Status(ENOENT, "no such entry");
}

Status SnapshotFile::read(uint64_t offset, uint64_t size, cache::Gather& out) {
  if (offset >= text_.size()) return Status::ok();
  out.add_ref(text_.data() + offset, std::min<uint64_t>(size, text_.size() - offset));
  return Status::ok();
}

}  // namespace dlfs::fs
