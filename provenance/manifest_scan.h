// The directory walk behind Manifest::build: collects every directory and
// regular file below a root without following symlinks, in no particular
// order. Sorting and table building happen in manifest.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "provenance/manifest.h"

namespace dlfs::provenance {

struct ScannedEntry {
  std::string path;       // relative to the root, no leading "./"; "" for the root
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint32_t mode = 0;      // permission bits
  uint64_t inode = 0;     // st_ino and st_dev: with size and mtime, the identity
  uint64_t device = 0;    // a backend read checks the file against (cache/changed_files.h)
};

struct ScanResult {
  std::vector<ScannedEntry> dirs;   // includes the root (path "")
  std::vector<ScannedEntry> files;
};

// Errors only for the root itself; problems below it go into `report`.
Result<ScanResult> scan_tree(const std::string& root, ScanReport& report);

}  // namespace dlfs::provenance
