// RefusalLog: one warning line per path a lookup refused for a reason the
// user should see (a resume path whose counts do not fit, docs/views.md),
// at most kBurst lines per kWindow: a loop of bad lookups cannot fill the
// log. The lines held back are counted in the next one.
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace dlfs::fs {

class RefusalLog {
 public:
  static constexpr int kBurst = 10;
  static constexpr std::chrono::seconds kWindow{10};

  void refuse(const std::string& line) {
    std::lock_guard lk(mu_);
    const auto now = std::chrono::steady_clock::now();
    if (now - window_start_ >= kWindow) {
      window_start_ = now;
      logged_ = 0;
    }
    if (logged_ >= kBurst) {
      ++held_back_;
      return;
    }
    ++logged_;
    if (held_back_ > 0)
      spdlog::warn("{} ({} more such lines held back before this one)", line, held_back_);
    else
      spdlog::warn("{}", line);
    held_back_ = 0;
  }

 private:
  std::mutex mu_;
  std::chrono::steady_clock::time_point window_start_{};
  int logged_ = 0;
  uint64_t held_back_ = 0;
};

}  // namespace dlfs::fs
