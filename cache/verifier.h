// Verifier: proves that resident memory equals the backend.
//
// For every resident extent: recompute the checksum of the memory (catches a
// corrupted copy), read the same range from the backend and checksum it, and
// compare both with the checksum recorded at load time. A backend that
// differs while the memory is intact is a backend file that changed since the
// scan, not corruption: the files whose bytes differ are named (and marked
// changed in the BackendReader, so that later reads of them fail instead of
// serving the new version); so are files whose change a read already found.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cache/backend_reader.h"
#include "cache/changed_files.h"
#include "cache/storage_buffer.h"

namespace dlfs::cache {

struct VerifyMismatch {
  uint64_t extent = 0;
  uint64_t data_offset = 0;
  uint64_t length = 0;
  std::string what;  // "memory differs from load checksum", or a backend read error
};

struct VerifyReport {
  uint64_t extents_checked = 0;
  uint64_t extents_skipped = 0;   // not resident
  uint64_t extents_changed = 0;   // resident extents whose backend files changed (memory holds the scanned version)
  uint64_t bytes_checked = 0;
  double seconds = 0;
  std::vector<VerifyMismatch> mismatches;  // memory corrupted, or the backend unreadable for another reason
  uint64_t changed_count = 0;              // backend files known changed since the scan, after this pass
  std::vector<ChangedFile> changed;        // the first of them (at most kVerifyListed)
  bool ok() const { return mismatches.empty() && changed_count == 0; }
};

inline constexpr size_t kVerifyListed = 100;

// progress(extents_done, extents_total) is called now and then; may be empty.
VerifyReport verify_buffer(const StorageBuffer& buffer, const BackendReader& backend,
                           const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace dlfs::cache
