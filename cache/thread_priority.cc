#include "cache/thread_priority.h"

#include <linux/ioprio.h>
#include <pthread.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace dlfs::cache {
namespace {

long ioprio_get_self() { return ::syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0); }
int ioprio_set_self(int value) { return static_cast<int>(::syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, value)); }

// One line per process: every loader thread would hit the same refusal.
void warn_once(const char* what, int err) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    spdlog::warn("loader threads cannot change their {} ({}); they load at normal priority while readers miss", what,
                 std::strerror(err));
}

}  // namespace

ThreadPriority::ThreadPriority() {
  policy_ = ::sched_getscheduler(0);  // 0: the calling thread
  if (policy_ < 0 || policy_ == SCHED_IDLE) policy_ = SCHED_OTHER;
  const long io = ioprio_get_self();
  ioprio_ = io >= 0 ? static_cast<int>(io) : -1;
}

void ThreadPriority::set_background(bool background) {
  if (background == background_) return;
  background_ = background;
  sched_param sp{};  // priority 0: the only one SCHED_OTHER, SCHED_BATCH and SCHED_IDLE take
  const int r = ::pthread_setschedparam(::pthread_self(), background ? SCHED_IDLE : policy_, &sp);
  if (r != 0) warn_once("CPU scheduling policy", r);
  // ioprio 0 (class none) means "derived from the nice value", the default.
  const int io = background ? IOPRIO_PRIO_VALUE(IOPRIO_CLASS_IDLE, 0) : (ioprio_ >= 0 ? ioprio_ : 0);
  if (ioprio_set_self(io) != 0) warn_once("I/O priority", errno);
}

}  // namespace dlfs::cache
