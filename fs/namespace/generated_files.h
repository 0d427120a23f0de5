// GeneratedFiles: files whose bytes are made when their name is looked up
// (/.dlfs/stats, an opportunistic .tar stream), each under a new inode number.
//
// The kernel is told not to send OPEN or RELEASE at all (FUSE no-open, see
// fs/kernel/fuse_ops.cc), so no file can have state per open. A file whose
// content must be fresh for each reader gets it per lookup instead: every
// lookup of its name makes a new file with a new number, the name's entry
// expires at once (entry timeout 0), so the next open looks it up again, and
// the kernel keeps the bytes of one number in its page cache as it does for
// any immutable file. The file lives until the kernel forgets the number
// (FORGET: the inode left its cache) or, should the kernel hold more than
// kMaxLive, until it is the one read least recently; a read of a number no
// longer here is ESTALE. (The kernel keeps an unused inode while its name
// stays in the dentry cache, which may be until memory runs short: the cap
// keeps one stream per epoch opened from adding up over a long job.)
//
// Thread safe: one mutex; reads find their file under it and read outside.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "common/status.h"
#include "fs/views/epoch_view.h"
#include "fs/views/view_format.h"

namespace dlfs::fs {

class GeneratedFiles {
 public:
  static constexpr size_t kMaxLive = 256;

  struct File {
    std::shared_ptr<OpenFile> content;
    uint64_t size = 0;
    std::shared_ptr<const EpochView> view;  // an epoch view's stream (its xattrs); null for stats
  };
  // Registers `file`; returns its number (the inode is kGeneratedBase + number).
  uint64_t add(File file);
  // The file, marked as just used.
  Result<File> get(uint64_t number);
  void forget(uint64_t number);
  size_t live() const;

 private:
  struct Entry {
    File file;
    uint64_t used = 0;  // tick of the last add or get
  };
  mutable std::mutex mu_;
  std::map<uint64_t, Entry> files_;
  uint64_t next_ = 1;
  uint64_t tick_ = 0;
};

}  // namespace dlfs::fs
