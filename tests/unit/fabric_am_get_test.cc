// Gets served by message (transport/am_get.h) over real UCX, and the fault
// they exist for: an asker SIGKILLed in the middle of its gets must not take
// the node serving them down. Built into unit_fabric, so it runs once per
// transport (UCX_TLS=tcp and shared memory, see meson.build); the in-process
// tests force GetMode::am, the kill test uses what daemons use (automatic).
#include "transport/am_get.h"
#include "transport/fabric.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

namespace dlfs::transport {
namespace {

using namespace std::chrono_literals;

std::vector<std::byte> random_bytes(size_t n, uint64_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937_64 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

// A server fabric with a registered stripe, and a client's data endpoint to it.
struct Served {
  std::unique_ptr<Fabric> server, client;
  std::vector<std::byte> stripe;
  std::unique_ptr<Registration> reg;
  std::unique_ptr<Endpoint> ep;
  std::unique_ptr<Endpoint::RemoteKey> key;
  std::atomic<int> failures{0};
};

std::unique_ptr<Served> serve(size_t size, GetMode client_gets) {
  auto p = std::make_unique<Served>();
  auto s = Fabric::create({.listen_host = "127.0.0.1", .port = 0, .listen = true, .gets = GetMode::automatic},
                          [](Message&) {});
  EXPECT_TRUE(s) << s.status().message();
  auto c = Fabric::create({.listen_host = "", .port = 0, .listen = false, .gets = client_gets}, [](Message&) {});
  EXPECT_TRUE(c) << c.status().message();
  if (!s || !c) return nullptr;
  p->server = std::move(s).value();
  p->client = std::move(c).value();
  p->stripe = random_bytes(size, 11);
  auto reg = p->server->register_memory(p->stripe.data(), size);
  EXPECT_TRUE(reg) << reg.status().message();
  if (!reg) return nullptr;
  p->reg = std::move(reg).value();
  auto ep = p->client->connect_worker(p->server->worker_address(), "server",
                                      [pp = p.get()](const std::string&) { ++pp->failures; });
  EXPECT_TRUE(ep) << ep.status().message();
  if (!ep) return nullptr;
  p->ep = std::move(ep).value();
  auto key = p->ep->unpack(p->reg->packed_rkey());
  EXPECT_TRUE(key) << key.status().message();
  if (!key) return nullptr;
  p->key = std::move(key).value();
  return p;
}

TEST(FabricAmGets, ReturnTheRightBytesForEverySize) {
  const size_t size = 8 << 20;
  auto p = serve(size, GetMode::am);
  ASSERT_TRUE(p);
  ASSERT_NE(p->ep->describe().find("DLFS gets: by message"), std::string::npos) << p->ep->describe();
  std::mt19937_64 rng(5);
  // Sizes around UCX's segment and fragment edges, 1 MiB samples, and more.
  for (size_t len : {size_t{1}, size_t{7}, size_t{4096}, size_t{8191}, size_t{65529}, size_t{65536}, size_t{65537},
                     size_t{90763}, size_t{262144}, size_t{1} << 20, (size_t{1} << 20) + 13, (size_t{3} << 20) + 7}) {
    for (int i = 0; i < 3; ++i) {
      const size_t off = i == 0 ? 0 : i == 1 ? size - len : rng() % (size - len);
      std::vector<std::byte> got(len);
      Status s = p->ep->get(*p->key, p->reg->address() + off, got, 10s);
      ASSERT_TRUE(s) << len << ": " << s.message();
      ASSERT_EQ(0, std::memcmp(got.data(), p->stripe.data() + off, len)) << off << "+" << len;
    }
  }
  // A batch in flight at once, collected under one deadline.
  std::vector<Endpoint::PendingGet> pending;
  std::vector<std::pair<size_t, size_t>> where;
  for (int i = 0; i < 32; ++i) {
    size_t len = 1 + rng() % (1 << 20), off = rng() % (size - len);
    pending.push_back(p->ep->start_get(*p->key, p->reg->address() + off, len));
    where.emplace_back(off, len);
  }
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  for (size_t i = 0; i < pending.size(); ++i) {
    std::vector<std::byte> got(where[i].second);
    Status s = p->ep->finish_get(pending[i], got, deadline);
    ASSERT_TRUE(s) << s.message();
    ASSERT_EQ(0, std::memcmp(got.data(), p->stripe.data() + where[i].first, got.size())) << i;
  }
  EXPECT_EQ(p->failures.load(), 0);
}

// A member may read what was offered, nothing else: memory next to the
// stripe, a range running past its end, and a range that was registered
// once but no longer is are refused, and the destination stays untouched.
TEST(FabricAmGets, OutsideRegisteredMemoryIsRefused) {
  const size_t size = 1 << 20;
  auto p = serve(size, GetMode::am);
  ASSERT_TRUE(p);
  std::vector<std::byte> secret = random_bytes(4096, 99);  // the server's, never registered
  const uint64_t base = p->reg->address();
  const std::vector<std::pair<uint64_t, size_t>> bad = {
      {reinterpret_cast<uint64_t>(secret.data()), secret.size()},
      {base + size - 100, 200},
      {base - 1, 16},
      {base, size + 1},
  };
  for (const auto& [addr, len] : bad) {
    std::vector<std::byte> got(len, std::byte{0x5a});
    Status s = p->ep->get(*p->key, addr, got, 10s);
    ASSERT_FALSE(s) << "served " << len << " bytes at " << addr;
    EXPECT_NE(s.message().find("refused"), std::string::npos) << s.message();
    EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](std::byte b) { return b == std::byte{0x5a}; }));
  }
  // The same endpoint still serves what is offered.
  std::vector<std::byte> ok(4096);
  ASSERT_TRUE(p->ep->get(*p->key, base + 100, ok, 10s));
  EXPECT_EQ(0, std::memcmp(ok.data(), p->stripe.data() + 100, ok.size()));
  // Unregistered: refused from then on.
  p->reg.reset();
  Status s = p->ep->get(*p->key, base + 100, ok, 10s);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("not inside memory it registered"), std::string::npos) << s.message();
}

// A peer whose fabric is gone: gets fail (or time out) within their
// deadline, and nothing crashes.
TEST(FabricAmGets, APeerThatIsGoneFailsTheGetInTime) {
  auto p = serve(1 << 20, GetMode::am);
  ASSERT_TRUE(p);
  std::vector<std::byte> got(4096);
  const uint64_t base = p->reg->address();
  ASSERT_TRUE(p->ep->get(*p->key, base, got, 10s));
  // Gets in flight when it goes, and gets posted after.
  std::vector<Endpoint::PendingGet> pending;
  for (int i = 0; i < 8; ++i) pending.push_back(p->ep->start_get(*p->key, p->reg->address(), 1 << 20));
  p->reg.reset();
  p->server.reset();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::byte> big(1 << 20);
  for (auto& g : pending) (void)p->ep->finish_get(g, big, t0 + 3s);
  for (int i = 0; i < 5; ++i) {
    Status s = p->ep->get(*p->key, base, got, 2s);
    EXPECT_FALSE(s);
  }
  EXPECT_TRUE(p->ep->failed()) << "the endpoint did not notice its peer left";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s + 5 * 2s + 1s);
}

// Automatic mode: ucp_get only where a transport reads registered memory
// one-sided; tcp and posix/sysv (both transports under test here) only
// emulate it, so gets go by message on both.
TEST(FabricAmGets, AutomaticModeUsesMessagesWhereUCXWouldEmulateTheGet) {
  auto p = serve(1 << 20, GetMode::automatic);
  ASSERT_TRUE(p);
  const std::string info = p->ep->describe();
  EXPECT_NE(info.find("DLFS gets: by message"), std::string::npos) << info;
  EXPECT_NE(info.find("tcp/"), std::string::npos) << "with peer-failure handling, so over tcp:\n" << info;
  std::vector<std::byte> got(300000);
  ASSERT_TRUE(p->ep->get(*p->key, p->reg->address() + 5, got, 10s));
  EXPECT_EQ(0, std::memcmp(got.data(), p->stripe.data() + 5, got.size()));
}

// What ucp_ep_print_info prints in UCX 1.13 (lanes, then protocol lines).
TEST(FabricAmGets, OneSidedOnlyWithAGetLaneThatReadsUserMemory) {
  const std::string tcp =
      "#                 lane[0]:  1:tcp/lo.0 md[0]      -> md[0]/tcp/sysdev[255] am am_bw#0 keepalive wireup\n"
      "#                 am_send: 0..<egr/short>..65529..<egr/zcopy>..90763..<rndv>..(inf)\n";
  const std::string shm =
      "#                 lane[0]:  2:sysv/memory.0 md[1]  -> md[1]/sysv/sysdev[255] am am_bw#0\n"
      "#                 lane[1]:  3:posix/memory.0 md[2] -> md[2]/posix/sysdev[255]\n"
      "#                 lane[2]:  4:cma/memory.0 md[3]   -> md[3]/cma/sysdev[255] rma_bw#0\n"
      "#                  get[0]: 0..<bcopy>..(inf)\n"
      "#                  get[1]: 0..<bcopy>..(inf)\n";
  const std::string cma_tcp =
      "#                 lane[0]:  1:tcp/lo.0 md[0]       -> md[0]/tcp/sysdev[255] am am_bw#0 wireup\n"
      "#                 lane[1]:  2:cma/memory.0 md[1]   -> md[1]/cma/sysdev[255] rma_bw#0\n";
  const std::string rdma =
      "#                 lane[0]:  5:rc_mlx5/mlx5_0:1 md[4] -> md[4]/ib/sysdev[255] rma am am_bw#0 rma_bw#0\n"
      "#                  get[0]: 0..<bcopy>..8192..<zcopy>..(inf)\n";
  EXPECT_FALSE(gets_are_one_sided(tcp));
  EXPECT_FALSE(gets_are_one_sided(shm));      // get lanes, but on FIFOs: emulated
  EXPECT_FALSE(gets_are_one_sided(cma_tcp));  // cma only for rendezvous
  EXPECT_TRUE(gets_are_one_sided(rdma));
  EXPECT_FALSE(gets_are_one_sided(""));
}

// The range check itself, with what a peer could send that the fabric's own
// asker never would: lengths and addresses whose sums wrap around.
TEST(FabricAmGets, TheRangeCheckHoldsAtTheEdges) {
  std::vector<std::byte> mem = random_bytes(1000, 3);
  ServedMemory served;
  const uint64_t h = served.add(mem.data(), mem.size());
  const uint64_t base = reinterpret_cast<uint64_t>(mem.data());
  EXPECT_EQ(served.find(base, 1000), h);
  std::vector<std::byte> out(1000);
  ASSERT_TRUE(served.read(h, base, 1000, out.data()));
  EXPECT_EQ(0, std::memcmp(out.data(), mem.data(), 1000));
  ASSERT_TRUE(served.read(h, base + 500, 10, out.data()));
  EXPECT_EQ(0, std::memcmp(out.data(), mem.data() + 500, 10));
  EXPECT_EQ(served.find(base + 999, 1), h);
  EXPECT_EQ(served.find(base + 1000, 0), h);
  EXPECT_EQ(served.find(base + 999, 2), 0u);
  EXPECT_EQ(served.find(base - 1, 1), 0u);
  EXPECT_EQ(served.find(base + 10, ~uint64_t{0} - 5), 0u);  // base + 10 + length wraps
  EXPECT_EQ(served.find(~uint64_t{0} - 3, 10), 0u);
  EXPECT_FALSE(served.read(h, base + 999, 2, out.data()));
  EXPECT_FALSE(served.read(h + 1, base, 1, out.data()));  // another handle's range
  served.remove(h);
  EXPECT_EQ(served.find(base, 1), 0u);
  EXPECT_FALSE(served.read(h, base, 1, out.data())) << "read a range after it was removed";
}

// Gets into the caller's memory (start_get_into, what dlfsd's reads use):
// the right bytes at every size around the reply's chunk edges, alone and
// many in flight, and nothing written outside the destination.
TEST(FabricAmGets, GetsIntoTheCallersMemoryLandTheRightBytes) {
  const size_t size = 8 << 20;
  auto p = serve(size, GetMode::am);
  ASSERT_TRUE(p);
  std::mt19937_64 rng(7);
  const size_t guard = 64;
  for (size_t len : {size_t{0}, size_t{1}, kReplyChunk - 1, kReplyChunk, kReplyChunk + 1, 2 * kReplyChunk,
                     size_t{1} << 20, (size_t{1} << 20) + 13, (size_t{5} << 20) + 3}) {
    const size_t off = rng() % (size - len);
    std::vector<std::byte> buf(len + 2 * guard, std::byte{0x5a});
    std::span<std::byte> dst(buf.data() + guard, len);
    Endpoint::PendingGet g = p->ep->start_get_into(*p->key, p->reg->address() + off, dst);
    Status s = p->ep->finish_get(g, dst, std::chrono::steady_clock::now() + 10s);
    ASSERT_TRUE(s) << len << ": " << s.message();
    ASSERT_EQ(0, std::memcmp(dst.data(), p->stripe.data() + off, len)) << off << "+" << len;
    for (size_t i = 0; i < guard; ++i) {
      ASSERT_EQ(buf[i], std::byte{0x5a}) << "written before the destination, len " << len;
      ASSERT_EQ(buf[guard + len + i], std::byte{0x5a}) << "written past the destination, len " << len;
    }
  }
  std::vector<std::vector<std::byte>> dsts;
  std::vector<size_t> offs;
  std::vector<Endpoint::PendingGet> pending;
  for (int i = 0; i < 32; ++i) {
    const size_t len = 1 + rng() % (1 << 20);
    offs.push_back(rng() % (size - len));
    dsts.emplace_back(len);
  }
  for (int i = 0; i < 32; ++i) pending.push_back(p->ep->start_get_into(*p->key, p->reg->address() + offs[i], dsts[i]));
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  for (size_t i = 0; i < pending.size(); ++i) {
    Status s = p->ep->finish_get(pending[i], dsts[i], deadline);
    ASSERT_TRUE(s) << s.message();
    ASSERT_EQ(0, std::memcmp(dsts[i].data(), p->stripe.data() + offs[i], dsts[i].size())) << i;
  }
  // finish_get with another destination than the get started with is refused.
  std::vector<std::byte> a(4096), b(4096);
  Endpoint::PendingGet g = p->ep->start_get_into(*p->key, p->reg->address(), a);
  EXPECT_EQ(p->ep->finish_get(g, b, std::chrono::steady_clock::now() + 10s).err(), EINVAL);
  EXPECT_EQ(p->failures.load(), 0);
}

// A caller that gave up (its deadline passed, or it dropped the get) is
// never written afterwards, though the replies still arrive: each
// destination is refilled after its get was given up, and must stay so
// once a later get on the same endpoint (replies come in order) is answered.
TEST(FabricAmGets, ACallerThatGaveUpIsNeverWrittenLate) {
  const size_t size = 16 << 20;
  auto p = serve(size, GetMode::am);
  ASSERT_TRUE(p);
  const size_t len = 1 << 20;
  std::vector<std::vector<std::byte>> dsts(16, std::vector<std::byte>(len, std::byte{0x5a}));
  std::vector<Endpoint::PendingGet> pending;
  for (size_t i = 0; i < dsts.size(); ++i)
    pending.push_back(p->ep->start_get_into(*p->key, p->reg->address() + i * len, dsts[i]));
  size_t gave_up = 0;
  for (size_t i = 0; i < dsts.size(); ++i) {
    if (i % 2 == 1) {
      pending[i] = Endpoint::PendingGet();  // dropped unfinished
    } else {
      Status s = p->ep->finish_get(pending[i], dsts[i], std::chrono::steady_clock::now());  // deadline: now
      if (s) {
        EXPECT_EQ(0, std::memcmp(dsts[i].data(), p->stripe.data() + i * len, len)) << i;
        continue;
      }
      EXPECT_EQ(s.err(), ETIMEDOUT) << s.message();
    }
    ++gave_up;
    std::fill(dsts[i].begin(), dsts[i].end(), std::byte{0x5a});
  }
  ASSERT_GE(gave_up, 8u);
  std::vector<std::byte> last(len);
  ASSERT_TRUE(p->ep->get(*p->key, p->reg->address() + size - len, last, 10s));
  for (size_t i = 0; i < dsts.size(); ++i) {
    const bool refilled = std::all_of(dsts[i].begin(), dsts[i].end(), [](std::byte b) { return b == std::byte{0x5a}; });
    const bool right = std::memcmp(dsts[i].data(), p->stripe.data() + i * len, len) == 0;
    EXPECT_TRUE(refilled || right) << "get " << i << ": its destination was written after it was given up";
  }
}

// The server unregisters its memory while replies to it are still queued
// (the asker asks for far more than the socket holds): chunks packed after
// that carry a trailer that fails their get, so an asker never takes what
// the memory holds next for the stripe's bytes. The test reuses the memory
// at once, as a daemon that freed it might.
TEST(FabricAmGets, MemoryWithdrawnMidReplyFailsTheGetNeverWrongBytes) {
  const size_t size = 32 << 20;
  auto p = serve(size, GetMode::am);
  ASSERT_TRUE(p);
  const std::vector<std::byte> original = p->stripe;
  const size_t len = 1 << 20;
  std::vector<std::vector<std::byte>> dsts(64, std::vector<std::byte>(len));
  std::vector<Endpoint::PendingGet> pending;
  for (size_t i = 0; i < dsts.size(); ++i)
    pending.push_back(p->ep->start_get_into(*p->key, p->reg->address() + i % 32 * len, dsts[i]));
  // Wait for the first reply, so that the server is replying when it withdraws.
  ASSERT_TRUE(p->ep->finish_get(pending[0], dsts[0], std::chrono::steady_clock::now() + 10s));
  p->reg.reset();  // after this, nothing reads the stripe on the server's side
  std::fill(p->stripe.begin(), p->stripe.end(), std::byte{0xee});
  size_t ok = 1, failed = 0;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  for (size_t i = 1; i < dsts.size(); ++i) {
    Status s = p->ep->finish_get(pending[i], dsts[i], deadline);
    if (!s) {
      ++failed;
      // Packed after the withdrawal, or asked for after it.
      EXPECT_TRUE(s.message().find("withdrew") != std::string::npos ||
                  s.message().find("not inside memory it registered") != std::string::npos)
          << s.message();
      continue;
    }
    ++ok;
    ASSERT_EQ(0, std::memcmp(dsts[i].data(), original.data() + i % 32 * len, len)) << "get " << i << " took wrong bytes";
  }
  std::printf("[ withdrawn ] %zu gets served before, %zu failed after\n", ok, failed);
  EXPECT_GT(failed, 0u) << "every reply was out before the memory was withdrawn: the test proved nothing";
}

}  // namespace
}  // namespace dlfs::transport
