// Manifest: the canonical description of a dataset on backend storage.
//
// A manifest holds the backend tree (directories and regular files, sorted by
// name) and the canonical sample list. It also defines the dataset's *byte
// space*: the concatenation of every file's bytes in canonical file order
// (byte-wise sorted relative path, as `find . -type f | LC_ALL=C sort`).
// Stripes, extents and the loader all speak in byte-space offsets; a file is
// the byte range [file_data_offset(f), file_data_offset(f) + file_size(f)).
//
// Formats (provenance/dataset_format.h, one file each: format_*.cc) say
// what the samples are: files (a file a sample), fixed (fixed-length
// records), lmdb (the values of an LMDB environment, located from a sidecar).
// The manifest asks its format's SampleTable for everything about samples.
//
// Memory: structure-of-arrays, names stored once (basenames in one arena),
// samples implicit for `files` and `fixed` (computed, not stored), so a
// manifest costs well under 100 bytes per sample.
//
// Thread safety: immutable after build(); all const methods may be called
// concurrently. One exception: a format whose reads are checked (lmdb) may
// repair_samples() (same lengths, corrected offsets) when a read finds a
// location wrong; sample() then answers from the new ones.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "provenance/format_options.h"

struct stat;

namespace dlfs::provenance {

class SampleTable;  // dataset_format.h

// lmdb: where the value locations came from (logs, stats, dlfs-ctl).
struct LmdbInfo {
  uint32_t file = 0;          // file id of data.mdb
  uint32_t page_size = 0;
  std::string source;         // "sidecar (provenance)", "sidecar (explicit)", "tree walk"
  std::string why_walk;       // why a sidecar was not used ("" if there is none or it was)
  double seconds = 0;         // to get the locations at build()
  uint64_t overflow_values = 0;
};

// Where one sample's bytes are.
struct SampleLocation {
  uint32_t file = 0;       // file id
  uint64_t offset = 0;     // offset inside the file
  uint64_t length = 0;     // bytes
};

// One member of a sample that views show as several (a group of files with
// one key): its own name, and where its bytes are inside the sample's.
struct SampleMember {
  std::string name;     // a relative path, as member_name()
  uint64_t offset = 0;  // from the sample's first byte
  uint64_t length = 0;
  uint32_t file = 0;    // the backend file holding it (mtime in tar headers)
};

// What the scan skipped, for the log and for stats.
struct ScanReport {
  uint64_t skipped_symlinks = 0;
  uint64_t skipped_special = 0;    // fifos, sockets, devices
  uint64_t unreadable = 0;         // entries that could not be stat'ed or opened
  std::vector<std::string> examples;  // first few skipped relative paths, with the reason
};

// What the scan saw of one file: a backend read compares the file it opens
// with this (cache/changed_files.h) so that bytes of another version are
// never served as this one. Size and mtime catch a rewrite, inode and device
// a replacement (rename over it, another filesystem mounted above it).
struct FileIdentity {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t inode = 0;
  uint64_t device = 0;
};

// "" when `now` matches the pin, else what differs, e.g.
// "size 4096 -> 100, mtime 1700000000.000000000 -> 1700000060.250000000"
// (provenance/file_identity.cc).
std::string describe_change(const FileIdentity& pinned, const struct stat& now);

inline constexpr uint32_t kRootDir = 0;

// A backend file's or directory's owner and group, as scanned.
struct Owner {
  uint32_t uid = 0, gid = 0;
  bool operator==(const Owner&) const = default;
};

class Manifest {
 public:
  // Scans `root` (a directory) and builds the manifest. Errors name the path
  // and the problem (missing, not a directory, unreadable, bad record size).
  // `options.format` names the format (an error lists the registered ones).
  static Result<Manifest> build(const std::string& root, const FormatOptions& options,
                                ScanReport* report = nullptr);
  Manifest();
  ~Manifest();
  Manifest(Manifest&&) noexcept;
  Manifest& operator=(Manifest&&) noexcept;

  const std::string& root() const { return root_; }
  const FormatOptions& options() const { return options_; }

  // ---- files (ids 0..file_count()-1, in canonical order) ----
  uint32_t file_count() const { return static_cast<uint32_t>(file_parent_.size()); }
  std::string_view file_name(uint32_t f) const;   // basename
  std::string file_path(uint32_t f) const;        // relative path "a/b/c.jpg"
  uint32_t file_parent(uint32_t f) const { return file_parent_[f]; }
  uint64_t file_size(uint32_t f) const { return file_offset_[f + 1] - file_offset_[f]; }
  uint64_t file_data_offset(uint32_t f) const { return file_offset_[f]; }
  int64_t file_mtime_ns(uint32_t f) const { return file_mtime_ns_[f]; }
  uint32_t file_mode(uint32_t f) const { return file_mode_[f]; }  // permission bits only
  Owner file_owner(uint32_t f) const { return owners_[file_owner_[f]]; }
  // The file as scanned (the pin a backend read is checked against).
  FileIdentity file_identity(uint32_t f) const {
    return {file_size(f), file_mtime_ns_[f], file_inode_[f], devices_[file_device_[f]]};
  }
  // The file containing byte-space offset `data_offset` (< total_bytes()).
  // Zero-length files contain no offset and are never returned.
  uint32_t file_at(uint64_t data_offset) const;
  // Calls fn(file, begin, end) for every non-empty file overlapping the
  // byte-space range [begin, end), in byte-space order, with the overlap.
  template <typename Fn>
  void for_each_file_in(uint64_t begin, uint64_t end, Fn&& fn) const {
    if (begin >= end || begin >= total_bytes()) return;
    for (uint32_t f = file_at(begin); f < file_count() && file_data_offset(f) < end; ++f) {
      const uint64_t fb = file_data_offset(f), fe = fb + file_size(f);
      if (fe > fb && fe > begin) fn(f, std::max(fb, begin), std::min(fe, end));
    }
  }

  // ---- directories (ids 0..dir_count()-1; 0 is the root) ----
  uint32_t dir_count() const { return static_cast<uint32_t>(dir_parent_.size()); }
  std::string_view dir_name(uint32_t d) const;  // "" for the root
  std::string dir_path(uint32_t d) const;       // "" for the root, else "a/b"
  uint32_t dir_parent(uint32_t d) const { return dir_parent_[d]; }  // root's parent is root
  int64_t dir_mtime_ns(uint32_t d) const { return dir_mtime_ns_[d]; }
  uint32_t dir_mode(uint32_t d) const { return dir_mode_[d]; }  // permission bits only
  Owner dir_owner(uint32_t d) const { return owners_[dir_owner_[d]]; }
  std::span<const uint32_t> dir_files(uint32_t d) const;    // file ids, sorted by name
  std::span<const uint32_t> dir_subdirs(uint32_t d) const;  // dir ids, sorted by name
  std::optional<uint32_t> find_file(uint32_t d, std::string_view name) const;
  std::optional<uint32_t> find_subdir(uint32_t d, std::string_view name) const;

  // ---- samples (ids 0..sample_count()-1, canonical order; from the format) ----
  uint64_t sample_count() const { return sample_count_; }
  SampleLocation sample(uint64_t i) const;
  uint64_t sample_data_offset(uint64_t i) const;  // byte-space offset of sample i
  // "a/b/c.jpg" for files; "a/data_batch_1.bin#000123" (record index) for
  // fixed; "data.mdb#000123" (key order index) for lmdb.
  std::string sample_name(uint64_t i) const;
  // A relative path naming sample i in views (tar members, directory entries).
  std::string member_name(uint64_t i) const;
  // Members of sample i (SampleTable::Member): 1 unless samples are groups.
  bool samples_grouped() const;
  uint32_t sample_member_count(uint64_t i) const;
  SampleMember sample_member(uint64_t i, uint32_t j) const;
  // Every sample has this many bytes (fixed; lmdb when all values are one
  // size), else 0: the `.bin` view exists when it is not 0.
  uint64_t fixed_record_size() const;
  const LmdbInfo* lmdb() const;  // nullptr for other formats

  // Per-read integrity (SampleTable): the bytes right before sample i that a
  // read must check (lmdb: 16, an overflow value's page header; else 0), the
  // check (EBADMSG: the location is wrong), a repair from the source of truth
  // (idempotent per generation), and the number of repairs so far.
  uint64_t sample_check_bytes(uint64_t i) const;
  Status check_sample(uint64_t i, std::span<const std::byte> bytes) const;
  Status repair_samples(uint64_t seen_generation, const std::string& why) const;
  uint64_t samples_generation() const;
  // tfrecord: sample i's masked data CRC, checked against its data (SampleTable).
  Result<uint32_t> sample_masked_crc(uint64_t i) const;

  // ---- totals ----
  uint64_t total_bytes() const { return total_bytes_; }  // size of the byte space
  // Heap bytes held by this manifest (for the "bytes per sample" figure).
  uint64_t memory_bytes() const;

 private:
  std::string root_;
  FormatOptions options_;
  uint64_t sample_count_ = 0;
  uint64_t total_bytes_ = 0;

  std::string names_;  // all basenames, back to back (no separators)

  // files, structure of arrays
  std::vector<uint32_t> file_name_off_;   // into names_
  std::vector<uint8_t> file_name_len_;    // NAME_MAX is 255
  std::vector<uint32_t> file_parent_;
  std::vector<uint64_t> file_offset_;     // prefix sum of sizes, file_count()+1 entries
  std::vector<int64_t> file_mtime_ns_;
  std::vector<uint16_t> file_mode_;
  std::vector<uint64_t> file_inode_;
  std::vector<uint16_t> file_device_;     // index into devices_: a tree spans few filesystems
  std::vector<uint64_t> devices_;         // distinct st_dev values, in order of first sight
  std::vector<uint16_t> file_owner_;      // index into owners_: a dataset has few owners
  std::vector<Owner> owners_;             // distinct (uid, gid) pairs, in order of first sight
  std::unique_ptr<SampleTable> samples_;  // the format's

  // directories
  std::vector<uint32_t> dir_name_off_;
  std::vector<uint8_t> dir_name_len_;
  std::vector<uint32_t> dir_parent_;
  std::vector<int64_t> dir_mtime_ns_;
  std::vector<uint32_t> dir_mode_;
  std::vector<uint16_t> dir_owner_;          // index into owners_
  std::vector<uint32_t> dir_files_begin_;    // into dir_file_ids_, size dir_count()+1
  std::vector<uint32_t> dir_file_ids_;
  std::vector<uint32_t> dir_subdirs_begin_;  // into dir_subdir_ids_, size dir_count()+1
  std::vector<uint32_t> dir_subdir_ids_;

  friend struct ManifestBuilder;
};

}  // namespace dlfs::provenance
