// BackendReader: reads byte-space ranges of a dataset from backend storage.
//
// A byte-space range may span several files (see provenance/manifest.h); the
// reader splits it per file and preads each part. Files are opened relative
// to the dataset root with O_NOFOLLOW, so a symlink swapped in after the scan
// is refused rather than followed out of the root. A short read (file shrank
// since the scan) is an error naming the file, never zero-filled bytes.
//
// Every pread is bracketed by a check of the open file against the scan's
// pin (size, mtime, inode, device: one fstat at open, one after the read),
// so the bytes handed out are the scanned version or an EIO naming the file
// and what changed; a file found changed (or vanished) is marked in
// changed_files() and fails every later read at once (cache/changed_files.h
// has the rule).
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/status.h"
#include "cache/changed_files.h"
#include "cache/request_gate.h"
#include "common/unique_fd.h"
#include "provenance/manifest.h"

namespace dlfs::cache {

// What a read leaves in the kernel's page cache. `drop`: nothing: for a
// loader that keeps the bytes in its own memory, or a read of bytes it will
// soon hold, so that the node does not hold them twice. Where the file
// offset and the destination are 4 KiB-aligned the read bypasses the page
// cache (O_DIRECT: the device writes into the destination, no copy by the
// CPU, no pages to free); otherwise it is an ordinary read whose pages are
// evicted afterwards (POSIX_FADV_DONTNEED, after the pin check: only clean
// pages no one else has mapped go). A file system that refuses O_DIRECT
// (tmpfs) is read the ordinary way from then on.
// `drop_buffered`: as `drop`, but always through the page cache (then
// evicted): for bytes already read ahead into it (cache/load_stager.h), which
// a direct read would fetch from the device a second time.
enum class CacheUse { keep, drop, drop_buffered };

// Alignment of a direct read: file offset, destination and length (the
// tail goes through a bounce block). 4 KiB suits every block size here.
inline constexpr size_t kDirectAlign = 4096;

class BackendReader {
 public:
  // Opens the dataset root directory; error names the root.
  // `max_requests`: preads in flight at once across every caller (loader,
  // rounds, reads of non-resident samples); 0 = no bound. `label` names the
  // dataset in log lines (default: the root).
  static Result<std::unique_ptr<BackendReader>> open(const provenance::Manifest& manifest,
                                                     unsigned max_requests = 0, std::string label = {});

  // Fills `out` with the bytes at [data_offset, data_offset + out.size()).
  Status read(uint64_t data_offset, std::span<std::byte> out, CacheUse use = CacheUse::keep) const;

  // Opens `file` for reading (not O_DIRECT), checked against the scan's pin:
  // for a reader that reads it itself (FUSE passthrough). EIO naming the file
  // if it changed since the scan.
  Result<UniqueFd> open_checked(uint32_t file) const;

  // Reads part of one file (offset/length relative to the file).
  Status read_file(uint32_t file, uint64_t offset, std::span<std::byte> out, CacheUse use = CacheUse::keep) const;

  const provenance::Manifest& manifest() const { return manifest_; }
  const RequestGate& gate() const { return gate_; }
  // Reads that went past the page cache (O_DIRECT), for stats and tests.
  uint64_t direct_reads() const { return direct_reads_.load(std::memory_order_relaxed); }
  // Whether O_DIRECT is still tried (false once the file system refused it).
  bool direct_io() const { return direct_ok_.load(std::memory_order_relaxed); }
  // Reads (read_file, and each file a read() spans) and checked opens that
  // failed: a file changed or gone, an I/O error, a short read.
  uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }
  // The files found changed since the scan (by reads, or by verify).
  const ChangedFiles& changed_files() const { return changed_; }
  // Marks `file` changed for a reason found outside a read (verify compared
  // its contents with the loaded bytes).
  void mark_changed(uint32_t file, const std::string& what) const {
    changed_.mark(file, manifest_.file_path(file), what);
  }

 private:
  BackendReader(const provenance::Manifest& m, UniqueFd root, bool use_openat2, unsigned max_requests,
                std::string label)
      : manifest_(m), root_(std::move(root)), use_openat2_(use_openat2), gate_(max_requests),
        changed_(m.file_count(), std::move(label)) {}
  // Opens a regular file below the root without following any symlink and
  // checks it against the pin.
  Result<UniqueFd> open_file(uint32_t file, const std::string& path, bool direct) const;
  Status read_file_uncounted(uint32_t file, uint64_t offset, std::span<std::byte> out, CacheUse use) const;
  Result<UniqueFd> open_checked_uncounted(uint32_t file) const;
  // Whether a drop read of `out` at `offset` can go direct (aligned, O_DIRECT not refused).
  bool direct_fits(uint64_t offset, std::span<std::byte> out) const;
  // Bytes read into `out` (fewer at EOF), or the error naming the file.
  Result<size_t> pread_buffered(int fd, uint64_t offset, std::span<std::byte> out, const std::string& path) const;
  Result<size_t> pread_direct(int fd, uint64_t offset, std::span<std::byte> out, const std::string& path) const;
  // EIO unless the open file is still the one scanned (marks it changed).
  Status check_pin(uint32_t file, const std::string& path, int fd) const;
  // Marks the file changed; the EIO a read of it returns.
  Status changed(uint32_t file, const std::string& path, const std::string& what) const;
  const provenance::Manifest& manifest_;
  UniqueFd root_;
  bool use_openat2_;  // kernel has openat2 (else: walk components with O_NOFOLLOW)
  mutable RequestGate gate_;
  mutable ChangedFiles changed_;
  mutable std::atomic<bool> direct_ok_{true};
  mutable std::atomic<uint64_t> direct_reads_{0};
  mutable std::atomic<uint64_t> errors_{0};
};

}  // namespace dlfs::cache
