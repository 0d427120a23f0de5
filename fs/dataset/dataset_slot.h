// DatasetSlot: one configured dataset as the mount sees it while dlfsd starts.
//
// dlfsd mounts before it scans (fs/daemon/daemon.h): the root lists every configured
// dataset at once, and each dataset's slot says whether its Dataset exists
// yet. A slot moves scanning -> (joining ->) ready, or to failed, once; a
// request never sees a half-built dataset, only "not yet" or the whole of it.
//
// Two ways to wait for a slot:
//  - wait(): blocks the calling thread on a condition variable (Namespace
//    uses it, so that its answers are complete whoever calls it);
//  - park(): stores a replay to run when the slot leaves scanning/joining.
//    The FUSE callbacks (fs/kernel/fuse_ops.cc) park requests of a dataset that is not ready instead
//    of blocking a worker: however many readers wait, the workers stay free
//    for /.dlfs/stats and for the datasets that are ready.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"

namespace dlfs::fs {

class Dataset;

class DatasetSlot {
 public:
  enum class State : uint8_t { scanning, joining, ready, failed };

  // A dataset still to be scanned: its name, backend directory and format,
  // and its backend root's mtime (the dataset directory's, shown before the
  // scan ends).
  DatasetSlot(std::string name, std::string backend, std::string format, int64_t root_mtime_ns);
  // A slot that is ready from the start, over a dataset its caller owns and
  // keeps alive (tests and tools that open datasets themselves).
  static std::unique_ptr<DatasetSlot> borrowing(Dataset& ds);
  ~DatasetSlot();

  const std::string& name() const { return name_; }
  const std::string& backend() const { return backend_; }
  const std::string& format() const { return format_; }
  int64_t root_mtime_ns() const { return root_mtime_ns_; }
  State state() const { return state_.load(std::memory_order_acquire); }
  bool settled() const { State s = state(); return s == State::ready || s == State::failed; }
  // The dataset once ready, else null; never waits.
  Dataset* get() const { return state() == State::ready ? dataset_ : nullptr; }
  // The failure (ok unless failed).
  Status error() const;

  // Blocks until the slot is ready (the dataset) or failed (EIO naming the
  // dataset and the reason).
  Result<Dataset*> wait() const;
  // While not settled: keeps `replay` to run (on the thread that settles the
  // slot) and returns true. Settled: returns false and the caller goes on.
  bool park(std::function<void()> replay) const;
  size_t parked() const;

  // Scanned, waiting for the cluster join (multi-node).
  void set_joining();
  // Serves `ds` from now on and runs the parked replays.
  void publish(std::unique_ptr<Dataset> ds);
  // Answers EIO from now on (why is kept for stats) and runs the parked replays.
  void fail(Status why);

 private:
  void settle(State to);

  const std::string name_, backend_, format_;
  const int64_t root_mtime_ns_;
  std::atomic<State> state_{State::scanning};
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::unique_ptr<Dataset> owned_;
  Dataset* dataset_ = nullptr;  // written once, before state_ becomes ready
  Status error_;
  mutable std::vector<std::function<void()>> parked_;
};

const char* state_name(DatasetSlot::State s);

using DatasetSlots = std::vector<std::unique_ptr<DatasetSlot>>;

}  // namespace dlfs::fs
