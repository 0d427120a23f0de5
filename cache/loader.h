// Loader: fills a StorageBuffer from the backend in the background.
//
// Extents are loaded in byte-space order by a bounded pool of threads (the
// number of backend requests in flight); each extent is read with large
// sequential preads (read_size at most, coalescing small files into one
// extent), checksummed (xxh3-64) and published. The daemon serves reads while
// this runs: what is not resident yet is read from the backend by the caller.
// Progress (bytes, rate, ETA) is logged every few seconds and readable any time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cache/backend_reader.h"
#include "cache/storage_buffer.h"

namespace dlfs::cache {

struct LoaderOptions {
  unsigned threads = 4;                // backend requests in flight
  uint64_t read_size = 8ull << 20;     // largest single pread
  double log_interval_s = 5.0;         // progress log period; 0 = never
  std::string label;                   // dataset name, for log lines
};

struct LoadProgress {
  uint64_t bytes_total = 0;     // bytes of cacheable extents
  uint64_t bytes_loaded = 0;
  uint64_t extents_total = 0;
  uint64_t extents_loaded = 0;
  uint64_t extents_failed = 0;
  double elapsed_s = 0;
  double rate_bps = 0;          // bytes_loaded / elapsed
  double eta_s = 0;             // remaining / rate; 0 when done
  bool done = false;            // every cacheable extent resident or failed
};

class Loader {
 public:
  Loader(StorageBuffer& buffer, const BackendReader& backend, LoaderOptions options);
  ~Loader();  // stops and joins
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  void start();             // spawns the threads; returns at once
  void stop();              // asks threads to finish their extent and exit; joins
  void wait();              // blocks until done (or stopped)
  LoadProgress progress() const;

 private:
  void run_worker();
  void run_monitor();  // the periodic progress line
  Status load_extent(uint64_t e);
  void report_failure(uint64_t e, const Status& s);
  void log_final();
  StorageBuffer& buffer_;
  const BackendReader& backend_;
  LoaderOptions options_;
  std::vector<std::thread> threads_;
  std::thread monitor_;
  std::atomic<uint64_t> next_extent_{0};
  std::atomic<uint64_t> bytes_loaded_{0};
  std::atomic<uint64_t> bytes_failed_{0};
  std::atomic<uint64_t> extents_loaded_{0};
  std::atomic<uint64_t> extents_failed_{0};
  std::atomic<unsigned> failure_lines_{0};
  std::atomic<unsigned> running_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> started_{false};
  std::chrono::steady_clock::time_point start_time_{};  // written before started_ (release)
  std::atomic<int64_t> finish_ns_{0};   // elapsed when the last worker exited, 0 while running
  std::mutex mu_;                       // with cv_: wait(), stop() and the monitor's sleep
  std::condition_variable cv_;
};

}  // namespace dlfs::cache
