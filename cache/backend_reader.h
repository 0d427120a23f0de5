// BackendReader: reads byte-space ranges of a dataset from backend storage.
//
// A byte-space range may span several files (see provenance/manifest.h); the
// reader splits it per file and preads each part. Files are opened relative
// to the dataset root with O_NOFOLLOW, so a symlink swapped in after the scan
// is refused rather than followed out of the root. A short read (file shrank
// since the scan) is an error naming the file, never zero-filled bytes.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/status.h"
#include "cache/request_gate.h"
#include "common/unique_fd.h"
#include "provenance/manifest.h"

namespace dlfs::cache {

class BackendReader {
 public:
  // Opens the dataset root directory; error names the root.
  // `max_requests`: preads in flight at once across every caller (loader,
  // rounds, reads of non-resident samples); 0 = no bound.
  static Result<std::unique_ptr<BackendReader>> open(const provenance::Manifest& manifest,
                                                     unsigned max_requests = 0);

  // Fills `out` with the bytes at [data_offset, data_offset + out.size()).
  Status read(uint64_t data_offset, std::span<std::byte> out) const;

  // Reads part of one file (offset/length relative to the file).
  Status read_file(uint32_t file, uint64_t offset, std::span<std::byte> out) const;

  const provenance::Manifest& manifest() const { return manifest_; }
  const RequestGate& gate() const { return gate_; }

 private:
  BackendReader(const provenance::Manifest& m, UniqueFd root, bool use_openat2, unsigned max_requests)
      : manifest_(m), root_(std::move(root)), use_openat2_(use_openat2), gate_(max_requests) {}
  // Opens a regular file below the root without following any symlink.
  Result<UniqueFd> open_file(const std::string& path) const;
  const provenance::Manifest& manifest_;
  UniqueFd root_;
  bool use_openat2_;  // kernel has openat2 (else: walk components with O_NOFOLLOW)
  mutable RequestGate gate_;
};

}  // namespace dlfs::cache
