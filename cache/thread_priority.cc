#include "cache/thread_priority.h"

#include <pthread.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

namespace dlfs::cache {
namespace {

long ioprio_get_self() { return ::syscall(SYS_ioprio_get, ioprio::kWhoProcess, 0); }
int ioprio_set_self(int value) { return static_cast<int>(::syscall(SYS_ioprio_set, ioprio::kWhoProcess, 0, value)); }

// One line per process: every loader thread would hit the same refusal.
void warn_once(const char* what, int err) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    spdlog::warn("loader threads cannot change their {} ({}); they load at normal priority while readers miss", what,
                 std::strerror(err));
}

// CAP_SYS_NICE in the effective set (/proc/self/status, CapEff in hex).
bool has_cap_sys_nice() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("CapEff:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> 23) & 1;  // CAP_SYS_NICE = 23
  return false;
}

// The kernel lets a thread leave SCHED_IDLE for SCHED_OTHER/BATCH when it
// may set its current nice value (can_nice): RLIMIT_NICE >= 20 - nice, or
// CAP_SYS_NICE.
bool may_leave_idle() {
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, 0);  // the calling thread (Linux)
  if (nice == -1 && errno != 0) return false;
  rlimit rl{};
  if (::getrlimit(RLIMIT_NICE, &rl) == 0 && (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= static_cast<rlim_t>(20 - nice)))
    return true;
  return has_cap_sys_nice();
}

}  // namespace

ThreadPriority::ThreadPriority() {
  cpu_yields_ = may_leave_idle();
  policy_ = ::sched_getscheduler(0);  // 0: the calling thread
  if (policy_ < 0 || policy_ == SCHED_IDLE) policy_ = SCHED_OTHER;
  const long io = ioprio_get_self();
  ioprio_ = io >= 0 ? static_cast<int>(io) : -1;
}

void ThreadPriority::set_background(bool background) {
  if (background == background_) return;
  background_ = background;
  if (cpu_yields_) {
    sched_param sp{};  // priority 0: the only one SCHED_OTHER, SCHED_BATCH and SCHED_IDLE take
    const int r = ::pthread_setschedparam(::pthread_self(), background ? SCHED_IDLE : policy_, &sp);
    if (r != 0) {
      warn_once("CPU scheduling policy", r);
      if (background) cpu_yields_ = false;  // never entered SCHED_IDLE: do not try again
    }
  }
  // ioprio 0 (class none) means "derived from the nice value", the default.
  const int io = background ? ioprio::value(ioprio::kClassIdle, 0) : (ioprio_ >= 0 ? ioprio_ : 0);
  if (ioprio_set_self(io) != 0) warn_once("I/O priority", errno);
}

}  // namespace dlfs::cache
