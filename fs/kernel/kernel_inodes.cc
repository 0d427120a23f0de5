#include "fs/kernel/kernel_inodes.h"

namespace dlfs::fs {

void KernelInodes::forget(uint64_t ino) {
  Shard& s = shard(ino);
  std::lock_guard lk(s.mu);
  auto it = s.by_ino.find(ino);
  if (it == s.by_ino.end()) return;
  // Its pages went with the inode: the next one may be pushed again. Open
  // files keep their entry (the kernel forgets an inode only once they are
  // released, but a late FORGET must not lose a backing id).
  it->second.pushed = false;
  if (it->second.empty()) s.by_ino.erase(it);
}

uint64_t KernelInodes::size() const {
  uint64_t n = 0;
  for (const Shard& s : shards_) {
    std::lock_guard lk(s.mu);
    n += s.by_ino.size();
  }
  return n;
}

}  // namespace dlfs::fs
