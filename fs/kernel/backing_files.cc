#include "fs/kernel/backing_files.h"

#include <cerrno>
#include <string>

namespace dlfs::fs {

BackingFiles::BackingFiles(KernelInodes& inodes) : inodes_(inodes) {
  registrar_.open = [](int) -> Result<int32_t> { return Status(ENODEV, "no FUSE session to register with"); };
  registrar_.close = [](int32_t) {};
}

bool BackingFiles::join(KernelInode& e, Open& out) {
  if (e.passthrough_opens > 0) {
    ++e.passthrough_opens;
    out = Open{OpenMode::passthrough, e.backing_id, UniqueFd()};
    return true;
  }
  if (e.cached_opens > 0) {
    ++e.cached_opens;
    out = Open{OpenMode::cached, 0, UniqueFd()};
    return true;
  }
  return false;
}

BackingFiles::Open BackingFiles::open_passthrough(uint64_t ino, const std::function<UniqueFd()>& source,
                                                  Status* why) {
  Open out;
  if (inodes_.with(ino, [&](KernelInode& e) { return join(e, out); })) return out;
  // Outside the lock: opening a backend file may wait on a disk or a server,
  // and the registration is an ioctl.
  int32_t id = 0;
  UniqueFd fd = source();
  if (fd.valid()) {
    auto r = registrar_.open(fd.get());
    if (r) {
      id = *r;
      registered_.fetch_add(1, std::memory_order_relaxed);
    } else if (why) {
      *why = r.status();
    }
  }
  int32_t unused = 0;
  inodes_.with(ino, [&](KernelInode& e) {
    if (join(e, out)) {  // another open of it came first
      unused = id;
    } else if (id > 0) {
      e.backing_id = id;
      e.passthrough_opens = 1;
      // The kernel holds its own reference; the caller may still use this one.
      out = Open{OpenMode::passthrough, id, std::move(fd)};
    } else {
      e.cached_opens = 1;
      out = Open{OpenMode::cached, 0, UniqueFd()};
    }
  });
  if (unused > 0) registrar_.close(unused);
  return out;
}

BackingFiles::Open BackingFiles::open_cached(uint64_t ino) {
  Open out;
  inodes_.with(ino, [&](KernelInode& e) {
    if (!join(e, out)) e.cached_opens = 1;
  });
  return out;
}

void BackingFiles::release(uint64_t ino, OpenMode mode) {
  if (mode == OpenMode::plain) return;
  const int32_t close_id = inodes_.with(ino, [&](KernelInode& e) {
    int32_t id = 0;
    if (mode == OpenMode::passthrough && e.passthrough_opens > 0 && --e.passthrough_opens == 0) {
      id = e.backing_id;
      e.backing_id = 0;
    }
    if (mode == OpenMode::cached && e.cached_opens > 0) --e.cached_opens;
    return id;
  });
  // The kernel took its reference at each open; the id is only for new ones.
  if (close_id > 0) registrar_.close(close_id);
}

uint64_t BackingFiles::live_ids() const {
  return inodes_.count_if([](const KernelInode& e) { return e.backing_id > 0; });
}

void PrefetchedFiles::put(uint64_t ino, UniqueFd fd) {
  UniqueFd evicted, replaced;  // closed outside every lock
  std::lock_guard lk(mu_);
  if (capacity_ == 0) return;
  if (fifo_.size() >= capacity_) {
    const auto [old_ino, old_seq] = fifo_.front();
    fifo_.pop_front();
    inodes_.with(old_ino, [&, seq = old_seq](KernelInode& e) {
      if (e.prefetch_seq == seq) evicted = std::move(e.prefetched);  // not a newer put's file
    });
  }
  const uint64_t seq = next_seq_++;
  inodes_.with(ino, [&](KernelInode& e) {
    replaced = std::move(e.prefetched);
    e.prefetched = std::move(fd);
    e.prefetch_seq = seq;
  });
  fifo_.emplace_back(ino, seq);
}

UniqueFd PrefetchedFiles::take(uint64_t ino) {
  // The FIFO keeps its stale entry: it only bounds how many are kept, and
  // an eviction finds the file gone (or a newer one: left alone).
  return inodes_.with(ino, [](KernelInode& e) { return std::move(e.prefetched); });
}

void PrefetchedFiles::clear() {
  std::deque<std::pair<uint64_t, uint64_t>> gone;
  {
    std::lock_guard lk(mu_);
    gone.swap(fifo_);
  }
  for (const auto& [ino, seq] : gone) {
    UniqueFd fd = inodes_.with(ino, [&, s = seq](KernelInode& e) {
      return e.prefetch_seq == s ? std::move(e.prefetched) : UniqueFd();
    });
  }
}

size_t PrefetchedFiles::size() const {
  return inodes_.count_if([](const KernelInode& e) { return e.prefetched.valid(); });
}

}  // namespace dlfs::fs
