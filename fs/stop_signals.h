// StopSignals: SIGTERM, SIGINT and SIGHUP mean "stop serving", handled on a
// thread of their own rather than inside the signal handler.
//
// libfuse's handlers end the session loop from the handler itself; dlfsd
// must first finish work that needs the workers still answering (a page-cache
// drop, fs/page_cache_release.h, can wait in the kernel for a page whose
// read a worker has to answer). So the handler only writes the signal number
// to a pipe (async-signal-safe), and this object's thread calls `on_stop`
// with it, once per signal received, from an ordinary thread.
//
// SIGPIPE is ignored (a reader gone from the control socket is not a stop),
// as libfuse's own handlers do. The destructor restores the default
// dispositions and joins the thread. One instance at a time per process.
#pragma once

#include <functional>
#include <thread>

#include "common/status.h"

namespace dlfs::fs {

class StopSignals {
 public:
  static Result<std::unique_ptr<StopSignals>> install(std::function<void(int signal)> on_stop);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  StopSignals(int read_fd, int write_fd, std::function<void(int)> on_stop);
  void run();
  int read_fd_, write_fd_;
  std::function<void(int)> on_stop_;
  std::thread thread_;
};

}  // namespace dlfs::fs
