// ViewFormat: one kind of epoch view file under <dataset>/epochs/<e>/<W>/,
// named "<r><extension>" (".tar", ".bin", ".index", or "" for the directory
// view <r>/). A format owns its extension, whether a dataset has it, its size
// and how it reads (docs/views.md), by inode: there is no per-open handle.
//
// Formats are registered in fs/views/view_formats.cc, one line each; listings show
// them in registration order. Adding a view format: one new file
// (view_<name>.cc: a ViewFormat), its name in
// the views room in fs/meson.build, and one line in view_formats.cc (docs/internals.md,
// "Adding a view format").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/gather.h"
#include "common/status.h"
#include "fs/views/epoch_view.h"

namespace dlfs::fs {

class Dataset;

// A generated file's content (fs/namespace/generated_files.h): stats text, an
// opportunistic stream. read() may be called concurrently (the kernel issues
// parallel reads); implementations serialise what they must.
class OpenFile {
 public:
  virtual ~OpenFile() = default;
  // Appends up to `size` bytes at `offset` to `out` (short at the end).
  virtual Status read(uint64_t offset, uint64_t size, cache::Gather& out) = 0;
  // The dataset whose view this is (null for daemon files such as stats).
  virtual const Dataset* dataset() const { return nullptr; }
};

// Text fixed when it was generated (stats).
class SnapshotFile final : public OpenFile {
 public:
  explicit SnapshotFile(std::string text) : text_(std::move(text)) {}
  Status read(uint64_t offset, uint64_t size, cache::Gather& out) override;
  uint64_t size() const { return text_.size(); }

 private:
  const std::string text_;
};

// What every read of one view shares: the view and its read-ahead ring (null
// when the plan turns read-ahead off). Kept per view by the ViewRegistry, so
// reads need nothing per open: the kernel sends no OPEN (fs/kernel/fuse_ops.cc).
struct ViewStream {
  std::shared_ptr<const EpochView> view;
  std::shared_ptr<cache::ReadRing> ring;
};

class ViewFormat {
 public:
  virtual ~ViewFormat() = default;
  virtual std::string_view extension() const = 0;  // "" for a directory view
  virtual bool is_directory() const { return false; }
  // Whether datasets like this one have the view (.bin: fixed-size samples only).
  virtual bool applies_to(const Dataset& /*ds*/) const { return true; }
  // File views: the size, and the bytes, a pure function of the view.
  virtual uint64_t size(const EpochView& /*view*/) const { return 0; }
  // Whether size() costs more than a lookup should (.index: the whole text):
  // listings then give the name without attributes, and the kernel looks it up.
  virtual bool size_costs_work() const { return false; }
  virtual Status read(const ViewStream& s, uint64_t offset, uint64_t size, cache::Gather& out) const;
  // Whether reads follow the view's order and use its read-ahead ring (the
  // streams: .tar, .bin, .tfrecord); the ring is not made for the others.
  virtual bool reads_ahead() const { return true; }
  // Formats whose bytes differ from one reader to the next (an opportunistic
  // stream orders what is ready first): each lookup makes a new generated
  // file (fs/namespace/generated_files.h) from open(); read() is not used.
  virtual bool per_lookup(const Dataset& /*ds*/) const { return false; }
  virtual Result<std::unique_ptr<OpenFile>> open(const std::shared_ptr<const EpochView>& view) const;
  // Directory views: entries 0..count()-1 are files.
  virtual std::string entry_name(const EpochView& /*view*/, uint64_t /*k*/) const { return {}; }
  virtual std::optional<uint64_t> find_entry(const EpochView& /*view*/, std::string_view /*name*/) const {
    return std::nullopt;
  }
  virtual uint64_t entry_size(const EpochView& /*view*/, uint64_t /*k*/) const { return 0; }
  virtual Status read_entry(const ViewStream& s, uint64_t k, uint64_t offset, uint64_t size,
                            cache::Gather& out) const;
};

// Every registered format, in listing order; at most kMaxViewFormats.
const std::vector<const ViewFormat*>& view_formats();
// The format of a view named "<rank><extension>" (nullopt: none is).
std::optional<size_t> view_format_index(std::string_view extension);

}  // namespace dlfs::fs
