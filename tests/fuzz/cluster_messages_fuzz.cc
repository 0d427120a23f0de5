// Fuzz target: the cluster message codec (transport/cluster_messages.cc,
// decode; `tools/fuzz.sh cluster_messages`). Its input is what arrives from
// the network: any bytes from any peer, before the peer is trusted.
//
// Invariants: garbage is an EBADMSG error that says it is about a cluster
// message, never a crash or an exception; whatever decodes re-encodes to a
// canonical form that decodes to the same message (encode(decode(encode(m)))
// == encode(m) byte for byte).
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "tests/fuzz/fuzz_target.h"
#include "transport/cluster_messages.h"

namespace {

using namespace dlfs::transport;
using nlohmann::json;

[[noreturn]] void fail(const std::string& what) { dlfs::fuzz::fail("cluster_messages_fuzz", what); }

std::string reencode(const ClusterMessage& m) {
  return std::visit([](const auto& v) { return encode(v); }, m);
}

std::string msgpack(const json& j) {
  auto v = json::to_msgpack(j);
  return std::string(v.begin(), v.end());
}

json bin(const std::string& s) { return json::binary(std::vector<uint8_t>(s.begin(), s.end())); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto m = decode(bytes);
  if (!m) {
    if (m.status().err() != EBADMSG) fail("error with errno " + std::to_string(m.status().err()) + ", not EBADMSG");
    if (m.status().message().rfind("cluster message", 0) != 0) fail("error does not say what: " + m.status().message());
    return 0;
  }
  const std::string canonical = reencode(*m);
  auto again = decode(canonical);
  if (!again) fail("a re-encoded message does not decode: " + again.status().message());
  if (again->index() != m->index()) fail("a re-encoded message decodes as another kind");
  if (reencode(*again) != canonical) fail("encode(decode(encode(m))) != encode(m)");
  return 0;
}

std::vector<dlfs::fuzz::Seed> dlfs::fuzz::seeds() {
  using namespace dlfs::transport;
  Welcome w;
  w.rank = 2;
  w.session = 77;
  w.resident = {{"imagenet", {{0, 3}, {5, 5}}}, {"empty", {}}};
  w.bytes = {1, 2, 3};
  w.stripes["imagenet"] = StripeOffer{.begin = 100, .end = 900, .extent_size = 64, .extents = 13,
                                      .base = 0x7f0000001000, .packed_key = std::string("k\0ey", 4)};
  w.stripes["empty"] = StripeOffer{.begin = 5, .end = 5, .extent_size = 64, .extents = 0, .base = 0, .packed_key = ""};
  w.worker_address = std::string("\x01\x00w", 3);
  Pong pong{.rank = 1, .session = ~0ull, .resident = {{"a", {{0, 0}, {2, 1000000}}}}, .bytes = {10, 20, 30}};
  std::vector<Seed> out = {
      {"hello", encode(Hello{.rank = 1, .token_digest = "abc", .session = 9, .datasets = {{"a", 1}, {"b", ~0ull}}})},
      {"welcome", encode(w)},
      {"refused", encode(Refused{.rank = 3, .session = 4, .why = "wrong job token"})},
      {"ping", encode(Ping{.rank = 0, .token_digest = "digest", .session = 12})},
      {"pong", encode(pong)},
      // Near misses: each decodes to an error naming one field.
      {"hello_rank_too_big", msgpack({{"t", "hello"}, {"rank", 1ull << 40}, {"token", "x"}, {"session", 1},
                                      {"datasets", json::object()}})},
      {"welcome_bad_run", msgpack({{"t", "welcome"}, {"rank", 0}, {"session", 1},
                                   {"resident", {{"a", {{1, 2, 3}}}}}, {"bytes", {{"local", 0}, {"remote", 0}, {"backend", 0}}},
                                   {"stripes", json::object()}, {"worker", bin("w")}})},
      {"stripe_key_without_base", msgpack({{"t", "welcome"}, {"rank", 0}, {"session", 1}, {"resident", json::object()},
                                           {"bytes", {{"local", 0}, {"remote", 0}, {"backend", 0}}},
                                           {"stripes", {{"d", {{"begin", 0}, {"end", 1}, {"extent", 1}, {"extents", 1},
                                                               {"rkey", bin("k")}}}}},
                                           {"worker", bin("w")}})},
      {"unknown_kind", msgpack({{"t", "gossip"}, {"rank", 0}})},
      {"not_a_map", msgpack(json::array({1, "two", 3.0}))},
  };
  return out;
}
