// ViewFormat: one kind of epoch view file under <dataset>/epochs/<e>/<W>/,
// named "<r><extension>" (".tar", ".bin", ".index", or "" for the directory
// view <r>/). A format owns its extension, whether a dataset has it, its size
// and how an open file of it reads (docs/views.md). The per-open handle is an
// OpenFile with its own read().
//
// Formats are registered in fs/view_formats.cc, one line each; listings show
// them in registration order. Adding a view format: one new file
// (view_<name>.cc: a ViewFormat and its OpenFile), its name in
// fs/meson.build, and one line in view_formats.cc (docs/architecture.md,
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
#include "fs/epoch_view.h"

namespace dlfs::fs {

class Dataset;

// An open file: generated text, a view stream, a directory entry.
// read() may be called concurrently for one handle (the kernel issues
// parallel reads); implementations serialise what they must.
class OpenFile {
 public:
  virtual ~OpenFile() = default;
  // Appends up to `size` bytes at `offset` to `out` (short at the end).
  virtual Status read(uint64_t offset, uint64_t size, cache::Gather& out) = 0;
  // The dataset whose view this is (null for daemon files such as stats).
  virtual const Dataset* dataset() const { return nullptr; }
};

// Generated content fixed at open (stats, .index): read with direct I/O.
class SnapshotFile final : public OpenFile {
 public:
  SnapshotFile(std::string text, const Dataset* ds = nullptr) : text_(std::move(text)), ds_(ds) {}
  Status read(uint64_t offset, uint64_t size, cache::Gather& out) override;
  const Dataset* dataset() const override { return ds_; }

 private:
  const std::string text_;
  const Dataset* ds_;
};

// How the kernel should treat an open file, and the handle that reads it.
struct OpenResult {
  bool keep_cache = false;  // immutable data: keep the page cache across opens
  bool direct_io = false;   // generated content: bypass the page cache
  std::unique_ptr<OpenFile> file;  // null: a raw file (read by inode, nothing kept per open)
};

class ViewFormat {
 public:
  virtual ~ViewFormat() = default;
  virtual std::string_view extension() const = 0;  // "" for a directory view
  virtual bool is_directory() const { return false; }
  // Whether datasets like this one have the view (.bin: fixed-size samples only).
  virtual bool applies_to(const Dataset& /*ds*/) const { return true; }
  // File views.
  virtual uint64_t size(const EpochView& /*view*/) const { return 0; }  // 0: generated at open
  virtual Result<OpenResult> open(const std::shared_ptr<const EpochView>& view) const;
  // Directory views: entries 0..count()-1 are files.
  virtual std::string entry_name(const EpochView& /*view*/, uint64_t /*k*/) const { return {}; }
  virtual std::optional<uint64_t> find_entry(const EpochView& /*view*/, std::string_view /*name*/) const {
    return std::nullopt;
  }
  virtual uint64_t entry_size(const EpochView& /*view*/, uint64_t /*k*/) const { return 0; }
  virtual Result<OpenResult> open_entry(const std::shared_ptr<const EpochView>& view, uint64_t k) const;
};

// Every registered format, in listing order; at most kMaxViewFormats.
const std::vector<const ViewFormat*>& view_formats();
// The format of a view named "<rank><extension>" (nullopt: none is).
std::optional<size_t> view_format_index(std::string_view extension);

}  // namespace dlfs::fs
