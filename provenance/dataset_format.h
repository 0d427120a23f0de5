// DatasetFormat: what a backend tree's samples are. A format turns the
// scanned tree (a Manifest: files, directories, the byte space) into a
// SampleTable for one dataset: where each sample's bytes are, what it is
// called, and what a read must check before serving it.
//
// Formats are registered in provenance/dataset_formats.cc, one line each;
// `format = "<name>"` in a dataset's config picks one. Adding a format: one
// new file (format_<name>.cc: a DatasetFormat and its SampleTable), its name
// in provenance/meson.build, and one line in dataset_formats.cc
// (docs/internals.md, "Adding a dataset format").
//
// Thread safety: a SampleTable is immutable once made, except that a format
// whose reads are checked may repair() its locations (same lengths) while
// readers use them; at() then answers from the new ones.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "provenance/manifest.h"

namespace dlfs::provenance {

// One dataset's samples, in canonical order (ids 0..count()-1). Methods take
// the tree they were made from: a table stores only what the tree does not
// already hold (a manifest costs well under 100 bytes per sample).
class SampleTable {
 public:
  virtual ~SampleTable() = default;
  virtual uint64_t count() const = 0;
  virtual SampleLocation at(const Manifest& tree, uint64_t i) const = 0;
  // The canonical name, for the .index view and logs: "a/b/c.jpg",
  // "a/data_batch_1.bin#000123" (record index), "data.mdb#000123" (key order).
  virtual std::string name(const Manifest& tree, uint64_t i) const = 0;
  // A relative path naming the sample inside views (tar members, directory
  // entries): "a/b/c.jpg", "a/data_batch_1.bin/00000123.bin".
  virtual std::string member_name(const Manifest& tree, uint64_t i) const = 0;
  // Samples made of several members (groups of files with one key): views
  // show member j of sample i under its own name. A sample's bytes are its
  // members' bytes back to back. Default: one member, the whole sample.
  virtual bool grouped() const { return false; }
  virtual uint32_t member_count(uint64_t /*i*/) const { return 1; }
  virtual SampleMember member(const Manifest& tree, uint64_t i, uint32_t j) const;
  // Every sample has this many bytes (the .bin view exists), else 0.
  virtual uint64_t fixed_size() const { return 0; }

  // Per-read integrity. check_bytes(i) bytes right before sample i are read
  // and passed to check() before any byte of the sample is served; EBADMSG
  // means "the location is wrong": the reader then calls repair() once (with
  // the generation it saw) and retries from the corrected location.
  virtual uint64_t check_bytes(uint64_t /*i*/) const { return 0; }
  virtual Status check(uint64_t /*i*/, std::span<const std::byte> /*bytes*/) const { return Status::ok(); }
  virtual Status repair(uint64_t /*seen_generation*/, const std::string& why) const {
    return Status(EIO, why);
  }
  // Repairs so far: while 0, data placed from the original locations (round
  // buffers, read-ahead slots) is valid.
  virtual uint64_t generation() const { return 0; }
  // tfrecord: the masked CRC32C stored after sample i's data, returned only
  // once it matches the data (the .tfrecord view's record footers). ENOTSUP
  // for formats that store none.
  virtual Result<uint32_t> masked_data_crc(uint64_t /*i*/) const {
    return Status(ENOTSUP, "this dataset format stores no data CRCs");
  }

  virtual const LmdbInfo* lmdb() const { return nullptr; }  // lmdb: where the locations came from
  virtual uint64_t memory_bytes() const = 0;                 // heap bytes held
};

class DatasetFormat {
 public:
  virtual ~DatasetFormat() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view summary() const = 0;  // one line, for --help and docs
  // The options this format reads (FormatOptions keys, such as "record_size"),
  // beyond those every format reads (format). Other formats must leave them
  // at their defaults: check_format_options() refuses them.
  virtual std::vector<std::string_view> options() const { return {}; }
  // Checks of the values of the format's own options; errors name the option.
  virtual Status check_options(const FormatOptions& /*options*/) const { return Status::ok(); }
  // The format's own defaults where an option was left at the shared one
  // (tar: group_by first-dot, WebDataset's key rule).
  virtual void apply_defaults(FormatOptions& /*options*/) const {}
  // Errors name the file and what is wrong with it.
  virtual Result<std::unique_ptr<SampleTable>> samples(const Manifest& tree, const FormatOptions& options) const = 0;
};

// Every registered format, in registration order.
const std::vector<const DatasetFormat*>& dataset_formats();
// The format called `name`; the error lists the registered names.
Result<const DatasetFormat*> find_dataset_format(std::string_view name);

// The options' format exists, every option of another format is left at its
// default, and the format's own checks pass. Errors name the option:
// "group_by applies to formats 'files' and 'tar' only, not to 'fixed'".
Status check_format_options(const FormatOptions& options);
// The format's defaults (DatasetFormat::apply_defaults), for a dataset's configuration.
void apply_format_defaults(FormatOptions& options);
// "" if `format` reads option `key` (or every format does), else why not:
// "applies to format 'fixed' only, not to 'files'".
std::string foreign_option(const DatasetFormat& format, std::string_view key);
// The formats that read option `key`, by name; none if every format does.
std::vector<std::string_view> option_owners(std::string_view key);
// The same as text: "format lmdb", "formats 'files' and 'tar'" (quoted); "" if none.
std::string option_owners_text(std::string_view key, bool quoted);

// For the `format` key: the registered names, and its help ("Dataset
// format: files (a file a sample), fixed (...), ...").
std::vector<std::string> dataset_format_names();
std::string dataset_format_help();

}  // namespace dlfs::provenance
