#include "fs/stop_signals.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <memory>

namespace dlfs::fs {
namespace {

// The write end of the pipe, for the handler (a handler has no other way to
// reach an object); -1 when no instance is installed.
std::atomic<int> g_write_fd{-1};

constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP};

void on_signal(int sig) {
  const int saved = errno;  // a handler must leave errno as it found it
  const int fd = g_write_fd.load(std::memory_order_relaxed);
  const unsigned char b = static_cast<unsigned char>(sig);
  if (fd >= 0) (void)!::write(fd, &b, 1);  // non-blocking: a full pipe already says "stop"
  errno = saved;
}

}  // namespace

Result<std::unique_ptr<StopSignals>> StopSignals::install(std::function<void(int)> on_stop) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::from_errno(errno, "stop-signal pipe");
  (void)::fcntl(fds[1], F_SETFL, O_NONBLOCK);
  std::unique_ptr<StopSignals> s(new StopSignals(fds[0], fds[1], std::move(on_stop)));
  g_write_fd.store(fds[1]);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : kStopSignals) ::sigaction(sig, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return s;
}

StopSignals::StopSignals(int read_fd, int write_fd, std::function<void(int)> on_stop)
    : read_fd_(read_fd), write_fd_(write_fd), on_stop_(std::move(on_stop)) {
  thread_ = std::thread([this] { run(); });
}

StopSignals::~StopSignals() {
  for (int sig : kStopSignals) ::signal(sig, SIG_DFL);
  g_write_fd.store(-1);
  const unsigned char quit = 0;  // not a signal number: the thread returns
  while (::write(write_fd_, &quit, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  ::close(read_fd_);
  ::close(write_fd_);
}

void StopSignals::run() {
  for (;;) {
    unsigned char b = 0;
    ssize_t n = ::read(read_fd_, &b, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || b == 0) return;
    on_stop_(b);
  }
}

}  // namespace dlfs::fs
