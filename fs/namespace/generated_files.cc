#include "fs/namespace/generated_files.h"

#include "fs/namespace/inode.h"

namespace dlfs::fs {

uint64_t GeneratedFiles::add(File file) {
  std::lock_guard lk(mu_);
  const uint64_t n = next_++;
  if (next_ > kMaxIndex) next_ = 1;  // 2^40 lookups: decades at a million a second
  files_.emplace(n, Entry{std::move(file), ++tick_});
  // A kernel that never forgets (it keeps inodes while it has memory to
  // spare) must not make the daemon grow without bound: the file read least
  // recently goes (a scan of kMaxLive entries, only when over the cap).
  if (files_.size() > kMaxLive) {
    auto victim = files_.begin();
    for (auto it = files_.begin(); it != files_.end(); ++it)
      if (it->second.used < victim->second.used) victim = it;
    files_.erase(victim);
  }
  return n;
}

Result<GeneratedFiles::File> GeneratedFiles::get(uint64_t number) {
  std::lock_guard lk(mu_);
  auto it = files_.find(number);
  if (it == files_.end())
    return Status(ESTALE, "generated file " + std::to_string(number) + " is gone (look its name up again)");
  it->second.used = ++tick_;
  return it->second.file;
}

void GeneratedFiles::forget(uint64_t number) {
  std::lock_guard lk(mu_);
  files_.erase(number);
}

size_t GeneratedFiles::live() const {
  std::lock_guard lk(mu_);
  return files_.size();
}

}  // namespace dlfs::fs
