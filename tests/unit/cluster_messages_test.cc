// The cluster messages' codec and their authentication: every kind
// round-trips, sealed bodies open only with their session's key and their
// own header, proofs bind both roles, nonces, session and datasets; garbage,
// truncated, oversized or other-version bytes are errors (or a
// VersionMismatch) naming what is wrong, never a crash.
#include "transport/cluster_messages.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>

#include <nlohmann/json.hpp>

namespace dlfs::transport {
namespace {

using nlohmann::json;

std::string msgpack(const json& j) {
  auto v = json::to_msgpack(j);
  return std::string(v.begin(), v.end());
}

json bin(const std::string& s) { return json::binary(std::vector<uint8_t>(s.begin(), s.end())); }

template <typename T>
T with_header(uint32_t rank, uint32_t to, uint64_t session) {
  T m;
  m.rank = rank;
  m.to = to;
  m.session = session;
  return m;
}

Welcome sample_welcome() {
  auto w = with_header<Welcome>(2, 0, 77);
  w.resident = {{"imagenet", {{0, 3}, {5, 5}}}, {"empty", {}}};
  w.bytes = {1, 2, 3};
  w.stripes["imagenet"] = StripeOffer{.begin = 100, .end = 900, .extent_size = 64, .extents = 13,
                                      .base = 0x7f0000001000, .packed_key = std::string("SECRET-rkey\0!", 13)};
  w.stripes["empty"] = StripeOffer{.begin = 5, .end = 5, .extent_size = 64, .extents = 0, .base = 0, .packed_key = ""};
  w.stripes["rounds"] = StripeOffer{.begin = 0, .end = 10, .extent_size = 64, .extents = 1, .base = 0, .packed_key = "",
                                    .round_slots = {0x7f0000200000, 0x7f0000400000}};
  w.worker_address = std::string("WORKER-addr\x01\x00w", 14);
  return w;
}

Hello sample_hello() {
  auto h = with_header<Hello>(1, 2, 9);
  h.nonce = std::string(kNonceBytes, 'n');
  return h;
}

JoinTranscript sample_transcript() {
  return {.initiator = 1, .responder = 2, .session = 9, .initiator_nonce = std::string(kNonceBytes, 'i'),
          .responder_nonce = std::string(kNonceBytes, 'r')};
}

Proof sample_proof() {
  auto p = with_header<Proof>(1, 2, 9);
  p.datasets = {{"imagenet", 1}, {"b", ~0ull}};
  p.mac = std::string(32, 'm');
  return p;
}

std::string sample_proof_bytes() { return encode(sample_proof(), session_key(job_key("job"), sample_transcript())); }

template <typename T>
T decoded_as(const std::string& bytes) {
  auto m = decode(bytes);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (!m || !std::holds_alternative<T>(*m)) {
    ADD_FAILURE() << "not decoded as expected";
    return T{};
  }
  return std::get<T>(*m);
}

TEST(ClusterMessages, EachKindRoundTrips) {
  Hello h2 = decoded_as<Hello>(encode(sample_hello()));
  EXPECT_EQ(h2.rank, 1u);
  EXPECT_EQ(h2.to, 2u);
  EXPECT_EQ(h2.session, 9u);
  EXPECT_EQ(h2.nonce, std::string(kNonceBytes, 'n'));

  auto c = with_header<Challenge>(2, 1, 9);
  c.nonce = fresh_nonce();
  Challenge c2 = decoded_as<Challenge>(encode(c));
  EXPECT_EQ(c2.rank, 2u);
  EXPECT_EQ(c2.to, 1u);
  EXPECT_EQ(c2.nonce, c.nonce);

  Proof p2 = decoded_as<Proof>(sample_proof_bytes());
  EXPECT_TRUE(p2.datasets.empty()) << "sealed until opened";
  EXPECT_EQ(p2.mac, sample_proof().mac);
  EXPECT_EQ(p2.session, 9u);
  auto p3 = open_proof(p2, session_key(job_key("job"), sample_transcript()));
  ASSERT_TRUE(p3) << p3.status().message();
  EXPECT_EQ(p3->datasets, sample_proof().datasets);
  EXPECT_EQ(p3->mac, sample_proof().mac);
  EXPECT_EQ(open_proof(p2, session_key(job_key("another job"), sample_transcript())).status().err(), EACCES);

  auto r = with_header<Refused>(3, 1, 4);
  r.why = "wrong job token";
  Refused r2 = decoded_as<Refused>(encode(r));
  EXPECT_EQ(r2.rank, 3u);
  EXPECT_EQ(r2.to, 1u);
  EXPECT_EQ(r2.session, 4u);
  EXPECT_EQ(r2.why, "wrong job token");

  const Key key = session_key(job_key("job"), sample_transcript());
  Sealed sw = decoded_as<Sealed>(encode(sample_welcome(), key));
  EXPECT_EQ(sw.kind, MessageKind::welcome);
  EXPECT_EQ(sw.rank, 2u);
  EXPECT_EQ(sw.to, 0u);
  EXPECT_EQ(sw.session, 77u);
  auto w2 = open_welcome(sw, key);
  ASSERT_TRUE(w2) << w2.status().message();
  const Welcome w = sample_welcome();
  EXPECT_EQ(w2->rank, 2u);
  EXPECT_EQ(w2->session, 77u);
  EXPECT_EQ(w2->resident, w.resident);
  EXPECT_EQ(w2->bytes.backend, 3u);
  ASSERT_EQ(w2->stripes.size(), 3u);
  EXPECT_EQ(w2->stripes.at("rounds").round_slots, (std::vector<uint64_t>{0x7f0000200000, 0x7f0000400000}));
  EXPECT_TRUE(w2->stripes.at("imagenet").round_slots.empty()) << "no rounds over the job's memory";
  EXPECT_EQ(w2->stripes.at("imagenet").packed_key, w.stripes.at("imagenet").packed_key);
  EXPECT_EQ(w2->stripes.at("imagenet").base, 0x7f0000001000u);
  EXPECT_EQ(w2->stripes.at("imagenet").extents, 13u);
  EXPECT_EQ(w2->stripes.at("empty").packed_key, "");
  EXPECT_EQ(w2->worker_address, w.worker_address);

  auto ping = with_header<Ping>(1, 2, 9);
  ping.counter = 12;
  Sealed sp = decoded_as<Sealed>(encode(ping, key));
  EXPECT_EQ(sp.kind, MessageKind::ping);
  EXPECT_EQ(sp.counter, 12u);
  auto ping2 = open_ping(sp, key);
  ASSERT_TRUE(ping2) << ping2.status().message();
  EXPECT_EQ(ping2->counter, 12u);
  EXPECT_EQ(ping2->rank, 1u);

  auto pong = with_header<Pong>(2, 1, 9);
  pong.counter = 12;
  pong.resident = {{"x", {{1, 2}}}};
  pong.bytes = {4, 5, 6};
  auto pong2 = open_pong(decoded_as<Sealed>(encode(pong, key)), key);
  ASSERT_TRUE(pong2) << pong2.status().message();
  EXPECT_EQ(pong2->counter, 12u);
  EXPECT_EQ(pong2->resident.at("x"), (ExtentRuns{{1, 2}}));
  EXPECT_EQ(pong2->bytes.remote, 5u);
  EXPECT_TRUE(pong2->rounds.empty()) << "a pong without rounds (optional)";

  pong.rounds = {{"x", cache::RoundSpan{{7, 2}, {7, 3}}}};
  auto pong3 = open_pong(decoded_as<Sealed>(encode(pong, key)), key);
  ASSERT_TRUE(pong3) << pong3.status().message();
  EXPECT_EQ(pong3->rounds.at("x"), (cache::RoundSpan{{7, 2}, {7, 3}}));

  auto notice = with_header<DownNotice>(1, 2, 9);
  notice.counter = 13;
  notice.subject = 4;
  notice.why = "no heartbeat for 2.0 s";
  const Sealed sealed_notice = decoded_as<Sealed>(encode(notice, key));
  EXPECT_EQ(sealed_notice.kind, MessageKind::down);
  EXPECT_EQ(sealed_notice.counter, 13u);
  auto notice2 = open_down(sealed_notice, key);
  ASSERT_TRUE(notice2) << notice2.status().message();
  EXPECT_EQ(notice2->subject, 4u);
  EXPECT_EQ(notice2->why, notice.why);
  EXPECT_FALSE(open_ping(sealed_notice, key)) << "a notice is not a ping";
  EXPECT_EQ(open_down(sealed_notice, session_key(job_key("another job"), sample_transcript())).status().err(), EACCES);
}

// The clear parts of each message, as MessagePack maps; what is sealed never
// shows in the clear.
TEST(ClusterMessages, WireFormat) {
  EXPECT_EQ(encode(sample_hello()), msgpack({{"v", 4}, {"t", "hello"}, {"rank", 1}, {"to", 2}, {"session", 9},
                                             {"nonce", bin(std::string(kNonceBytes, 'n'))}}));
  const json p = json::from_msgpack(sample_proof_bytes());
  EXPECT_EQ(p["v"], 4);
  EXPECT_EQ(p["t"], "proof");
  EXPECT_EQ(p["rank"], 1);
  EXPECT_EQ(p["to"], 2);
  EXPECT_EQ(p["session"], 9);
  EXPECT_EQ(p["mac"], bin(std::string(32, 'm')));
  EXPECT_EQ(p.size(), 8u) << p.dump();
  EXPECT_EQ(sample_proof_bytes().find("imagenet"), std::string::npos) << "dataset names travel in the clear";
  auto r = with_header<Refused>(0, 1, 3);
  r.why = "w";
  EXPECT_EQ(encode(r), msgpack({{"v", 4}, {"t", "refused"}, {"rank", 0}, {"to", 1}, {"session", 3}, {"why", "w"}}));
  const Key key = session_key(job_key("job"), sample_transcript());
  const std::string sealed = encode(sample_welcome(), key);
  const json j = json::from_msgpack(sealed);
  EXPECT_EQ(j["v"], 4);
  EXPECT_EQ(j["t"], "welcome");
  EXPECT_EQ(j["rank"], 2);
  EXPECT_EQ(j["to"], 0);
  EXPECT_EQ(j["session"], 77);
  EXPECT_EQ(j["n"], 0);
  EXPECT_EQ(j.size(), 8u) << j.dump();
  EXPECT_EQ(sealed.find("SECRET-rkey"), std::string::npos) << "the remote key travels in the clear";
  EXPECT_EQ(sealed.find("WORKER-addr"), std::string::npos) << "the worker address travels in the clear";
  EXPECT_EQ(sealed.find("imagenet"), std::string::npos) << "dataset names travel in the clear";
  EXPECT_NE(encode(sample_welcome(), key), sealed) << "every seal has its own nonce";
}

TEST(ClusterMessages, ProofsBindRolesNoncesSessionDatasetsAndToken) {
  const Key job = job_key("job");
  const JoinTranscript t = sample_transcript();
  const std::string mac = proof_mac(job, t);
  EXPECT_EQ(mac.size(), 32u);
  EXPECT_TRUE(proof_mac_valid(job, t, mac));
  EXPECT_FALSE(proof_mac_valid(job_key("another job"), t, mac)) << "another token";
  JoinTranscript reflected = t;  // the same join seen from the other side
  std::swap(reflected.initiator, reflected.responder);
  EXPECT_FALSE(proof_mac_valid(job, reflected, mac)) << "a proof reflected back to its maker";
  JoinTranscript nonces_swapped = t;
  std::swap(nonces_swapped.initiator_nonce, nonces_swapped.responder_nonce);
  EXPECT_FALSE(proof_mac_valid(job, nonces_swapped, mac));
  JoinTranscript other_challenge = t;
  other_challenge.responder_nonce = fresh_nonce();
  EXPECT_FALSE(proof_mac_valid(job, other_challenge, mac)) << "a proof replayed against a new challenge";
  JoinTranscript other_session = t;
  other_session.session = 10;
  EXPECT_FALSE(proof_mac_valid(job, other_session, mac));
  EXPECT_FALSE(proof_mac_valid(job, t, mac.substr(1)));
  EXPECT_FALSE(proof_mac_valid(job, t, ""));
  // Both sides derive the same session key; any other transcript or token another.
  const Key k1 = session_key(job, t), k2 = session_key(job_key("job"), t);
  EXPECT_EQ(0, std::memcmp(k1.data(), k2.data(), Key::size()));
  const Key k3 = session_key(job, other_challenge), k4 = session_key(job_key("jo"), t);
  EXPECT_NE(0, std::memcmp(k1.data(), k3.data(), Key::size()));
  EXPECT_NE(0, std::memcmp(k1.data(), k4.data(), Key::size()));
  EXPECT_NE(fresh_nonce(), fresh_nonce());
  EXPECT_NE(fresh_session(), 0u);
}

TEST(ClusterMessages, SealsOpenOnlyWithTheirKeyKindAndHeader) {
  const Key key = session_key(job_key("job"), sample_transcript());
  auto ping = with_header<Ping>(1, 2, 9);
  ping.counter = 5;
  const Sealed good = decoded_as<Sealed>(encode(ping, key));
  ASSERT_TRUE(open_ping(good, key));
  const Key other = session_key(job_key("another job"), sample_transcript());
  EXPECT_EQ(open_ping(good, other).status().err(), EACCES) << "another job's key";
  const Key other_session = session_key(job_key("job"), [] {
    JoinTranscript t = sample_transcript();
    t.session = 10;
    return t;
  }());
  EXPECT_EQ(open_ping(good, other_session).status().err(), EACCES) << "another session's key";
  for (auto change : std::vector<std::function<void(Sealed&)>>{
           [](Sealed& s) { s.counter = 6; },     // a replay with a bumped counter
           [](Sealed& s) { s.session = 10; },    // moved to another session
           [](Sealed& s) { std::swap(s.rank, s.to); },  // reflected to its sender
           [](Sealed& s) { s.rank = 3; },
           [](Sealed& s) { s.box[0] ^= 1; },
           [](Sealed& s) { s.nonce[3] ^= 1; }}) {
    Sealed s = good;
    change(s);
    EXPECT_EQ(open_ping(s, key).status().err(), EACCES);
  }
  Sealed as_pong = good;
  as_pong.kind = MessageKind::pong;  // a ping passed off as a pong
  EXPECT_FALSE(open_pong(as_pong, key));
  EXPECT_EQ(open_pong(good, key).status().err(), EBADMSG) << "kind checked first";
  EXPECT_EQ(open_welcome(good, key).status().err(), EBADMSG);
}

void expect_error(const std::string& bytes, const std::vector<std::string>& mentions, int err = EBADMSG) {
  auto m = decode(bytes);
  ASSERT_FALSE(m.is_ok()) << "decoded garbage";
  EXPECT_EQ(m.status().err(), err);
  for (const auto& s : mentions) EXPECT_NE(m.status().message().find(s), std::string::npos) << m.status().message();
}

json header(const std::string& kind) { return {{"v", kProtocolVersion}, {"t", kind}, {"rank", 1}, {"to", 0}, {"session", 2}}; }

TEST(ClusterMessages, MissingOrWrongTypedFieldsAreNamed) {
  json h = header("hello");
  h["nonce"] = bin(std::string(kNonceBytes, 'n'));
  h["rank"] = "one";
  expect_error(msgpack(h), {"'hello'", "'rank'", "unsigned"});
  h["rank"] = 1ull << 40;
  expect_error(msgpack(h), {"'rank'", "range"});
  h["rank"] = 1;
  h.erase("to");
  expect_error(msgpack(h), {"'hello'", "'to'", "missing"});
  h["to"] = 0;
  h["nonce"] = bin("short");
  expect_error(msgpack(h), {"'hello'", "'nonce'", "5 bytes, not 32"});
  h["nonce"] = "not binary";
  expect_error(msgpack(h), {"'nonce'", "binary"});
  json c = header("challenge");
  expect_error(msgpack(c), {"'challenge'", "'nonce'", "missing"});
  json p = json::from_msgpack(sample_proof_bytes());
  p.erase("box");
  expect_error(msgpack(p), {"'proof'", "'box'", "missing"});
  p = json::from_msgpack(sample_proof_bytes());
  p["mac"] = bin(std::string(31, 'm'));
  expect_error(msgpack(p), {"'proof'", "'mac'", "31 bytes"});
  expect_error(msgpack(header("refused")), {"'refused'", "'why'"});
  const Key key = session_key(job_key("job"), sample_transcript());
  json s = json::from_msgpack(encode(sample_welcome(), key));
  s.erase("n");
  expect_error(msgpack(s), {"'welcome'", "'n'", "missing"});
  s = json::from_msgpack(encode(sample_welcome(), key));
  s["box"] = bin("tiny");
  expect_error(msgpack(s), {"'welcome'", "'box'", "shorter than its tag"});
  s = json::from_msgpack(encode(sample_welcome(), key));
  s["nonce"] = bin(std::string(12, 'x'));
  expect_error(msgpack(s), {"'nonce'", "12 bytes, not 24"});
  expect_error(msgpack({{"v", kProtocolVersion}, {"t", "gossip"}, {"rank", 1}}), {"unknown kind 'gossip'"});
  expect_error(msgpack({{"v", kProtocolVersion}, {"rank", 1}}), {"'t'"});
  expect_error(msgpack({{"v", kProtocolVersion}, {"t", 5}}), {"'t'"});
  expect_error(msgpack({{"v", "two"}, {"t", "hello"}}), {"'v'", "protocol version"});
  expect_error(msgpack(json::array({1, 2})), {"not a map"});
}

TEST(ClusterMessages, OversizedBytesAreRefusedUnread) {
  std::string big(kMaxMessageBytes + 1, '\x90');
  expect_error(big, {"bytes", "larger than the maximum", std::to_string(kMaxMessageBytes)}, EMSGSIZE);
  // A well-formed message just over the limit: refused the same way.
  auto r = with_header<Refused>(0, 1, 3);
  r.why = std::string(kMaxMessageBytes, 'x');
  expect_error(encode(r), {"larger than the maximum"}, EMSGSIZE);
  r.why = std::string(kMaxMessageBytes - 100, 'x');
  EXPECT_TRUE(decode(encode(r)).is_ok()) << "just under the limit";
}

TEST(ClusterMessages, OtherProtocolVersionsDecodeAsAMismatchNamingThem) {
  // Version 1 (no "v"): the hello and ping of the token digest.
  auto v1 = decode(msgpack({{"t", "hello"}, {"rank", 1}, {"token", "digest"}, {"session", 5}, {"datasets", {{"d", 1}}}}));
  ASSERT_TRUE(v1) << v1.status().message();
  ASSERT_TRUE(std::holds_alternative<VersionMismatch>(*v1));
  const auto& m = std::get<VersionMismatch>(*v1);
  EXPECT_EQ(m.version, 1u);
  EXPECT_EQ(m.kind, "hello");
  EXPECT_EQ(m.rank, 1u);
  EXPECT_EQ(m.session, 5u);
  auto v4 = decode(msgpack({{"v", 5}, {"t", "future"}, {"rank", "?"}}));
  ASSERT_TRUE(v4) << v4.status().message();
  ASSERT_TRUE(std::holds_alternative<VersionMismatch>(*v4));
  EXPECT_EQ(std::get<VersionMismatch>(*v4).version, 5u);
  EXPECT_EQ(std::get<VersionMismatch>(*v4).kind, "future");
  EXPECT_EQ(std::get<VersionMismatch>(*v4).rank, 0u) << "unreadable fields stay 0";
  // Version 2 (untagged gets): a node of that build is refused at the join,
  // not left to time out on gets it cannot read.
  auto v2 = decode(msgpack({{"v", 2}, {"t", "hello"}, {"rank", 2}, {"session", 9}}));
  ASSERT_TRUE(v2) << v2.status().message();
  ASSERT_TRUE(std::holds_alternative<VersionMismatch>(*v2));
  EXPECT_EQ(std::get<VersionMismatch>(*v2).version, 2u);
  // A refusal of this version is readable by a version-1 node: "t", "rank",
  // "session" and "why" as it expects them.
  auto r = with_header<Refused>(0, 1, 5);
  r.why = "protocol version 1 is not this node's (3)";
  const json j = json::from_msgpack(encode(r));
  EXPECT_EQ(j["t"], "refused");
  EXPECT_TRUE(j["rank"].is_number_unsigned());
  EXPECT_EQ(j["session"], 5);
  EXPECT_EQ(j["why"], r.why);
}

TEST(ClusterMessages, GarbageAndTruncationsAreErrorsNotCrashes) {
  expect_error("", {"cluster message"});
  expect_error("hello", {"cluster message"});
  const Key key = session_key(job_key("job"), sample_transcript());
  auto ping = with_header<Ping>(1, 2, 9);
  ping.counter = 3;
  auto pong = with_header<Pong>(2, 1, 9);
  pong.counter = 3;
  pong.resident = {{"x", {{1, 2}}}};
  // Every prefix of every kind: an error.
  for (const std::string& full : {encode(sample_welcome(), key), encode(sample_hello()), sample_proof_bytes(),
                                  encode(ping, key), encode(pong, key)}) {
    for (size_t n = 0; n < full.size(); ++n) EXPECT_FALSE(decode(full.substr(0, n)).is_ok()) << n << " of " << full.size();
    EXPECT_TRUE(decode(full).is_ok());
  }
  // Random bytes, and random flips of a good sealed message: any result but a
  // crash, and a flipped seal never opens.
  std::mt19937_64 rng(11);
  const std::string good = encode(sample_welcome(), key);
  for (int i = 0; i < 2000; ++i) {
    std::string s = good;
    for (int k = 0; k < 3; ++k) s[rng() % s.size()] = static_cast<char>(rng());
    auto d = decode(s);
    if (d && std::holds_alternative<Sealed>(*d) && s != good) {
      EXPECT_FALSE(open_welcome(std::get<Sealed>(*d), key).is_ok()) << "a flipped welcome opened";
    }
    std::string noise(rng() % 64, '\0');
    for (char& c : noise) c = static_cast<char>(rng());
    (void)decode(noise);
  }
}

}  // namespace
}  // namespace dlfs::transport
