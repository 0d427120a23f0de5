// KernelInodes: what the kernel side keeps per inode, in one place.
//
// DLFS keeps no inode table for the namespace (fs/namespace/inode.h): inode
// numbers are computed. What the kernel side must remember about an inode
// the kernel holds lives here, one struct per inode, as libfuse's
// passthrough_hp keeps `nopen` and `backing_id` together:
//  - its open files by kind (passthrough or through the page cache) and the
//    backing id they share (fs/kernel/backing_files.h);
//  - a backend file opened at LOOKUP for the OPEN that follows
//    (fs/kernel/backing_files.h, PrefetchedFiles);
//  - whether its bytes were pushed into the page cache since the kernel
//    made the inode (fs/kernel/raw_push.h).
// An entry exists only while one of those is set; FORGET clears the push.
// So the table holds the inodes the kernel has recently pushed or opened,
// not the dataset: about 80 bytes per such inode, against the kernel's own
// ~1 KiB per cached inode.
//
// Thread safety: the table is split in shards by inode number, each under its
// own mutex; with() runs its function under the shard's lock. That lock is a
// leaf: nothing called under it may take another lock of the kernel side.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "common/unique_fd.h"

namespace dlfs::fs {

struct KernelInode {
  uint32_t passthrough_opens = 0;  // open files the kernel reads from the backing file
  uint32_t cached_opens = 0;       // open files served through the page cache
  int32_t backing_id = 0;          // registered with the connection while passthrough_opens > 0
  bool pushed = false;             // bytes pushed into the page cache since the kernel made the inode
  UniqueFd prefetched;             // the backend file, opened (and read ahead) at LOOKUP
  uint64_t prefetch_seq = 0;       // which PrefetchedFiles::put put it there

  bool empty() const { return passthrough_opens == 0 && cached_opens == 0 && !pushed && !prefetched.valid(); }
};

class KernelInodes {
 private:
  using Map = std::unordered_map<uint64_t, KernelInode>;

 public:
  // Runs f(KernelInode&) on inode `ino`'s entry (made if missing) under its
  // shard's lock, drops the entry if f leaves it empty, and returns f's result.
  template <typename F>
  auto with(uint64_t ino, F&& f) {
    Shard& s = shard(ino);
    std::lock_guard lk(s.mu);
    const Map::iterator it = s.by_ino.try_emplace(ino).first;
    struct Tidy {  // after f, whatever it returns, still under the lock
      Map& map;
      Map::iterator at;
      ~Tidy() {
        if (at->second.empty()) map.erase(at);
      }
    } tidy{s.by_ino, it};
    return f(it->second);
  }

  // The kernel dropped inode `ino` (FORGET), and its pages with it.
  void forget(uint64_t ino);
  // Counts the entries for which pred(const KernelInode&) holds (stats).
  template <typename P>
  uint64_t count_if(P&& pred) const {
    uint64_t n = 0;
    for (const Shard& s : shards_) {
      std::lock_guard lk(s.mu);
      for (const auto& [ino, e] : s.by_ino) n += pred(e) ? 1 : 0;
    }
    return n;
  }
  uint64_t size() const;

 private:
  static constexpr size_t kShards = 64;  // a lock per shard: workers rarely meet
  struct Shard {
    mutable std::mutex mu;
    Map by_ino;
  };
  Shard& shard(uint64_t ino) { return shards_[(ino ^ (ino >> 17)) % kShards]; }
  std::array<Shard, kShards> shards_;
};

}  // namespace dlfs::fs
