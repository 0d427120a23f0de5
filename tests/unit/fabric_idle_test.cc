// The UCX fabric's progress thread when nothing happens (fabric_ucx.h): it
// sleeps until UCX raises an event or work is posted, so an idle daemon costs
// next to nothing, and it still wakes at once for a peer's get. Built into
// unit_fabric, so it runs once per transport set (tcp, shared memory) and
// once with the polling fallback forced (DLFS_TEST_ONLY_UCX_POLLING).
#include "transport/fabric_ucx.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>
#include <thread>

namespace dlfs::transport {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

bool polling_forced() { return std::getenv("DLFS_TEST_ONLY_UCX_POLLING") != nullptr; }

// Two fabrics, a registered stripe on one, the other's data endpoint to it.
struct Pair {
  std::unique_ptr<UcxFabric> server, client;
  std::vector<std::byte> stripe;
  std::unique_ptr<Registration> reg;
  std::unique_ptr<Endpoint> ep;
  std::unique_ptr<Endpoint::RemoteKey> key;
  ~Pair() {  // endpoints and registrations before their fabrics
    key.reset();
    ep.reset();
    reg.reset();
  }
  Status get(size_t offset, size_t size) {
    std::vector<std::byte> got(size);
    DLFS_RETURN_IF_ERROR(ep->get(*key, reg->address() + offset, got, 5s));
    if (std::memcmp(got.data(), stripe.data() + offset, size) != 0) return Status(EIO, "wrong bytes");
    return Status::ok();
  }
};

std::unique_ptr<Pair> make_pair(GetMode gets) {
  auto p = std::make_unique<Pair>();
  auto s = UcxFabric::create({.listen_host = "127.0.0.1", .port = 0}, [](Message&) {});
  auto c = UcxFabric::create({.listen_host = "", .port = 0, .listen = false, .gets = gets}, [](Message&) {});
  EXPECT_TRUE(s && c);
  if (!s || !c) return nullptr;
  p->server = std::move(s).value();
  p->client = std::move(c).value();
  p->stripe.resize(4 << 20);
  std::mt19937_64 rng(5);
  for (auto& b : p->stripe) b = static_cast<std::byte>(rng());
  auto reg = p->server->register_memory(p->stripe.data(), p->stripe.size());
  EXPECT_TRUE(reg) << reg.status().message();
  if (!reg) return nullptr;
  p->reg = std::move(reg).value();
  auto ep = p->client->connect_worker(p->server->worker_address(), "server", nullptr);
  EXPECT_TRUE(ep) << ep.status().message();
  if (!ep) return nullptr;
  p->ep = std::move(ep).value();
  auto key = p->ep->unpack(p->reg->packed_rkey());
  EXPECT_TRUE(key) << key.status().message();
  if (!key) return nullptr;
  p->key = std::move(key).value();
  return p;
}

// Every way a get goes: by message (the server's handler answers), UCX's own
// get (emulated by the server over tcp, one-sided over cma), and what daemons use.
class FabricIdle : public ::testing::TestWithParam<GetMode> {};

TEST_P(FabricIdle, AnIdleFabricBarelyWakesAndStillAnswersAtOnce) {
  auto p = make_pair(GetParam());
  ASSERT_TRUE(p);
  if (polling_forced()) EXPECT_EQ(p->server->progress_mode().rfind("polling", 0), 0u) << p->server->progress_mode();
  else EXPECT_EQ(p->server->progress_mode(), "event-driven (efd)");
  EXPECT_NE(p->server->transports().find(p->server->progress_mode()), std::string::npos) << p->server->transports();
  ASSERT_TRUE(p->get(0, 1 << 20));
  std::this_thread::sleep_for(300ms);  // let connection set-up settle

  // One idle second: a count of wake-ups, not a timing. Event-driven, UCX's
  // keepalive and the 1 s safety tick; polling, sleeps of up to kMaxIdleSleep
  // (the old loop woke ~5000 times).
  const uint64_t s0 = p->server->progress_wakeups(), c0 = p->client->progress_wakeups();
  std::this_thread::sleep_for(1s);
  const uint64_t limit = polling_forced() ? static_cast<uint64_t>(1s / UcxFabric::kMaxIdleSleep) + 150 : 50;
  const uint64_t server_woke = p->server->progress_wakeups() - s0, client_woke = p->client->progress_wakeups() - c0;
  std::cout << "one idle second (" << p->server->progress_mode() << "): the server's progress thread woke "
            << server_woke << " times, the client's " << client_woke << "\n";
  EXPECT_LT(server_woke, limit);
  EXPECT_LT(client_woke, limit);

  // Gets after short idle spells: each must wake the server (a peer's
  // request, an event) and the client (the reply) at once. Missed events
  // would leave each waiting for the safety tick, ~0.5 s on average.
  Clock::duration in_gets{};
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(20ms);
    const auto t0 = Clock::now();
    ASSERT_TRUE(p->get(i * 65536, 65536 + i)) << i;
    in_gets += Clock::now() - t0;
  }
  EXPECT_LT(in_gets, 2s) << "20 gets after idle spells took "
                         << std::chrono::duration_cast<std::chrono::milliseconds>(in_gets).count() << " ms";
}

INSTANTIATE_TEST_SUITE_P(Gets, FabricIdle, ::testing::Values(GetMode::am, GetMode::rma, GetMode::automatic),
                         [](const auto& info) {
                           return std::string(info.param == GetMode::am    ? "ByMessage"
                                              : info.param == GetMode::rma ? "UcpGet"
                                                                           : "Automatic");
                         });

// Destroying an idle fabric wakes its progress thread instead of waiting
// for its next tick.
TEST(FabricIdleStop, DestroyingAnIdleFabricIsPrompt) {
  auto p = make_pair(GetMode::automatic);
  ASSERT_TRUE(p);
  ASSERT_TRUE(p->get(0, 4096));
  p->key.reset();
  p->ep.reset();
  std::this_thread::sleep_for(1100ms);  // its progress thread is asleep, its next tick far
  const auto t0 = Clock::now();
  p->client.reset();
  EXPECT_LT(Clock::now() - t0, 500ms);
}

}  // namespace
}  // namespace dlfs::transport
