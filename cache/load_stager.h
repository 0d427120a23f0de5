// LoadStager: while readers read the backend during the load, reads the
// extents the loader has not reached yet ahead into the kernel's page cache.
//
// Why: while readers miss (read the backend for bytes not resident yet, by
// FUSE passthrough or the daemon's own miss path), the loader steps aside
// (cache/load_yield.h) and the readers alone keep the device busy: one
// request in flight per reader, which on a local disk leaves throughput
// unused (4 readers: ~1.9 GB/s here, 8: ~2.3). And every byte a reader read
// was read from the device again when the loader got to it. The stager adds
// a few requests in flight (`files_in_flight` files, each read whole with
// POSIX_FADV_WILLNEED, and waited for before the next beyond that depth), in
// the loader's order, ahead of it: readers find more of what they ask for in
// the page cache, and the loader later copies a staged extent from the page
// cache (CacheUse::drop_buffered, evicting it) instead of reading the device
// again. Measured: docs/benchmark-notes.md, "Staging the load" (session 25).
//
// It works only while readers miss (a miss within `miss_window`); with
// nobody reading, the loader's direct reads are faster alone. Staged pages
// are ordinary page cache, as the pages of files readers pass through are,
// until the loader evicts them. The stager stays at most `max_ahead_bytes`
// ahead of the loader's cursor (default: a quarter of the memory free when
// it starts), and steps aside there, so that the loader, no longer waiting,
// loads what was staged before the kernel has to evict it for room (pages it
// evicts anyway are read from the device again by the loader: slower, never
// wrong, every read is checked against the scan as always).
//
// Thread safety: start() and stop() from one thread; active() any time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "cache/backend_reader.h"
#include "cache/storage_buffer.h"

namespace dlfs::cache {

struct StagerOptions {
  unsigned files_in_flight = 8;  // read-ahead depth; 8 measured best of 4, 8, 16 here
  std::chrono::nanoseconds miss_window = std::chrono::milliseconds(50);
  std::string label;             // dataset name, for log lines
  uint64_t max_ahead_bytes = 0;  // staged bytes ahead of the loader's cursor at most; 0: a quarter of free memory
};

class LoadStager {
 public:
  // `loader_cursor`: the next extent the loader will hand out; the stager
  // stays after it (extents before it are the loader's already).
  LoadStager(StorageBuffer& buffer, const BackendReader& backend, StagerOptions options,
             std::function<uint64_t()> loader_cursor);
  ~LoadStager();  // stops and joins
  LoadStager(const LoadStager&) = delete;
  LoadStager& operator=(const LoadStager&) = delete;

  void start();
  void stop();
  // Whether it is staging now (readers miss and extents are left to stage):
  // the loader pauses meanwhile, but for its floor (cache/loader.h).
  bool active() const { return active_.load(std::memory_order_relaxed); }

 private:
  struct InFlight;  // the files advised and not waited for yet (load_stager.cc)
  void run();
  // Stages extent e: every file piece in it advised and, beyond the depth, waited for.
  void stage_extent(uint64_t e, InFlight& inflight);

  StorageBuffer& buffer_;
  const BackendReader& backend_;
  StagerOptions options_;
  const std::function<uint64_t()> loader_cursor_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> active_{false};
};

}  // namespace dlfs::cache
