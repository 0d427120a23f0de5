// Verifier: proves that resident memory equals the backend.
//
// For every resident extent: recompute the checksum of the memory (catches a
// corrupted copy), read the same range from the backend and checksum it
// (catches a backend that changed or a load that went wrong), and compare both
// with the checksum recorded at load time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cache/backend_reader.h"
#include "cache/storage_buffer.h"

namespace dlfs::cache {

struct VerifyMismatch {
  uint64_t extent = 0;
  uint64_t data_offset = 0;
  uint64_t length = 0;
  std::string what;  // "memory differs from load checksum", "backend differs", or a read error
};

struct VerifyReport {
  uint64_t extents_checked = 0;
  uint64_t extents_skipped = 0;   // not resident
  uint64_t bytes_checked = 0;
  double seconds = 0;
  std::vector<VerifyMismatch> mismatches;
  bool ok() const { return mismatches.empty(); }
};

// progress(extents_done, extents_total) is called now and then; may be empty.
VerifyReport verify_buffer(const StorageBuffer& buffer, const BackendReader& backend,
                           const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace dlfs::cache
