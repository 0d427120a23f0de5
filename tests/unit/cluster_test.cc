// The Cluster's protocol over the in-process fake fabric: joins, refusals,
// peers going down and coming back, stalled gets. Each node has a real
// StorageBuffer (its stripe, loaded from a dataset on disk) and a real
// Fetcher, as fs/dataset.cc builds them; timings are milliseconds so the file
// runs in a few seconds.
#include "transport/cluster.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "cache/fetcher.h"
#include "cache/loader.h"
#include "cache/stripe_map.h"
#include "cache_test_util.h"
#include "fake_fabric.h"
#include "temp_dir.h"
#include "transport/cluster_messages.h"

namespace dlfs::transport {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using nlohmann::json;
using test::FakeNetwork;

constexpr uint16_t kBasePort = 17000;
constexpr uint64_t kExtent = 16 << 10;
constexpr uint64_t kFingerprint = 0xd1f5;
constexpr auto kDownAfter = 150ms;
constexpr auto kGetTimeout = 100ms;

// Polls `cond` until it holds or `timeout` passes; returns whether it held.
bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout = 5s) {
  const auto deadline = Clock::now() + timeout;
  while (!cond()) {
    if (Clock::now() > deadline) return cond();
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// One daemon's share: its stripe in memory, its fetcher, its cluster
// (declared last: it leaves before the fetcher and buffer go).
struct Node {
  std::unique_ptr<cache::StorageBuffer> buffer;
  std::unique_ptr<cache::Fetcher> fetcher;
  std::unique_ptr<Cluster> cluster;
};

class ClusterTest : public dlfs::test::TempDirTest {
 protected:
  void SetUp() override {
    cache::test::make_dataset(tmp_.path(), 60, 40000, 7);
    data_ = cache::test::scan(tmp_.path());
    ASSERT_TRUE(data_ && data_->reader);
    ASSERT_GT(data_->bytes.size(), 3 * 4 * kExtent) << "a few extents per stripe";
  }

  // Starts `tokens.size()` nodes, node i with tokens[i].
  void start(const std::vector<std::string>& tokens) {
    tokens_ = tokens;
    stripes_ = cache::StripeMap(data_->bytes.size(), static_cast<uint32_t>(tokens.size()));
    nodes_.resize(tokens.size());
    for (uint32_t i = 0; i < tokens.size(); ++i) start_node(i);
  }

  // (Re)makes node i from scratch: new memory, loaded, a new fetcher and cluster.
  void start_node(uint32_t i) {
    Node& n = *(nodes_[i] = std::make_unique<Node>());
    cache::StorageOptions so;
    so.extent_size = kExtent;
    so.huge_pages = false;
    auto b = cache::StorageBuffer::create(stripes_.begin(i), stripes_.end(i), so);
    ASSERT_TRUE(b) << b.status().message();
    n.buffer = std::move(b).value();
    cache::Loader loader(*n.buffer, *data_->reader, {.threads = 1, .log_interval_s = 0, .label = "ds"});
    loader.start();
    loader.wait();
    ASSERT_EQ(n.buffer->resident_extents(), n.buffer->extent_count());
    n.fetcher = std::make_unique<cache::Fetcher>(*data_->reader, stripes_, i);
    n.fetcher->set_local(n.buffer.get());
    ClusterOptions o;
    for (uint32_t r = 0; r < tokens_.size(); ++r) o.membership.peers.push_back({"node" + std::to_string(r), port(r)});
    o.membership.self = i;
    o.membership.source = "peers";
    o.token = tokens_[i];
    o.heartbeat = 5ms;
    o.down_after = kDownAfter;
    o.get_timeout = kGetTimeout;
    o.reconnect = 20ms;
    auto c = Cluster::create(std::move(o), {{"ds", kFingerprint, n.buffer.get(), n.fetcher.get()}}, nullptr,
                             net_.factory());
    ASSERT_TRUE(c) << c.status().message();
    n.cluster = std::move(c).value();
  }

  static uint16_t port(uint32_t rank) { return static_cast<uint16_t>(kBasePort + rank); }
  json member(uint32_t observer, uint32_t peer) const { return nodes_[observer]->cluster->status()["members"][peer]; }
  std::string state(uint32_t observer, uint32_t peer) const { return member(observer, peer)["state"]; }
  bool sees(uint32_t observer, uint32_t peer, const std::string& s) const { return state(observer, peer) == s; }
  bool all_resident(uint32_t observer) const { return nodes_[observer]->cluster->status()["all_resident"]; }

  // A range inside `owner`'s stripe, a few extents long, not extent-aligned.
  std::pair<uint64_t, size_t> range_of(uint32_t owner) const {
    return {stripes_.begin(owner) + 1000, static_cast<size_t>(3 * kExtent)};
  }
  // Reads through node `reader`'s fetcher and checks the bytes.
  void read_and_check(uint32_t reader, uint64_t offset, size_t length) {
    std::vector<std::byte> got(length);
    ASSERT_TRUE(nodes_[reader]->fetcher->read(offset, got));
    ASSERT_EQ(0, std::memcmp(got.data(), data_->bytes.data() + offset, length)) << "at " << offset;
  }
  const cache::FetchCounters& counters(uint32_t node) const { return nodes_[node]->fetcher->counters(); }

  FakeNetwork net_;
  std::unique_ptr<cache::test::Dataset> data_;
  cache::StripeMap stripes_;
  std::vector<std::string> tokens_;
  std::vector<std::unique_ptr<Node>> nodes_;  // last: clusters leave first
};

TEST_F(ClusterTest, ThreeNodesJoinSeeEachOtherAndServeEachOthersStripes) {
  start({"job", "job", "job"});
  for (uint32_t a = 0; a < 3; ++a)
    ASSERT_TRUE(eventually([&] { return all_resident(a); })) << nodes_[a]->cluster->status().dump(2);
  const json s = nodes_[1]->cluster->status();
  EXPECT_EQ(s["self"], 1);
  EXPECT_EQ(s["size"], 3);
  EXPECT_EQ(s["source"], "peers");
  ASSERT_EQ(s["members"].size(), 3u);
  for (uint32_t r = 0; r < 3; ++r) {
    const json& m = s["members"][r];
    EXPECT_EQ(m["rank"], r);
    EXPECT_EQ(m["address"], "node" + std::to_string(r) + ":" + std::to_string(port(r)));
    EXPECT_EQ(m["state"], r == 1 ? "self" : "up");
    const json& st = m["stripes"]["ds"];
    EXPECT_EQ(st["begin"], stripes_.begin(r));
    EXPECT_EQ(st["end"], stripes_.end(r));
    EXPECT_EQ(st["extents"], nodes_[r]->buffer->extent_count());
    EXPECT_EQ(st["resident_extents"], nodes_[r]->buffer->extent_count());
  }
  // Every node reads the whole byte space: its stripe from memory, the others' with gets.
  for (uint32_t a = 0; a < 3; ++a) {
    for (uint64_t off = 0; off < data_->bytes.size(); off += 9973)
      read_and_check(a, off, std::min<uint64_t>(9973, data_->bytes.size() - off));
    EXPECT_GT(counters(a).remote_bytes.load(), 0u);
    EXPECT_EQ(counters(a).backend_bytes.load(), 0u) << "node " << a << " went to the backend";
    EXPECT_EQ(counters(a).remote_fallbacks.load(), 0u);
  }
  EXPECT_GT(net_.gets_served(port(0)), 0u);
}

TEST_F(ClusterTest, AWrongTokenIsRefusedOnBothSidesAndGetsNoBytes) {
  start({"job", "job", "another job"});
  ASSERT_TRUE(eventually([&] { return sees(0, 1, "up") && sees(1, 0, "up"); }));
  ASSERT_TRUE(eventually([&] { return sees(0, 2, "refused") && sees(1, 2, "refused"); }));
  ASSERT_TRUE(eventually([&] { return sees(2, 0, "refused") && sees(2, 1, "refused"); }));
  EXPECT_EQ(member(0, 2)["last_error"], "refused: wrong job token");
  EXPECT_EQ(member(2, 1)["last_error"], "refused: wrong job token");
  EXPECT_TRUE(member(0, 2)["stripes"].empty()) << "a refused node's stripes are never known";
  // Node 2 reads node 0's stripe: from the backend, never from node 0's memory.
  auto [off, len] = range_of(0);
  read_and_check(2, off, len);
  EXPECT_EQ(counters(2).remote_bytes.load(), 0u);
  EXPECT_EQ(counters(2).remote_gets.load(), 0u);
  EXPECT_EQ(counters(2).backend_bytes.load(), len);
  EXPECT_EQ(net_.gets_served(port(0)), 0u);
  EXPECT_EQ(net_.gets_served(port(1)), 0u);
}

TEST_F(ClusterTest, ASilentNodeIsDownWithinDownAfterAndBackWhenItAnswersAgain) {
  start({"job", "job", "job"});
  ASSERT_TRUE(eventually([&] { return all_resident(0); }));
  net_.mute(port(1));  // it stops answering pings
  const auto muted = Clock::now();
  ASSERT_TRUE(eventually([&] { return sees(0, 1, "down") && sees(2, 1, "down"); }));
  const auto took = Clock::now() - muted;
  EXPECT_GE(took, kDownAfter - 20ms) << "marked down before down_after";
  EXPECT_LT(took, kDownAfter + 1s) << "not marked down in time";
  EXPECT_NE(member(0, 1).value("last_error", std::string()).find("no heartbeat"), std::string::npos);
  // Its stripe: not fetched from it, the caller reads the backend.
  auto [off, len] = range_of(1);
  const uint64_t remote_before = counters(0).remote_bytes, served_before = net_.gets_served(port(1));
  read_and_check(0, off, len);
  EXPECT_EQ(counters(0).remote_bytes.load(), remote_before);
  EXPECT_EQ(counters(0).backend_bytes.load(), len);
  EXPECT_EQ(net_.gets_served(port(1)), served_before);
  net_.mute(port(1), false);
  ASSERT_TRUE(eventually([&] { return sees(0, 1, "up") && sees(2, 1, "up") && all_resident(0); }));
  read_and_check(0, off, len);
  EXPECT_EQ(counters(0).remote_bytes.load(), remote_before + len) << "gets resume";
  EXPECT_EQ(counters(0).backend_bytes.load(), len);
}

TEST_F(ClusterTest, ADroppedNodeIsDownAndARestartedOneServesItsNewMemory) {
  start({"job", "job", "job"});
  ASSERT_TRUE(eventually([&] { return all_resident(0) && all_resident(1); }));
  net_.drop(port(2));
  ASSERT_TRUE(eventually([&] { return sees(0, 2, "down") && sees(1, 2, "down"); }, kDownAfter + 1s));
  EXPECT_EQ(member(0, 2)["last_error"], "connection lost");
  auto [off, len] = range_of(2);
  read_and_check(0, off, len);
  EXPECT_EQ(counters(0).backend_bytes.load(), len);
  // The daemon restarts: new memory, new keys, a new session.
  nodes_[2]->cluster.reset();
  net_.drop(port(2), false);
  start_node(2);
  ASSERT_TRUE(eventually([&] { return sees(0, 2, "up") && sees(1, 2, "up") && all_resident(0) && all_resident(2); }));
  const uint64_t remote_before = counters(0).remote_bytes;
  read_and_check(0, off, len);
  EXPECT_EQ(counters(0).remote_bytes.load(), remote_before + len);
  EXPECT_EQ(counters(0).backend_bytes.load(), len) << "no more backend reads once it is back";
  read_and_check(2, range_of(0).first, range_of(0).second);
  EXPECT_EQ(counters(2).backend_bytes.load(), 0u) << "the restarted node gets from its peers too";
}

TEST_F(ClusterTest, StalledGetsReturnWithinGetTimeoutFallBackAndNeverWriteLate) {
  start({"job", "job"});
  ASSERT_TRUE(eventually([&] { return all_resident(0); }));
  net_.stall_gets(port(1));
  auto [off, len] = range_of(1);
  std::vector<std::byte> dst(len);
  const auto t0 = Clock::now();
  ASSERT_TRUE(nodes_[0]->fetcher->read(off, dst));
  const auto took = Clock::now() - t0;
  EXPECT_GE(took, kGetTimeout - 5ms) << "the get was not waited for";
  EXPECT_LT(took, kGetTimeout + 500ms) << "the get was not bounded by get_timeout";
  EXPECT_EQ(0, std::memcmp(dst.data(), data_->bytes.data() + off, len)) << "the backend's bytes";
  EXPECT_EQ(counters(0).remote_fallbacks.load(), 1u);
  EXPECT_EQ(counters(0).backend_bytes.load(), len);
  EXPECT_TRUE(sees(0, 1, "down")) << "a stalled data path marks the peer down at once";
  EXPECT_NE(member(0, 1).value("last_error", std::string()).find("missed their deadline"), std::string::npos);
  // The held get completes now, late: it must not land in dst.
  std::memset(dst.data(), 0xab, dst.size());
  ASSERT_EQ(net_.gets_stalled(port(1)), 1u);
  const uint64_t served = net_.gets_served(port(1));
  net_.stall_gets(port(1), false);
  EXPECT_EQ(net_.gets_served(port(1)), served + 1);
  for (std::byte b : dst) ASSERT_EQ(b, std::byte{0xab}) << "a get wrote its destination after it returned";
  // The peer is rejoined after `reconnect` and gets resume.
  ASSERT_TRUE(eventually([&] { return sees(0, 1, "up") && all_resident(0); }));
  const uint64_t remote_before = counters(0).remote_bytes;
  read_and_check(0, off, len);
  EXPECT_EQ(counters(0).remote_bytes.load(), remote_before + len);
}

// Messages from outside the job: garbage is ignored, a ping with a wrong
// token is refused, and the node keeps serving its peers.
TEST_F(ClusterTest, MalformedAndForeignMessagesAreIgnoredOrRefused) {
  start({"job", "job"});
  ASSERT_TRUE(eventually([&] { return all_resident(0) && all_resident(1); }));
  std::mutex mu;
  std::vector<std::string> answers;
  auto outsider = net_.factory()({.listen_host = "", .port = 17999, .listen = true}, [&](Message& m) {
    std::lock_guard lk(mu);
    answers.push_back(m.bytes);
  });
  ASSERT_TRUE(outsider) << outsider.status().message();
  auto ep = (*outsider)->connect("node0", port(0), nullptr);
  ASSERT_TRUE(ep);
  const std::string ping = encode(Ping{.rank = 1, .token_digest = "guess", .session = 5});
  for (const std::string& junk : {std::string("\xc1garbage"), ping.substr(0, ping.size() / 2), std::string()})
    ASSERT_TRUE((*ep)->send(junk));
  ASSERT_TRUE((*ep)->send(ping));
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lk(mu);
    return !answers.empty();
  }));
  {
    std::lock_guard lk(mu);
    ASSERT_EQ(answers.size(), 1u) << "only the ping is answered";
    auto refused = decode(answers[0]);
    ASSERT_TRUE(refused) << refused.status().message();
    ASSERT_TRUE(std::holds_alternative<Refused>(*refused));
    EXPECT_EQ(std::get<Refused>(*refused).why, "wrong job token");
    EXPECT_EQ(std::get<Refused>(*refused).session, 5u);
  }
  EXPECT_TRUE(sees(0, 1, "up"));
  read_and_check(1, range_of(0).first, range_of(0).second);
  EXPECT_EQ(counters(1).backend_bytes.load(), 0u);
  ep->reset();
}

}  // namespace
}  // namespace dlfs::transport
