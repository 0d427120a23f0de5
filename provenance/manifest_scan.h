// The directory walk behind Manifest::build: collects every directory and
// regular file below a root without following symlinks. Directories are
// listed by a few threads at once (one directory a work item), so the result
// comes in no particular order; manifest.cc sorts it. Everything else about
// the result (which entries, the report) does not depend on thread timing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "provenance/manifest.h"

namespace dlfs::provenance {

// One regular file, by its basename in its directory's name arena.
struct ScannedFile {
  uint32_t name_off = 0;  // into ScannedDir::names
  uint16_t name_len = 0;  // NAME_MAX is 255
  uint16_t mode = 0;      // permission bits
  uint32_t uid = 0, gid = 0;  // owner and group (who may read it: views, fs/dataset/audience.h)
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t inode = 0;     // st_ino and st_dev: with size and mtime, the identity
  uint64_t device = 0;    // a backend read checks the file against (cache/changed_files.h)
};

// One directory that could be opened and listed, with the regular files
// directly in it (unsorted). Its subdirectories are ScannedDirs of their own.
struct ScannedDir {
  std::string path;  // relative to the root, no leading "./"; "" for the root
  int64_t mtime_ns = 0;
  uint32_t mode = 0;  // permission bits
  uint32_t uid = 0, gid = 0;
  std::string names;  // the files' basenames, back to back
  std::vector<ScannedFile> files;

  std::string_view file_name(const ScannedFile& f) const {
    return std::string_view(names).substr(f.name_off, f.name_len);
  }
};

struct ScanResult {
  std::vector<ScannedDir> dirs;  // in no particular order; includes the root (path "")
  uint64_t file_count() const;
};

struct ScanOptions {
  // Directories listed at once. 0: default_scan_threads(). 1: the calling
  // thread alone.
  unsigned threads = 0;
};

// min(8, 2 x the online CPUs): a cold walk waits on the disk for most of
// its time, so a few more listings in flight than cores keep both busy.
unsigned default_scan_threads();

// Errors only for the root itself; problems below it go into `report`
// (counted; as examples, the byte-wise first few paths with the reason).
Result<ScanResult> scan_tree(const std::string& root, ScanReport& report, const ScanOptions& options = {});

}  // namespace dlfs::provenance
