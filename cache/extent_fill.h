// ExtentFill: loads one claimed extent of a StorageBuffer from the backend.
//
// The one way an extent gets its bytes, shared by the Loader's threads and by
// readers that load the extent they miss (cache/sample_reader.h): large
// preads straight into the extent's memory (read_size at most; the backend
// reader splits a request that spans small files into one pread per file)
// of every byte readers have not given already (StorageBuffer::give),
// the xxh3 checksum, then mark_resident. A failed read marks the extent
// failed (reads of it go to the backend from then on) and logs it, naming the
// file, for the first few failures of this filler.
//
// Thread safety: load() may run concurrently for different extents.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "cache/backend_reader.h"
#include "cache/storage_buffer.h"
#include "common/status.h"

namespace dlfs::cache {

class ExtentFill {
 public:
  ExtentFill(StorageBuffer& buffer, const BackendReader& backend, uint64_t read_size, std::string label,
             CacheUse backend_cache = CacheUse::keep);

  // Fills extent e, which the caller claimed (try_mark_loading returned
  // true), and settles it: resident, or failed with the error returned.
  Status load(uint64_t e) const { return load(e, backend_cache_); }
  Status load(uint64_t e, CacheUse use) const;

  // Claims e if it is absent and loads it. True when this call settled it
  // (whether it became resident or failed), false when it was not absent.
  bool claim_and_load(uint64_t e) const { return claim_and_load(e, backend_cache_); }
  bool claim_and_load(uint64_t e, CacheUse use) const;
  const BackendReader& backend() const { return backend_; }

  StorageBuffer& buffer() const { return buffer_; }

 private:
  void report_failure(uint64_t e, const Status& s) const;
  StorageBuffer& buffer_;
  const BackendReader& backend_;
  const uint64_t read_size_;
  const std::string label_;
  const CacheUse backend_cache_;
  mutable std::atomic<unsigned> failure_lines_{0};
};

}  // namespace dlfs::cache
