// Loader: fills a StorageBuffer from the backend in the background.
//
// Extents are loaded in byte-space order by a bounded pool of threads (the
// number of backend requests in flight); each extent is read with large
// sequential preads (read_size at most, coalescing small files into one
// extent), checksummed (xxh3-64) and published (cache/extent_fill.h). The
// daemon serves reads while this runs: what is not resident yet is read from
// the backend by the caller, or, with readers_load, claimed and loaded whole
// by the reader the same way (the Loader hands its ExtentFill to the buffer
// while it runs); a thread that finds an extent already claimed skips it.
//
// Readers first: while readers miss (read the backend for bytes not resident
// yet), each loader thread loads its next extent at background CPU and I/O
// priority, with a floor so the load never stops (cache/load_yield.h). The
// loader's backend reads leave no copy in the page cache (CacheUse::drop).
//
// Staging (stage_files > 0): while readers miss, a LoadStager reads the
// extents after the loader's cursor ahead into the page cache, a few files in
// flight, and the loader threads wait instead of loading in the background
// (but for the floor); a staged extent is then loaded from the page cache
// (CacheUse::drop_buffered), not read from the device a second time
// (cache/load_stager.h).
//
// Gifts: while the load runs, a reader's miss gives the bytes it read from
// the backend to the buffer, and the loader reads only the rest of each
// extent (cache/given_ranges.h, StorageBuffer::give).
//
// Progress counts what the buffer holds (resident and failed extents, whoever
// loaded them): the load is done when every cacheable extent is settled, and
// loader threads that walked every extent wait for the ones readers are still
// loading before the load reports done. Progress (bytes, rate, ETA) is logged every few seconds
// and readable any time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cache/backend_reader.h"
#include "cache/extent_fill.h"
#include "cache/load_stager.h"
#include "cache/storage_buffer.h"

namespace dlfs::cache {

struct LoaderOptions {
  unsigned threads = 4;                // backend requests in flight
  uint64_t read_size = 8ull << 20;     // largest single pread
  double log_interval_s = 5.0;         // progress log period; 0 = never
  std::string label;                   // dataset name, for log lines
  // While loading, a reader that needs an absent extent loads it (instead of
  // reading its own bytes from the backend beside the loader). Off by
  // default: on a 2-core VM where first touch of fresh memory is slow it
  // made reads during the load slower (docs/benchmark-notes.md, "Reads while
  // loading"), since every miss then waits for a whole extent.
  bool readers_load = false;
  // Loader threads yield to readers that miss (background priority).
  LoadYieldPolicy yield{};
  // The backend's page cache drops what the loader read (the buffer holds it).
  CacheUse backend_cache = CacheUse::drop;
  // Files the stager keeps in flight while readers miss; 0: no staging.
  unsigned stage_files = 0;
};

struct LoadProgress {
  uint64_t bytes_total = 0;     // bytes of cacheable extents
  uint64_t bytes_loaded = 0;
  uint64_t extents_total = 0;
  uint64_t extents_loaded = 0;
  uint64_t extents_failed = 0;
  uint64_t extents_background = 0;  // loaded by this loader at background priority (readers missed)
  uint64_t extents_staged = 0;      // read ahead into the page cache while readers missed
  uint64_t bytes_given = 0;         // read by readers that missed and kept, not read again (StorageBuffer::give)
  double elapsed_s = 0;
  double rate_bps = 0;          // bytes_loaded / elapsed
  double eta_s = 0;             // remaining / rate; 0 when done
  bool done = false;            // every cacheable extent resident or failed (whoever loaded it)
};

class Loader {
 public:
  Loader(StorageBuffer& buffer, const BackendReader& backend, LoaderOptions options);
  ~Loader();  // stops and joins
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  void start();             // spawns the threads (and lets readers load); returns at once
  void stop();              // readers stop loading; threads finish their extent and exit; joins
  void wait();              // blocks until done (or stopped)
  LoadProgress progress() const;

 private:
  void run_worker();
  void run_monitor();  // the periodic progress line
  void log_final();
  StorageBuffer& buffer_;
  LoaderOptions options_;
  std::shared_ptr<const ExtentFill> fill_;  // shared with readers through the buffer
  std::vector<std::thread> threads_;
  std::thread monitor_;
  std::unique_ptr<LoadStager> stager_;  // with stage_files > 0, while loading
  std::atomic<uint64_t> next_extent_{0};
  std::atomic<unsigned> running_{0};
  std::atomic<uint64_t> background_extents_{0};
  std::atomic<int64_t> progress_ns_{0};  // when an extent last settled (or the floor was granted)
  std::atomic<bool> stop_{false};
  std::atomic<bool> started_{false};
  std::chrono::steady_clock::time_point start_time_{};  // written before started_ (release)
  std::atomic<int64_t> finish_ns_{0};   // elapsed when the last worker exited, 0 while running
  std::mutex mu_;                       // with cv_: wait(), stop() and the monitor's sleep
  std::condition_variable cv_;
};

}  // namespace dlfs::cache
