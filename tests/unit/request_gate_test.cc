#include "cache/request_gate.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace dlfs::cache {
namespace {

// 8 threads, 20 requests each, through a gate of 3: never more than 3 inside.
TEST(RequestGate, NeverMoreThanTheLimitInFlight) {
  RequestGate gate(3);
  std::atomic<int> inside{0}, most{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        RequestGate::Ticket ticket(gate);
        int now = inside.fetch_add(1) + 1;
        int m = most.load();
        while (now > m && !most.compare_exchange_weak(m, now)) {
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        inside.fetch_sub(1);
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_LE(most.load(), 3);
  EXPECT_EQ(gate.peak(), static_cast<unsigned>(most.load()));
  EXPECT_GT(gate.waits(), 0u);
}

TEST(RequestGate, ZeroMeansNoBound) {
  RequestGate gate(0);
  std::vector<std::unique_ptr<RequestGate::Ticket>> held;
  for (int i = 0; i < 100; ++i) held.push_back(std::make_unique<RequestGate::Ticket>(gate));
  EXPECT_EQ(gate.peak(), 100u);
  EXPECT_EQ(gate.waits(), 0u);
}

}  // namespace
}  // namespace dlfs::cache
