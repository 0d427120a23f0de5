// Background priority for the calling thread: CPU (SCHED_IDLE: runs when
// nothing else wants the CPU) and I/O (IOPRIO_CLASS_IDLE: the block layer
// dispatches its requests after everyone else's, where the device's
// scheduler honours classes, e.g. mq-deadline and bfq; with "none" it has no
// effect). Used by loader threads while readers need the backend
// (cache/load_yield.h).
//
// Only the calling thread changes. Entering SCHED_IDLE needs no privilege,
// but leaving it does (CAP_SYS_NICE, or an RLIMIT_NICE that allows the
// thread's nice value): without that, the CPU part is skipped (a loader stuck
// at SCHED_IDLE would crawl for good under any CPU load) and only the I/O
// class changes, which needs no privilege either way. A refusal (a seccomp
// filter, a kernel without the call) is logged once and the thread stays as
// it was.
#pragma once

namespace dlfs::cache {

// The ioprio_get/ioprio_set ABI (include/uapi/linux/ioprio.h). Not from
// <linux/ioprio.h>: Debian 12's linux-libc-dev 6.1.192 made its
// IOPRIO_PRIO_VALUE an inline function with a parameter named `class`, which
// no C++ compiler accepts.
namespace ioprio {
inline constexpr int kWhoProcess = 1;  // IOPRIO_WHO_PROCESS
inline constexpr int kClassShift = 13;
inline constexpr int kClassIdle = 3;   // IOPRIO_CLASS_IDLE
constexpr int value(int io_class, int level) { return (io_class << kClassShift) | level; }
constexpr int class_of(long value) { return static_cast<int>(value >> kClassShift); }
}  // namespace ioprio

class ThreadPriority {
 public:
  // Remembers the calling thread's policy and I/O priority to return to.
  ThreadPriority();
  // Background or back to the remembered settings; no syscall when
  // unchanged. Call from the thread that constructed this object.
  void set_background(bool background);
  bool background() const { return background_; }
  // Whether background includes the CPU part (this thread may leave SCHED_IDLE).
  bool cpu_yields() const { return cpu_yields_; }

 private:
  int policy_ = 0;      // SCHED_OTHER or SCHED_BATCH as found
  int ioprio_ = -1;     // as found by ioprio_get; -1 unknown (restore the default)
  bool background_ = false;
  bool cpu_yields_ = false;
};

}  // namespace dlfs::cache
