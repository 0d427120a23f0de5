// What goes wrong inside libdlfs-client, and a descriptor that closes itself.
//
// The library is self-contained (no project libraries: it is for third-party
// loaders), so it has its own small error type. Inside, failures are thrown
// as Failure; every C entry point catches them and turns them into a negative
// errno and a message, so no exception crosses the C boundary.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

namespace dlfs::client {

struct Failure {
  int code;             // an errno value
  std::string message;  // names the thing and what is wrong
  // The connection went away (EOF, reset, no socket to connect to): a
  // reconnect may help. A daemon's refusal is not lost: asking again would
  // get the same answer.
  bool lost = false;
};

[[noreturn]] inline void fail(int code, std::string message) { throw Failure{code, std::move(message), false}; }
[[noreturn]] inline void lost(int code, std::string message) { throw Failure{code, std::move(message), true}; }

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

}  // namespace dlfs::client
