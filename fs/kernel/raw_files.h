// RawFiles: the kernel side's questions about raw files, answered from the
// namespace and the datasets: which ones the kernel had better read from
// their backend files while datasets load (FUSE passthrough,
// fs/kernel/backing_files.h), those backend files, and which ones can be
// pushed into the page cache from memory now (fs/kernel/raw_push.h).
//
// The namespace knows what a raw file is; how the kernel is spared requests
// for it is this room's business.
//
// Thread safety: every method may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/unique_fd.h"
#include "fs/kernel/kernel_inodes.h"
#include "fs/namespace/namespace.h"

namespace dlfs::fs {

class RawFiles {
 public:
  RawFiles(const Namespace& ns, KernelInodes& inodes) : ns_(ns), inodes_(inodes) {}

  // Whether a dataset is still scanning or joining, or loading with
  // passthrough (Dataset::passthrough): the passthrough window is open.
  bool loading_with_passthrough() const;
  // Whether `ino` is a raw file whose dataset loads and some of whose bytes
  // this node will hold but does not yet: the kernel had better read it from
  // the backend file than through dlfsd.
  bool wants_passthrough(uint64_t ino) const;
  // That raw file's backend file, opened and checked against the scan;
  // invalid when it cannot be (then reads go through dlfsd, which reports
  // the error to the reader). `opened`: that file opened (and checked) a
  // moment ago, by a prefetch.
  UniqueFd open_backend_file(uint64_t ino, UniqueFd opened = UniqueFd()) const;
  // Starts reading the first `bytes` of that raw file's backend file into
  // the page cache (it will be passed through and read soon); returns the
  // file, open, for the OPEN that follows (invalid when it cannot be opened).
  UniqueFd prefetch_backend_file(uint64_t ino, uint64_t bytes) const;

  // The bytes of raw file `ino`, in this node's memory, for a push into the
  // kernel's page cache now: the whole file, when it has at most `max_size`
  // bytes, all resident in one piece, and was not pushed since the kernel's
  // inode of it was made (this claims it; KernelInodes::forget releases the
  // claim). Empty otherwise.
  std::span<const std::byte> claim_push(uint64_t ino, uint64_t max_size) const;
  // Counts a push of `bytes` of raw file `ino` in the raw stats: a request
  // served from memory, and a push.
  void count_push(uint64_t ino, uint64_t bytes) const;

 private:
  const Namespace& ns_;
  KernelInodes& inodes_;
};

}  // namespace dlfs::fs
