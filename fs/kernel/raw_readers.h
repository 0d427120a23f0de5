// RawReaders: the threads that have lately read a raw file through dlfsd.
//
// The raw overlay's metacopy getxattr (fs/kernel/raw_overlay.h) comes at
// every lookup of a raw file, for a stat() as for an open(): dlfsd cannot
// tell them apart. Pushing the file there (fs/kernel/raw_push.h) only for
// threads that read raw files keeps a metadata walk (ls -l, du, find | stat,
// an indexer) from copying the dataset into the page cache, while a reader's
// files are pushed as before from its second one on: its first costs one
// READ, which makes it a reader. (The isatty() ioctl needs no such gate: it
// only comes with an open.)
//
// Lock free and fixed in size: a slot per hash of the thread id (what FUSE
// requests carry). Two readers on one slot forget each other: the next open
// of either costs one READ again, never a wrong byte.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace dlfs::fs {

class RawReaders {
 public:
  // Thread `tid` read a raw file through dlfsd.
  void note(uint32_t tid) { slots_[slot(tid)].store(tid, std::memory_order_relaxed); }
  bool contains(uint32_t tid) const { return tid != 0 && slots_[slot(tid)].load(std::memory_order_relaxed) == tid; }

 private:
  static constexpr unsigned kBits = 10;  // 1024 slots: a node's reader threads, with room
  static size_t slot(uint32_t tid) { return (tid * 2654435761u) >> (32 - kBits); }
  std::array<std::atomic<uint32_t>, size_t{1} << kBits> slots_{};
};

}  // namespace dlfs::fs
