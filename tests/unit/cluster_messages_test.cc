// The cluster messages' codec: every kind round-trips, the bytes on the wire
// are the MessagePack maps daemons exchanged before the codec existed (mixed
// versions keep talking), and garbage is an error naming the field, never a
// crash.
#include "transport/cluster_messages.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

namespace dlfs::transport {
namespace {

using nlohmann::json;

std::string msgpack(const json& j) {
  auto v = json::to_msgpack(j);
  return std::string(v.begin(), v.end());
}

json bin(const std::string& s) { return json::binary(std::vector<uint8_t>(s.begin(), s.end())); }

Welcome sample_welcome() {
  Welcome w;
  w.rank = 2;
  w.session = 77;
  w.resident = {{"imagenet", {{0, 3}, {5, 5}}}, {"empty", {}}};
  w.bytes = {1, 2, 3};
  w.stripes["imagenet"] = StripeOffer{.begin = 100, .end = 900, .extent_size = 64, .extents = 13,
                                      .base = 0x7f0000001000, .packed_key = std::string("k\0ey", 4)};
  w.stripes["empty"] = StripeOffer{.begin = 5, .end = 5, .extent_size = 64, .extents = 0, .base = 0, .packed_key = ""};
  w.worker_address = std::string("\x01\x00w", 3);
  return w;
}

template <typename T>
T decoded_as(const std::string& bytes) {
  auto m = decode(bytes);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (!m || !std::holds_alternative<T>(*m)) {
    ADD_FAILURE() << "not decoded as " << message_name(T::kind);
    return T{};
  }
  return std::get<T>(*m);
}

TEST(ClusterMessages, EachKindRoundTrips) {
  Hello h{.rank = 1, .token_digest = "abc", .session = 9, .datasets = {{"a", 1}, {"b", ~0ull}}};
  Hello h2 = decoded_as<Hello>(encode(h));
  EXPECT_EQ(h2.rank, 1u);
  EXPECT_EQ(h2.token_digest, "abc");
  EXPECT_EQ(h2.session, 9u);
  EXPECT_EQ(h2.datasets, h.datasets);

  Welcome w = sample_welcome();
  Welcome w2 = decoded_as<Welcome>(encode(w));
  EXPECT_EQ(w2.rank, 2u);
  EXPECT_EQ(w2.session, 77u);
  EXPECT_EQ(w2.resident, w.resident);
  EXPECT_EQ(w2.bytes.local, 1u);
  EXPECT_EQ(w2.bytes.remote, 2u);
  EXPECT_EQ(w2.bytes.backend, 3u);
  ASSERT_EQ(w2.stripes.size(), 2u);
  EXPECT_EQ(w2.stripes["imagenet"].packed_key, std::string("k\0ey", 4));
  EXPECT_EQ(w2.stripes["imagenet"].base, 0x7f0000001000u);
  EXPECT_EQ(w2.stripes["imagenet"].extents, 13u);
  EXPECT_EQ(w2.stripes["imagenet"].extent_size, 64u);
  EXPECT_EQ(w2.stripes["empty"].packed_key, "");
  EXPECT_EQ(w2.stripes["empty"].begin, 5u);
  EXPECT_EQ(w2.worker_address, w.worker_address);

  Refused r2 = decoded_as<Refused>(encode(Refused{.rank = 3, .session = 4, .why = "wrong job token"}));
  EXPECT_EQ(r2.rank, 3u);
  EXPECT_EQ(r2.session, 4u);
  EXPECT_EQ(r2.why, "wrong job token");

  Ping p2 = decoded_as<Ping>(encode(Ping{.rank = 5, .token_digest = "d", .session = 6}));
  EXPECT_EQ(p2.rank, 5u);
  EXPECT_EQ(p2.token_digest, "d");
  EXPECT_EQ(p2.session, 6u);

  Pong q2 = decoded_as<Pong>(encode(Pong{.rank = 7, .session = 8, .resident = {{"x", {{1, 2}}}}, .bytes = {4, 5, 6}}));
  EXPECT_EQ(q2.rank, 7u);
  EXPECT_EQ(q2.session, 8u);
  EXPECT_EQ(q2.resident.at("x"), (ExtentRuns{{1, 2}}));
  EXPECT_EQ(q2.bytes.backend, 6u);
}

// The maps below are what cluster.cc built by hand before the codec.
TEST(ClusterMessages, WireBytesAreThoseOfBefore) {
  EXPECT_EQ(encode(Hello{.rank = 1, .token_digest = "t", .session = 2, .datasets = {{"ds", 42}}}),
            msgpack({{"t", "hello"}, {"rank", 1}, {"token", "t"}, {"session", 2}, {"datasets", {{"ds", 42}}}}));
  EXPECT_EQ(encode(Ping{.rank = 1, .token_digest = "t", .session = 2}),
            msgpack({{"t", "ping"}, {"rank", 1}, {"token", "t"}, {"session", 2}}));
  EXPECT_EQ(encode(Refused{.rank = 0, .session = 3, .why = "w"}),
            msgpack({{"t", "refused"}, {"rank", 0}, {"why", "w"}, {"session", 3}}));
  const json bytes = {{"local", 1}, {"remote", 2}, {"backend", 3}};
  const json resident = {{"imagenet", {{0, 3}, {5, 5}}}, {"empty", json::array()}};
  EXPECT_EQ(encode(Pong{.rank = 2, .session = 77, .resident = sample_welcome().resident, .bytes = {1, 2, 3}}),
            msgpack({{"t", "pong"}, {"rank", 2}, {"session", 77}, {"resident", resident}, {"bytes", bytes}}));
  const json stripes = {
      {"imagenet",
       {{"begin", 100}, {"end", 900}, {"extent", 64}, {"extents", 13}, {"base", 0x7f0000001000}, {"rkey", bin(std::string("k\0ey", 4))}}},
      {"empty", {{"begin", 5}, {"end", 5}, {"extent", 64}, {"extents", 0}}}};
  EXPECT_EQ(encode(sample_welcome()),
            msgpack({{"t", "welcome"}, {"rank", 2}, {"session", 77}, {"resident", resident}, {"bytes", bytes},
                     {"stripes", stripes}, {"worker", bin(std::string("\x01\x00w", 3))}}));
}

void expect_error(const std::string& bytes, const std::vector<std::string>& mentions) {
  auto m = decode(bytes);
  ASSERT_FALSE(m.is_ok()) << "decoded garbage";
  EXPECT_EQ(m.status().err(), EBADMSG);
  for (const auto& s : mentions) EXPECT_NE(m.status().message().find(s), std::string::npos) << m.status().message();
}

TEST(ClusterMessages, MissingOrWrongTypedFieldsAreNamed) {
  expect_error(msgpack({{"t", "hello"}, {"rank", "one"}, {"token", "t"}, {"session", 2}, {"datasets", json::object()}}),
               {"'hello'", "'rank'", "unsigned"});
  expect_error(msgpack({{"t", "ping"}, {"rank", 1}, {"session", 2}}), {"'ping'", "'token'", "missing"});
  expect_error(msgpack({{"t", "ping"}, {"rank", 1ull << 40}, {"token", "t"}, {"session", 2}}), {"'rank'", "range"});
  expect_error(msgpack({{"t", "hello"}, {"rank", 1}, {"token", "t"}, {"session", 2}, {"datasets", {{"ds", -1}}}}),
               {"'datasets.ds'"});
  expect_error(msgpack({{"t", "refused"}, {"rank", 1}, {"session", 2}}), {"'refused'", "'why'"});
  expect_error(msgpack({{"t", "pong"}, {"rank", 1}, {"session", 2}, {"resident", {{"ds", {{1}}}}},
                        {"bytes", {{"local", 1}, {"remote", 2}, {"backend", 3}}}}),
               {"'pong'", "'resident.ds'", "[first, last]"});
  expect_error(msgpack({{"t", "pong"}, {"rank", 1}, {"session", 2}, {"resident", json::object()},
                        {"bytes", {{"local", 1}, {"backend", 3}}}}),
               {"'bytes.remote'", "missing"});
  json w = json::from_msgpack(encode(sample_welcome()));
  w["stripes"]["imagenet"].erase("begin");
  expect_error(msgpack(w), {"'welcome'", "'stripes.imagenet.begin'", "missing"});
  w = json::from_msgpack(encode(sample_welcome()));
  w["stripes"]["imagenet"].erase("base");
  expect_error(msgpack(w), {"'stripes.imagenet.base'"});
  w = json::from_msgpack(encode(sample_welcome()));
  w["worker"] = "not binary";
  expect_error(msgpack(w), {"'worker'", "binary"});
  expect_error(msgpack({{"t", "gossip"}, {"rank", 1}}), {"unknown kind 'gossip'"});
  expect_error(msgpack({{"rank", 1}}), {"'t'"});
  expect_error(msgpack({{"t", 5}}), {"'t'"});
  expect_error(msgpack(json::array({1, 2})), {"not a map"});
}

TEST(ClusterMessages, GarbageAndTruncationsAreErrorsNotCrashes) {
  expect_error("", {"cluster message"});
  expect_error("hello", {"cluster message"});
  // Every prefix of every kind: an error (or, for none of them, a message).
  for (const std::string& full :
       {encode(sample_welcome()), encode(Hello{.rank = 1, .token_digest = "t", .session = 2, .datasets = {{"d", 1}}}),
        encode(Pong{.rank = 1, .session = 2, .resident = {{"x", {{1, 2}}}}, .bytes = {}})}) {
    for (size_t n = 0; n < full.size(); ++n) EXPECT_FALSE(decode(full.substr(0, n)).is_ok()) << n << " of " << full.size();
    EXPECT_TRUE(decode(full).is_ok());
  }
  // Random bytes, and random flips of a good message: any result but a crash.
  std::mt19937_64 rng(11);
  const std::string good = encode(sample_welcome());
  for (int i = 0; i < 2000; ++i) {
    std::string s = good;
    for (int k = 0; k < 3; ++k) s[rng() % s.size()] = static_cast<char>(rng());
    (void)decode(s);
    std::string noise(rng() % 64, '\0');
    for (char& c : noise) c = static_cast<char>(rng());
    (void)decode(noise);
  }
}

}  // namespace
}  // namespace dlfs::transport
