// Gets served by message (transport/am_get.h) over real UCX, and the fault
// they exist for: an asker SIGKILLed in the middle of its gets must not take
// the node serving them down. Built into unit_fabric, so it runs once per
// transport (UCX_TLS=tcp and shared memory, see meson.build); the in-process
// tests force GetMode::am, the kill test uses what daemons use (automatic).
// Tagged gets (round buffers) are checked here too, over UCX and over the
// in-process fake the cluster's tests use, against the same expectations.
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

// The fake fabric's tagged gets must meet the same contract as UCX's.
#include "fake_fabric.h"

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

// ---- tagged gets: round buffers -----------------------------------------------

// Byte i of a slot in round `tag`. Rounds less than 256 apart differ at every
// byte (97 is odd), so a byte of a neighbouring round never passes for this one's.
std::byte round_byte(uint64_t tag, size_t i) {
  return static_cast<std::byte>(i * 7 + (i >> 9) + tag * 97);
}

void fill_round(std::span<std::byte> slot, uint64_t tag) {
  for (size_t i = 0; i < slot.size(); ++i) slot[i] = round_byte(tag, i);
}

uint64_t address_of(std::span<const std::byte> s) { return reinterpret_cast<uint64_t>(s.data()); }

bool all_are(std::span<const std::byte> s, std::byte b) {
  return std::all_of(s.begin(), s.end(), [b](std::byte x) { return x == b; });
}

// What tagged gets do on any fabric: `server` serves, `ep` is a client's
// data endpoint to it.
void check_tagged_gets(Fabric& server, Endpoint& ep) {
  const size_t size = (1 << 20) + 13;  // several reply chunks
  std::vector<std::byte> slot(size);
  fill_round(slot, 7);
  auto first = server.serve_tagged(slot.data(), size, 7);
  ASSERT_TRUE(first) << first.status().message();
  const uint64_t base = address_of(slot);

  // The bytes served with the tag, whole and in part.
  std::vector<std::byte> got(size);
  Status s = ep.get_tagged(base, 7, got, 10s);
  ASSERT_TRUE(s) << s.message();
  EXPECT_TRUE(got == slot);
  std::vector<std::byte> part(70000);
  ASSERT_TRUE(ep.get_tagged(base + 1000, 7, part, 10s));
  EXPECT_EQ(0, std::memcmp(part.data(), slot.data() + 1000, part.size()));

  // Another tag: ESTALE, naming the tag; the destination stays as it was.
  std::vector<std::byte> untouched(100000, std::byte{0x5a});
  s = ep.get_tagged(base, 8, untouched, 10s);
  EXPECT_EQ(s.err(), ESTALE) << s.message();
  EXPECT_NE(s.message().find("tag 8"), std::string::npos) << s.message();
  EXPECT_TRUE(all_are(untouched, std::byte{0x5a}));
  // The right tag, but running past the range: no range with it holds the bytes.
  std::vector<std::byte> past(20);
  EXPECT_EQ(ep.get_tagged(base + size - 10, 7, past, 10s).err(), ESTALE);
  // Tag 0 is an untagged get's, on either side.
  EXPECT_EQ(ep.get_tagged(base, 0, part, 10s).err(), EINVAL);
  EXPECT_EQ(server.serve_tagged(slot.data(), size, 0).status().err(), EINVAL);

  // Unserved: refused from then on.
  server.unserve(*first);
  s = ep.get_tagged(base, 7, got, 10s);
  EXPECT_EQ(s.err(), ESTALE) << s.message();

  // The slot reused for the next round: same addresses, new bytes, new tag.
  fill_round(slot, 9);
  auto next = server.serve_tagged(slot.data(), size, 9);
  ASSERT_TRUE(next) << next.status().message();
  EXPECT_NE(*next, *first) << "a handle was reused";
  s = ep.get_tagged(base, 7, got, 10s);
  EXPECT_EQ(s.err(), ESTALE) << "the old round's tag read the new round's bytes: " << s.message();
  ASSERT_TRUE(ep.get_tagged(base, 9, got, 10s));
  EXPECT_TRUE(got == slot);
  EXPECT_EQ(got[0], round_byte(9, 0));

  // Two slots holding two rounds at once: each tag reads its own slot only.
  std::vector<std::byte> other(4096);
  fill_round(other, 10);
  auto second = server.serve_tagged(other.data(), other.size(), 10);
  ASSERT_TRUE(second);
  std::vector<std::byte> small(4096);
  ASSERT_TRUE(ep.get_tagged(address_of(other), 10, small, 10s));
  EXPECT_TRUE(small == other);
  EXPECT_EQ(ep.get_tagged(address_of(other), 9, small, 10s).err(), ESTALE);
  EXPECT_EQ(ep.get_tagged(base, 10, small, 10s).err(), ESTALE);
  ASSERT_TRUE(ep.get_tagged(base, 9, small, 10s));

  // Batched like untagged gets: started together, finished under one deadline.
  std::vector<Endpoint::PendingGet> pending;
  for (int i = 0; i < 8; ++i) pending.push_back(ep.start_get_tagged(base + i * 100000, 50000, i % 2 == 0 ? 9 : 7));
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (int i = 0; i < 8; ++i) {
    std::vector<std::byte> b(50000);
    s = ep.finish_get(pending[i], b, deadline);
    if (i % 2 == 0) {
      ASSERT_TRUE(s) << i << ": " << s.message();
      EXPECT_EQ(0, std::memcmp(b.data(), slot.data() + i * 100000, b.size())) << i;
    } else {
      EXPECT_EQ(s.err(), ESTALE) << i << ": " << s.message();
    }
  }

  server.unserve(*next);
  server.unserve(*second);
  server.unserve(*second);  // twice: ignored
  EXPECT_EQ(ep.get_tagged(base, 9, small, 10s).err(), ESTALE);
  EXPECT_EQ(ep.get_tagged(address_of(other), 10, small, 10s).err(), ESTALE);
  EXPECT_FALSE(ep.failed());
}

// One thread rewrites a slot round after round (unserve, write the new
// round's bytes, serve with its tag), others get from it with the tag they
// believe current: a get either fails with ESTALE or returns exactly its
// round's bytes, never some of another's.
void check_rounds_never_mix(Fabric& server, Endpoint& ep, std::chrono::milliseconds how_long) {
  const size_t size = (1 << 20) + 5;  // 18 reply chunks over UCX
  std::vector<std::byte> slot(size);
  fill_round(slot, 1);
  auto first = server.serve_tagged(slot.data(), size, 1);
  ASSERT_TRUE(first) << first.status().message();
  std::atomic<uint64_t> current{1};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> rounds{1};
  std::thread writer([&] {
    uint64_t handle = *first;
    std::mt19937_64 rng(1);
    for (uint64_t tag = 2; !stop.load(); ++tag) {
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
      server.unserve(handle);  // from here on no reply reads the slot: it may be rewritten
      fill_round(slot, tag);
      auto h = server.serve_tagged(slot.data(), size, tag);
      if (!h) {
        ADD_FAILURE() << h.status().message();
        return;
      }
      handle = *h;
      current.store(tag);
      ++rounds;
    }
    server.unserve(handle);
  });
  std::atomic<uint64_t> ok{0}, stale{0}, mid_reply{0}, wrong{0}, failed{0};
  std::mutex first_error_mu;
  std::string first_error;
  auto note_error = [&](const std::string& what) {
    std::lock_guard lk(first_error_mu);
    if (first_error.empty()) first_error = what;
  };
  // Checks one finished get of [off, off + got.size()) for `tag`.
  auto check = [&](const Status& s, uint64_t tag, size_t off, std::span<const std::byte> got) {
    if (!s) {
      if (s.err() != ESTALE) {
        ++failed;
        note_error(s.message());
      } else {
        ++stale;
        if (s.message().find("while replying") != std::string::npos) ++mid_reply;
      }
      return;
    }
    ++ok;
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != round_byte(tag, off + i)) {
        ++wrong;
        note_error("a get for tag " + std::to_string(tag) + " at " + std::to_string(off) + "+" +
                   std::to_string(got.size()) + " holds another round's byte at " + std::to_string(off + i));
        return;
      }
  };
  // Batches of gets in flight at once, so that replies queue behind each
  // other on the target and are packed later than their requests were checked.
  auto reader = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    constexpr int kBatch = 4;
    std::vector<std::vector<std::byte>> got(kBatch);
    const auto end = std::chrono::steady_clock::now() + how_long;
    while (std::chrono::steady_clock::now() < end) {
      const uint64_t tag = current.load();
      std::vector<Endpoint::PendingGet> pending;
      std::vector<size_t> offs;
      for (int i = 0; i < kBatch; ++i) {
        const size_t off = rng() % 4 == 0 ? 0 : rng() % size;
        const size_t len = rng() % 2 == 0 ? size - off : 1 + rng() % (size - off);
        got[i].assign(len, std::byte{0});
        offs.push_back(off);
        pending.push_back(ep.start_get_tagged(address_of(slot) + off, len, tag));
      }
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      for (int i = 0; i < kBatch; ++i) check(ep.finish_get(pending[i], got[i], deadline), tag, offs[i], got[i]);
    }
  };
  std::thread r1(reader, 11), r2(reader, 12);
  r1.join();
  r2.join();
  stop.store(true);
  writer.join();
  std::printf("[ rounds ] %llu rounds; gets: %llu right, %llu not this round (%llu of them mid-reply), %llu wrong, "
              "%llu failed\n",
              static_cast<unsigned long long>(rounds.load()), static_cast<unsigned long long>(ok.load()),
              static_cast<unsigned long long>(stale.load()), static_cast<unsigned long long>(mid_reply.load()),
              static_cast<unsigned long long>(wrong.load()), static_cast<unsigned long long>(failed.load()));
  EXPECT_EQ(wrong.load(), 0u) << first_error;
  EXPECT_EQ(failed.load(), 0u) << first_error;
  EXPECT_GT(ok.load(), 0u);
  EXPECT_GT(stale.load(), 0u) << "no get ever raced a new round: the test proved nothing";
  EXPECT_FALSE(ep.failed());
}

// A server fabric and a client's data endpoint to it, nothing registered.
struct TaggedPair {
  std::unique_ptr<Fabric> server, client;
  std::unique_ptr<Endpoint> ep;
};

// Fills `p` with a server and a client fabric and the client's endpoint to
// the server's worker; null (the test fails) if any of it could not be made.
template <typename Pair>
std::unique_ptr<Pair> connected(std::unique_ptr<Pair> p, Result<std::unique_ptr<Fabric>> s,
                                Result<std::unique_ptr<Fabric>> c) {
  EXPECT_TRUE(s && c);
  if (!s || !c) return nullptr;
  p->server = std::move(s).value();
  p->client = std::move(c).value();
  auto ep = p->client->connect_worker(p->server->worker_address(), "server", nullptr);
  EXPECT_TRUE(ep) << ep.status().message();
  if (!ep) return nullptr;
  p->ep = std::move(ep).value();
  return p;
}

std::unique_ptr<TaggedPair> tagged_pair(GetMode client_gets) {
  return connected(std::make_unique<TaggedPair>(), Fabric::create({.listen_host = "127.0.0.1", .port = 0}, [](Message&) {}),
                   Fabric::create({.listen_host = "", .port = 0, .listen = false, .gets = client_gets}, [](Message&) {}));
}

// The same over the in-process fake (transport tests of the layer above use it).
struct FakePair {
  test::FakeNetwork net;
  std::unique_ptr<Fabric> server, client;
  std::unique_ptr<Endpoint> ep;
};

std::unique_ptr<FakePair> fake_pair() {
  auto p = std::make_unique<FakePair>();
  auto s = p->net.factory()({.listen_host = "", .port = 1}, [](Message&) {});
  auto c = p->net.factory()({.listen_host = "", .port = 2}, [](Message&) {});
  return connected(std::move(p), std::move(s), std::move(c));
}

TEST(TaggedGets, ReadOnlyTheRoundServedWithTheirTag) {
  auto p = tagged_pair(GetMode::am);
  ASSERT_TRUE(p);
  check_tagged_gets(*p->server, *p->ep);
}

// An endpoint whose untagged gets are one-sided (ucp_get: over shared memory,
// with a cma lane, in fabric_shm): its tagged gets go by message all the
// same, which the refusals of wrong tags show (a one-sided get checks nothing).
TEST(TaggedGets, GoByMessageWhereUntaggedGetsAreOneSided) {
  auto p = tagged_pair(GetMode::rma);
  ASSERT_TRUE(p);
  const std::string info = p->ep->describe();
  ASSERT_NE(info.find("DLFS gets: ucp_get (rma)"), std::string::npos) << info;
  if (const char* tl = std::getenv("DLFS_EXPECT_TL")) {
    EXPECT_NE(info.find(tl), std::string::npos) << info;
  }
  check_tagged_gets(*p->server, *p->ep);

  // A round buffer inside registered memory: the registration's untagged gets
  // are not affected by serving or unserving a tagged range in it, and
  // unserve() leaves a registration's range alone.
  std::vector<std::byte> stripe = random_bytes(1 << 20, 21);
  auto reg = p->server->register_memory(stripe.data(), stripe.size());
  ASSERT_TRUE(reg) << reg.status().message();
  auto key = p->ep->unpack((*reg)->packed_rkey());
  ASSERT_TRUE(key) << key.status().message();
  const std::span<std::byte> round(stripe.data() + 4096, 200000);
  fill_round(round, 5);
  auto h = p->server->serve_tagged(round.data(), round.size(), 5);
  ASSERT_TRUE(h);
  std::vector<std::byte> got(round.size());
  ASSERT_TRUE(p->ep->get_tagged(address_of(round), 5, got, 10s));
  EXPECT_EQ(0, std::memcmp(got.data(), round.data(), got.size()));
  p->server->unserve(*h);
  EXPECT_EQ(p->ep->get_tagged(address_of(round), 5, got, 10s).err(), ESTALE);
  Status s = p->ep->get(**key, address_of(round), got, 10s);
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(0, std::memcmp(got.data(), round.data(), got.size()));
  for (uint64_t handle = 0; handle < 64; ++handle) p->server->unserve(handle);  // none is a tagged range now
  ASSERT_TRUE(p->ep->get(**key, (*reg)->address(), got, 10s)) << "unserve removed a registration's range";
  EXPECT_EQ(0, std::memcmp(got.data(), stripe.data(), got.size()));
}

TEST(TaggedGets, RoundsNeverMixUnderConcurrentRewrites) {
  auto p = tagged_pair(GetMode::automatic);
  ASSERT_TRUE(p);
  check_rounds_never_mix(*p->server, *p->ep, 2s);
}

TEST(TaggedGets, RoundsNeverMixOnAnEndpointThatGetsOneSided) {
  auto p = tagged_pair(GetMode::rma);
  ASSERT_TRUE(p);
  check_rounds_never_mix(*p->server, *p->ep, 1s);
}

TEST(TaggedGets, TheFakeFabricKeepsTheSameContract) {
  auto p = fake_pair();
  ASSERT_TRUE(p);
  check_tagged_gets(*p->server, *p->ep);
  check_rounds_never_mix(*p->server, *p->ep, 1s);
  // A node cut off: its tagged gets fail as untagged ones do, not as another round.
  std::vector<std::byte> slot(4096);
  ASSERT_TRUE(p->server->serve_tagged(slot.data(), slot.size(), 3));
  p->net.drop(1);
  std::vector<std::byte> got(4096);
  EXPECT_EQ(p->ep->get_tagged(address_of(slot), 3, got, 10s).err(), ECONNRESET);
}

// The tag check of ServedMemory itself.
TEST(TaggedGets, ServedMemoryMatchesTagsExactly) {
  std::vector<std::byte> mem = random_bytes(1000, 4);
  const uint64_t base = reinterpret_cast<uint64_t>(mem.data());
  ServedMemory served;
  const uint64_t whole = served.add(mem.data(), mem.size());       // a registration: untagged
  const uint64_t round = served.add(mem.data() + 100, 500, 7);      // a round buffer inside it
  EXPECT_EQ(served.find(base + 100, 10), whole) << "untagged gets read the untagged range";
  EXPECT_EQ(served.find(base + 100, 10, 7), round);
  EXPECT_EQ(served.find(base + 100, 500, 7), round);
  EXPECT_EQ(served.find(base + 100, 501, 7), 0u);
  EXPECT_EQ(served.find(base, 10, 7), 0u) << "inside the registration, outside the round";
  EXPECT_EQ(served.find(base + 100, 10, 8), 0u);
  EXPECT_EQ(served.find(base + 150, ~uint64_t{0} - 5, 7), 0u);  // the sum wraps
  EXPECT_FALSE(served.remove_tagged(whole)) << "unserve must not remove a registration";
  EXPECT_EQ(served.find(base, 10), whole);
  served.remove(whole);
  EXPECT_EQ(served.find(base + 100, 10), 0u) << "an untagged get never reads a round's slot";
  EXPECT_EQ(served.find(base, 10), 0u);
  // The range served again for the next round: a new handle, and the old one reads nothing.
  std::vector<std::byte> out(10);
  ASSERT_TRUE(served.read(round, base + 100, 10, out.data()));
  EXPECT_TRUE(served.remove_tagged(round));
  EXPECT_FALSE(served.remove_tagged(round));
  const uint64_t next = served.add(mem.data() + 100, 500, 8);
  EXPECT_NE(next, round);
  EXPECT_FALSE(served.read(round, base + 100, 10, out.data())) << "the old round's handle read the new round";
  EXPECT_EQ(served.find(base + 100, 10, 7), 0u);
  EXPECT_EQ(served.find(base + 100, 10, 8), next);
  ASSERT_TRUE(served.read(next, base + 100, 10, out.data()));
  EXPECT_EQ(0, std::memcmp(out.data(), mem.data() + 100, 10));
}

}  // namespace
}  // namespace dlfs::transport
