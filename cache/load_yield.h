// Readers first while a dataset loads: the signal and the rule.
//
// A read that needs bytes this node will hold but does not hold yet reads
// them from the backend itself (cache/sample_reader.h). While readers do
// that, the loader competes with them for the CPU, the backend and, on VMs
// where first touch of fresh memory is costly, for that memory (the
// storage buffer's pages). So a loader thread that sees a recent miss loads
// its next extent at background priority (cache/thread_priority.h): it runs
// on what the readers leave idle, and at full speed again once they stop
// missing (nobody reads, or what they read is resident).
//
// Background priority alone could starve the load for good under readers
// that keep the CPUs busy and keep missing (a CPU-bound training job in its
// first epoch, then every epoch, since nothing gets loaded): SCHED_IDLE
// threads still get a sliver of CPU, but only a sliver. So a thread that,
// between two extents, finds that no extent of the load has settled for
// `starved_after` loads its next one at normal priority (the first to look
// wins; the others stay in the background): while readers miss, the load
// gets at least about one extent per `starved_after` plus what the
// background threads finish.
//
// Thread safety: ReaderMisses may be noted and read concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace dlfs::cache {

// When a reader last missed (steady_clock nanoseconds; 0 = never).
class ReaderMisses {
 public:
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void note(int64_t now = now_ns()) {
    // Misses come in bursts from every reader thread: store at most once per
    // granule so they do not all write one shared cache line.
    if (now - last_.load(std::memory_order_relaxed) >= kGranuleNs) last_.store(now, std::memory_order_relaxed);
  }
  int64_t last_ns() const { return last_.load(std::memory_order_relaxed); }
  // A miss within `window` before `now`.
  bool recent(std::chrono::nanoseconds window, int64_t now = now_ns()) const {
    const int64_t last = last_ns();
    return last != 0 && now - last < window.count();
  }

  static constexpr int64_t kGranuleNs = 1'000'000;  // 1 ms: well below any useful window

 private:
  std::atomic<int64_t> last_{0};
};

struct LoadYieldPolicy {
  bool enabled = true;
  // Readers count as missing for this long after their last miss.
  std::chrono::nanoseconds miss_window = std::chrono::milliseconds(50);
  // No extent settled for this long: the next one loads at normal priority.
  std::chrono::nanoseconds starved_after = std::chrono::seconds(1);

  // Whether the calling loader thread loads its next extent at background
  // priority. `progress_ns`: the load's last sign of progress (when an
  // extent settled, or the last floor grant), shared by the loader's
  // threads; a thread granted the floor moves it to `now_ns`, so the others
  // stay in the background.
  bool background(const ReaderMisses& misses, int64_t now_ns, std::atomic<int64_t>& progress_ns) const {
    if (!enabled || !misses.recent(miss_window, now_ns)) return false;
    int64_t last = progress_ns.load(std::memory_order_relaxed);
    if (now_ns - last < starved_after.count()) return true;
    return !progress_ns.compare_exchange_strong(last, now_ns, std::memory_order_relaxed);  // the floor
  }
};

}  // namespace dlfs::cache
