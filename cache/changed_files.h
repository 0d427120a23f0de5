// ChangedFiles: the backend files found changed since the scan.
//
// The scan pinned every file's identity (provenance::FileIdentity: size,
// mtime in ns, inode, device). BackendReader compares the file it opens with
// that pin before and after each pread; a difference, or a file that
// vanished, means the backend no longer holds the version the daemon serves.
// The file is then marked here, once, with what changed, and from then on:
//
//   * a read that needs any backend byte of it fails with EIO (no syscall:
//     one flag load), so no reply ever mixes bytes of two versions;
//   * bytes of it already in memory keep serving: they were loaded and
//     checksummed from the pinned version (every backend read that filled
//     them passed the same check), so a read served wholly from memory
//     succeeds with the scanned bytes.
//
// Limits: a rewrite that keeps size, mtime (to the ns) and inode is
// invisible to stat (`touch -d` back to the old time, or two writes within
// one tick of a coarse filesystem clock); `dlfs-ctl verify` compares the
// contents and marks such files here too.
//
// Thread safety: all methods may be called concurrently; contains() is one
// acquire load.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "provenance/manifest.h"

namespace dlfs::cache {

using provenance::describe_change;  // the pin check (provenance/manifest.h)

struct ChangedFile {
  uint32_t file = 0;
  std::string path;  // relative to the dataset root
  std::string what;  // what differs from the scan, or "vanished"
};

class ChangedFiles {
 public:
  // `label` prefixes the log lines (the dataset's name).
  ChangedFiles(uint32_t file_count, std::string label);

  bool contains(uint32_t f) const { return flags_[f].load(std::memory_order_acquire) != 0; }
  // Marks f changed. The first mark of a file is kept for reports and logged
  // as a warning naming the file and what changed (the first few files; the
  // rest are counted). Later marks of the same file do nothing.
  void mark(uint32_t f, const std::string& path, const std::string& what);

  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  // The first `limit` files marked, in the order they were found.
  std::vector<ChangedFile> first(size_t limit) const;
  // What was recorded for f, or a generic phrase when f is past the kept list.
  std::string what(uint32_t f) const;

  uint64_t memory_bytes() const { return file_count_; }  // the flags

 private:
  const uint32_t file_count_;
  const std::string label_;
  std::unique_ptr<std::atomic<uint8_t>[]> flags_;
  std::atomic<uint64_t> count_{0};
  mutable std::mutex mu_;          // guards kept_
  std::vector<ChangedFile> kept_;  // the first kKeep files marked
};

}  // namespace dlfs::cache
