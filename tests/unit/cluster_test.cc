// The Cluster's protocol over the in-process fake fabric: joins, refusals,
// peers going down and coming back, stalled gets, and what someone without
// the token can do with recorded traffic (replay a join or heartbeats,
// reflect a challenge, send garbage): nothing. Each node has a real
// StorageBuffer (its stripe, loaded from a dataset on disk) and a real
// Fetcher, as fs/dataset/dataset.cc builds them; timings are milliseconds so the file
// runs in a few seconds.
#include "transport/cluster.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <algorithm>
#include <functional>
#include <thread>
#include <type_traits>
#include <variant>

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
using test::RawNode;

constexpr uint16_t kBasePort = 17000;
constexpr uint64_t kExtent = 16 << 10;
constexpr uint64_t kFingerprint = 0xd1f5;
constexpr auto kDownAfter = 150ms;
constexpr auto kGetTimeout = 100ms;

// The kind of a message as a receiver decodes it ("garbage" if it does not).
std::string kind_of(const std::string& bytes) {
  auto m = decode(bytes);
  if (!m) return "garbage";
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Sealed>) return message_name(x.kind);
        else if constexpr (std::is_same_v<T, VersionMismatch>) return "version mismatch";
        else return message_name(T::kind);
      },
      *m);
}

// The same message bytes claiming another sender and receiver (what a
// relay without the token can change: the clear header).
std::string readdressed(const std::string& bytes, uint32_t rank, uint32_t to) {
  json j = json::from_msgpack(bytes);
  j["rank"] = rank;
  j["to"] = to;
  auto v = json::to_msgpack(j);
  return std::string(v.begin(), v.end());
}

template <typename T>
T as(const std::string& bytes) {
  auto m = decode(bytes);
  if (!m || !std::holds_alternative<T>(*m)) {
    ADD_FAILURE() << "not the expected kind: " << kind_of(bytes);
    return T{};
  }
  return std::get<T>(*m);
}

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

  // Starts `tokens.size()` nodes, node i with tokens[i] (or only the ranks in
  // `only`: the others' ports stay free for a RawNode).
  void start(const std::vector<std::string>& tokens, const std::vector<uint32_t>& only = {}) {
    tokens_ = tokens;
    stripes_ = cache::StripeMap(data_->bytes.size(), static_cast<uint32_t>(tokens.size()));
    nodes_.resize(tokens.size());
    for (uint32_t i = 0; i < tokens.size(); ++i)
      if (only.empty() || std::find(only.begin(), only.end(), i) != only.end()) start_node(i);
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
    o.down_after = down_after_;
    o.watch = watch_;
    o.join_report_after = 50ms;
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

  // Every message node `from` sent to node `to` while recorded.
  std::vector<FakeNetwork::Sent> sent(uint32_t from, uint32_t to) const {
    std::vector<FakeNetwork::Sent> out;
    for (auto& s : net_.sent(port(from)))
      if (s.to == port(to)) out.push_back(s);
    return out;
  }

  std::chrono::milliseconds down_after_ = kDownAfter;
  uint32_t watch_ = 3;
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
    // Every get was timed (the latency histogram: docs/stats.md), none failed.
    const json gets = nodes_[a]->cluster->status()["gets"];
    EXPECT_GT(gets["latency"]["count"].get<uint64_t>(), 0u) << gets.dump();
    EXPECT_GT(gets["latency"]["sum_s"].get<double>(), 0.0) << gets.dump();
    EXPECT_EQ(gets["failed"], json({{"timeout", 0}, {"stale", 0}, {"error", 0}})) << gets.dump();
  }
  EXPECT_GT(net_.gets_served(port(0)), 0u);
}

TEST_F(ClusterTest, AWrongTokenIsRefusedOnBothSidesAndGetsNoBytes) {
  for (uint32_t r = 0; r < 3; ++r) net_.record(port(r));
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
  // Node 2's view holds nothing of the others: no stripe, no residency, no bytes.
  for (uint32_t r : {0u, 1u}) {
    const json m = member(2, r);
    EXPECT_TRUE(m["stripes"].empty()) << m.dump();
    EXPECT_EQ(m["bytes"], json({{"local", 0}, {"remote", 0}, {"backend", 0}})) << m.dump();
  }
  // And nothing the job's nodes sent it carries any: their hellos and
  // challenges (a random nonce), proofs (a MAC, their datasets sealed with a
  // key node 2 cannot derive) and refusals (a reason); never a key, an
  // address, a dataset name.
  for (uint32_t r : {0u, 1u}) {
    const auto to_2 = sent(r, 2);
    ASSERT_FALSE(to_2.empty());
    bool refused = false;
    for (const auto& m : to_2) {
      const std::string kind = kind_of(m.bytes);
      EXPECT_TRUE(kind == "hello" || kind == "challenge" || kind == "proof" || kind == "refused")
          << "node " << r << " sent a " << kind;
      EXPECT_EQ(m.bytes.find("fake-key:"), std::string::npos) << "a remote key went to the other job";
      EXPECT_EQ(m.bytes.find("fake:"), std::string::npos) << "a worker address went to the other job";
      EXPECT_EQ(m.bytes.find("\xa2" "ds"), std::string::npos) << "a dataset name went to the other job";
      if (kind == "refused") {
        const auto why = as<Refused>(m.bytes).why;
        EXPECT_EQ(why, "wrong job token");
        refused = true;
      }
    }
    EXPECT_TRUE(refused);
  }
}

TEST_F(ClusterTest, ASilentNodeIsDownWithinDownAfterAndBackWhenItAnswersAgain) {
  start({"job", "job", "job"});
  // Both observers must have node 1 up first: a join still under way when it
  // goes silent ends as "no answer to the join", not as down (a loaded machine
  // showed that race).
  ASSERT_TRUE(eventually([&] { return all_resident(0) && sees(0, 1, "up") && sees(2, 1, "up"); }));
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

TEST_F(ClusterTest, AnIdleNodePingsOnlyTheNodesItWatches) {
  watch_ = 2;
  start({"job", "job", "job", "job", "job", "job"});
  ASSERT_TRUE(eventually([&] {
    for (uint32_t i = 0; i < 6; ++i)
      if (!all_resident(i)) return false;
    return true;
  }));
  net_.record(port(4));
  std::this_thread::sleep_for(200ms);  // 40 heartbeats
  net_.record(port(4), false);
  std::vector<size_t> pings(6, 0);
  for (uint32_t to = 0; to < 6; ++to)
    for (const auto& s : sent(4, to)) pings[to] += !s.reply && kind_of(s.bytes) == "ping";
  // Rank 4 watches 5 and 0 (the next two on the ring), and pings no one else
  // once everyone is loaded.
  EXPECT_GT(pings[5], 10u);
  EXPECT_GT(pings[0], 10u);
  EXPECT_EQ(pings[1], 0u);
  EXPECT_EQ(pings[2], 0u);
  EXPECT_EQ(pings[3], 0u);
  const json st = nodes_[4]->cluster->status();
  EXPECT_EQ(st["peers_up"], 5);
  EXPECT_TRUE(st["members"][5]["watched"]);
  EXPECT_FALSE(st["members"][1]["watched"]);
  EXPECT_GT(st["membership"]["sent"]["by_kind"]["ping"]["messages"].get<uint64_t>(), 10u);
  // One join per peer (and a retry for a peer whose fabric was not up yet).
  EXPECT_GE(st["membership"]["sent"]["by_kind"]["hello"]["messages"].get<uint64_t>(), 5u);
  EXPECT_LE(st["membership"]["sent"]["by_kind"]["hello"]["messages"].get<uint64_t>(), 10u);
}

TEST_F(ClusterTest, ASilentNodeIsReportedByItsWatcherAndEveryMemberMarksItDown) {
  watch_ = 1;  // only rank 2 pings rank 3
  start({"job", "job", "job", "job", "job"});
  ASSERT_TRUE(eventually([&] {
    for (uint32_t i = 0; i < 5; ++i)
      if (!all_resident(i)) return false;
    return true;
  }));
  net_.mute(port(3));
  const auto muted = Clock::now();
  ASSERT_TRUE(eventually([&] { return sees(0, 3, "down") && sees(1, 3, "down") && sees(2, 3, "down") && sees(4, 3, "down"); },
                         kDownAfter + 2s));
  EXPECT_LT(Clock::now() - muted, kDownAfter + 1s);
  EXPECT_NE(member(0, 3).value("last_error", std::string()).find("rank 2 found it silent"), std::string::npos)
      << member(0, 3).dump();
  EXPECT_NE(member(2, 3).value("last_error", std::string()).find("no heartbeat"), std::string::npos);
  // Its stripe comes from the backend meanwhile, on a node that never pinged it.
  auto [off, len] = range_of(3);
  read_and_check(0, off, len);
  EXPECT_EQ(counters(0).backend_bytes.load(), len);
  net_.mute(port(3), false);
  ASSERT_TRUE(eventually([&] { return sees(0, 3, "up") && sees(2, 3, "up") && sees(4, 3, "up"); }));
  // A notice about a member that is alive costs a rejoin, nothing more.
  EXPECT_TRUE(eventually([&] { return all_resident(0); }));
}

TEST_F(ClusterTest, ANodeThatCannotJoinAPeerShowsWhichAndWhy) {
  start({"job", "job", "job"}, {0, 1});  // rank 2 never starts
  ASSERT_TRUE(eventually([&] { return sees(0, 1, "up"); }));
  std::this_thread::sleep_for(100ms);
  const json st = nodes_[0]->cluster->status();
  EXPECT_EQ(st["peers_up"], 1);
  EXPECT_EQ(st["members"][2]["state"], "connecting");
  EXPECT_GT(st["members"][2]["since_s"].get<double>(), 0.05);
  EXPECT_FALSE(st["members"][2].value("last_error", std::string()).empty()) << st["members"][2].dump();
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
  EXPECT_EQ(nodes_[0]->cluster->status()["gets"]["failed"]["timeout"], 1) << "the late get counts as a timeout";
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

// Messages from outside the job: garbage, truncated, oversized or
// other-version bytes, pings on no session. Garbage is ignored, the rest
// refused with a reason and nothing else, and the node keeps serving.
TEST_F(ClusterTest, MalformedForeignAndOtherVersionMessagesAreIgnoredOrRefused) {
  start({"job", "job"});
  ASSERT_TRUE(eventually([&] { return all_resident(0) && all_resident(1); }));
  RawNode outsider(net_, 17999);
  Ping forged;
  forged.rank = 1;
  forged.to = 0;
  forged.session = 5;
  forged.counter = 1;
  const std::string ping = encode(forged, session_key(job_key("guess"), {}));
  for (const std::string& junk : {std::string("\xc1garbage"), ping.substr(0, ping.size() / 2), std::string(),
                                  std::string(kMaxMessageBytes + 1, '\x90')})
    ASSERT_TRUE(outsider.send(port(0), junk));
  ASSERT_TRUE(outsider.send(port(0), ping));
  ASSERT_TRUE(outsider.wait_received(1));
  // A version-1 hello (the token digest of old): refused, naming both versions.
  const auto v1 = json::to_msgpack(
      json{{"t", "hello"}, {"rank", 1}, {"token", "digest"}, {"session", 6}, {"datasets", json::object()}});
  ASSERT_TRUE(outsider.send(port(0), std::string(v1.begin(), v1.end())));
  ASSERT_TRUE(outsider.wait_received(2));
  std::this_thread::sleep_for(50ms);
  const auto answers = outsider.received();
  ASSERT_EQ(answers.size(), 2u) << "garbage is not answered";
  const Refused r1 = as<Refused>(answers[0]);
  EXPECT_EQ(r1.why, "not on a session this node admitted (join again)");
  EXPECT_EQ(r1.session, 5u);
  const Refused r2 = as<Refused>(answers[1]);
  EXPECT_EQ(r2.why, "protocol version 1 is not this node's (4): run one DLFS version on every node");
  EXPECT_EQ(r2.session, 6u);
  EXPECT_TRUE(sees(0, 1, "up"));
  read_and_check(1, range_of(0).first, range_of(0).second);
  EXPECT_EQ(counters(1).backend_bytes.load(), 0u);
}

// An eavesdropper that recorded a whole join (hello, proof) and heartbeats
// replays them from another node: the join is refused (the challenge is new,
// the old proof does not answer it), the pings are refused (their counters
// were taken), nothing sealed comes back, and the real session is untouched.
TEST_F(ClusterTest, ARecordedJoinOrPingReplayedFromAnotherNodeIsRefused) {
  net_.record(port(1));
  start({"job", "job"});
  ASSERT_TRUE(eventually([&] { return all_resident(0) && all_resident(1); }));
  ASSERT_TRUE(eventually([&] {
    int pings = 0;
    for (auto& m : sent(1, 0)) pings += kind_of(m.bytes) == "ping";
    return pings >= 3;
  }));
  std::string hello, proof;
  std::vector<std::string> pings;
  for (auto& m : sent(1, 0)) {
    const std::string kind = kind_of(m.bytes);
    if (kind == "hello" && hello.empty()) hello = m.bytes;
    if (kind == "proof" && proof.empty()) proof = m.bytes;
    if (kind == "ping") pings.push_back(m.bytes);
  }
  ASSERT_FALSE(hello.empty());
  ASSERT_FALSE(proof.empty());
  ASSERT_EQ(as<Hello>(hello).session, as<Proof>(proof).session) << "one join";

  RawNode eavesdropper(net_, 17999);
  ASSERT_TRUE(eavesdropper.send(port(0), hello));
  ASSERT_TRUE(eavesdropper.wait_received(1));
  const Challenge fresh = as<Challenge>(eavesdropper.received()[0]);
  EXPECT_EQ(fresh.session, as<Hello>(hello).session);
  ASSERT_TRUE(eavesdropper.send(port(0), proof));
  ASSERT_TRUE(eavesdropper.wait_received(2));
  EXPECT_EQ(as<Refused>(eavesdropper.received()[1]).why, "wrong job token");
  ASSERT_TRUE(eavesdropper.send(port(0), proof));  // again: its challenge is used up
  ASSERT_TRUE(eavesdropper.wait_received(3));
  EXPECT_EQ(as<Refused>(eavesdropper.received()[2]).why,
            "no challenge is pending for this join (a replayed, late or repeated proof)");
  for (const auto& p : pings) ASSERT_TRUE(eavesdropper.send(port(0), p));
  ASSERT_TRUE(eavesdropper.wait_received(3 + pings.size()));
  std::this_thread::sleep_for(50ms);
  const auto got = eavesdropper.received();
  ASSERT_EQ(got.size(), 3 + pings.size());
  for (size_t i = 3; i < got.size(); ++i)
    EXPECT_NE(as<Refused>(got[i]).why.find("a replayed heartbeat"), std::string::npos) << as<Refused>(got[i]).why;
  for (const auto& m : got) {
    const std::string kind = kind_of(m);
    EXPECT_TRUE(kind == "challenge" || kind == "refused") << "the replayer got a " << kind;
  }
  // The real session goes on: node 1 still pings node 0 and reads its memory.
  const auto pongs_before = net_.sent(port(1)).size();
  ASSERT_TRUE(eventually([&] { return net_.sent(port(1)).size() > pongs_before + 3; }));
  EXPECT_TRUE(sees(0, 1, "up"));
  EXPECT_TRUE(sees(1, 0, "up"));
  read_and_check(1, range_of(0).first, range_of(0).second);
  EXPECT_EQ(counters(1).backend_bytes.load(), 0u);
}

// A node that does not hold the token sits at a missing peer's address and
// turns node 0's own join against it: it hands node 0's hello back to it
// (claiming to be rank 1), hands node 0's challenge back as rank 1's
// challenge, so that node 0 makes the very proof its own challenge asks for,
// and hands that proof back. The proof names its maker as the initiator:
// refused, and nothing sealed comes out.
TEST_F(ClusterTest, AReflectedChallengeIsRefused) {
  down_after_ = 3s;  // node 0's join must not be retried (with a new session) during the test
  RawNode mirror(net_, port(1));
  start({"job", "job"}, {0});
  ASSERT_TRUE(mirror.wait_received(1));
  const Hello hello = as<Hello>(mirror.received()[0]);
  EXPECT_EQ(hello.rank, 0u);
  EXPECT_EQ(hello.to, 1u);
  // 1. node 0's hello, back to node 0 as rank 1's.
  ASSERT_TRUE(mirror.send(port(0), readdressed(mirror.received()[0], 1, 0)));
  ASSERT_TRUE(mirror.wait_received(2));
  const Challenge challenge = as<Challenge>(mirror.received()[1]);
  EXPECT_EQ(challenge.session, hello.session);
  // 2. node 0's challenge, back to node 0 as rank 1's answer to its hello.
  ASSERT_TRUE(mirror.send(port(0), readdressed(mirror.received()[1], 1, 0)));
  ASSERT_TRUE(mirror.wait_received(3));
  const std::string proof = mirror.received()[2];
  EXPECT_EQ(as<Proof>(proof).rank, 0u);
  EXPECT_EQ(as<Proof>(proof).session, hello.session);
  // 3. node 0's proof (same session, same two nonces), back to node 0 as rank 1's.
  ASSERT_TRUE(mirror.send(port(0), readdressed(proof, 1, 0)));
  ASSERT_TRUE(mirror.wait_received(4));
  EXPECT_EQ(as<Refused>(mirror.received()[3]).why, "wrong job token");
  // Unchanged, it is not even for node 0.
  ASSERT_TRUE(mirror.send(port(0), proof));
  ASSERT_TRUE(mirror.wait_received(5));
  EXPECT_EQ(as<Refused>(mirror.received()[4]).why, "rank 0 is not a peer of this node");
  std::this_thread::sleep_for(50ms);
  for (const auto& m : mirror.received()) {
    const std::string kind = kind_of(m);
    EXPECT_TRUE(kind == "hello" || kind == "challenge" || kind == "proof" || kind == "refused")
        << "the mirror got a " << kind;
  }
  EXPECT_FALSE(sees(0, 1, "up"));
  EXPECT_TRUE(member(0, 1)["stripes"].empty());
}

// A peer that stops answering is marked down even while someone replays its
// recorded pongs to the node: a pong counts once, for a ping of the session.
TEST_F(ClusterTest, ReplayedPongsDoNotKeepASilentPeerUp) {
  net_.record(port(0));
  start({"job", "job"});
  ASSERT_TRUE(eventually([&] { return all_resident(0) && all_resident(1); }));
  std::vector<std::string> pongs;
  ASSERT_TRUE(eventually([&] {
    pongs.clear();
    for (auto& m : sent(0, 1))
      if (kind_of(m.bytes) == "pong") pongs.push_back(m.bytes);
    return pongs.size() >= 5;
  }));
  RawNode replayer(net_, 17998);
  net_.mute(port(0));  // node 0 stops answering
  const auto muted = Clock::now();
  bool down = false;
  while (!down && Clock::now() - muted < kDownAfter + 2s) {
    for (const auto& p : pongs) ASSERT_TRUE(replayer.send(port(1), p));
    std::this_thread::sleep_for(3ms);
    down = sees(1, 0, "down");
  }
  EXPECT_TRUE(down) << "replayed pongs kept a silent peer up";
  EXPECT_NE(member(1, 0).value("last_error", std::string()).find("no heartbeat"), std::string::npos);
  net_.mute(port(0), false);
  ASSERT_TRUE(eventually([&] { return sees(1, 0, "up"); })) << "it rejoins once it answers";
}

}  // namespace
}  // namespace dlfs::transport
