// RequestGate: at most N backend requests in flight from one daemon, the rest
// wait their turn (LMDBIO's staggering: a thousand readers hitting a parallel
// file system at once are slower together than in waves). N = 0: no bound.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace dlfs::cache {

class RequestGate {
 public:
  explicit RequestGate(unsigned limit = 0) : limit_(limit) {}

  // Scoped admission: waits while `limit` requests are in flight.
  class Ticket {
   public:
    explicit Ticket(RequestGate& g) : g_(g) { g_.enter(); }
    ~Ticket() { g_.leave(); }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

   private:
    RequestGate& g_;
  };

  unsigned limit() const { return limit_; }
  uint64_t waits() const { return waits_.load(std::memory_order_relaxed); }     // requests that had to wait
  unsigned peak() const { return peak_.load(std::memory_order_relaxed); }       // most in flight at once

 private:
  void enter() {
    std::unique_lock lock(mu_);
    if (limit_ && in_flight_ >= limit_) {
      waits_.fetch_add(1, std::memory_order_relaxed);
      cv_.wait(lock, [&] { return in_flight_ < limit_; });
    }
    ++in_flight_;
    if (in_flight_ > peak_.load(std::memory_order_relaxed)) peak_.store(in_flight_, std::memory_order_relaxed);
  }
  void leave() {
    {
      std::lock_guard lock(mu_);
      --in_flight_;
    }
    cv_.notify_one();
  }

  const unsigned limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  unsigned in_flight_ = 0;
  std::atomic<uint64_t> waits_{0};
  std::atomic<unsigned> peak_{0};
};

}  // namespace dlfs::cache
