// Fuzz target: the cluster message codec (transport/cluster_messages.cc,
// decode and the opening of sealed bodies; `tools/fuzz.sh cluster_messages`).
// Its input is what arrives from the network: any bytes from any peer,
// before the peer is trusted.
//
// Invariants: garbage is an EBADMSG error that says it is about a cluster
// message, never a crash or an exception; a message in the clear (hello,
// challenge, refused) re-encodes to a canonical form that decodes to the same
// message (encode(decode(encode(m))) == encode(m) byte for byte); a sealed
// body or a proof, opened with the fuzzer's session key, either opens or is
// refused with EBADMSG (wrong kind, malformed) or EACCES (the seal does not
// verify): mutated seeds sealed with that key reach the body decoders.
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "tests/fuzz/fuzz_target.h"
#include "transport/cluster_messages.h"

namespace {

using namespace dlfs::transport;
using nlohmann::json;

[[noreturn]] void fail(const std::string& what) { dlfs::fuzz::fail("cluster_messages_fuzz", what); }

const Key& fuzz_key() {
  static const Key key = job_key("the fuzzer's session key");
  return key;
}

void expect_clean_refusal(const dlfs::Status& s, const char* what) {
  if (s.is_ok()) return;
  if (s.err() != EBADMSG && s.err() != EACCES)
    fail(std::string(what) + ": errno " + std::to_string(s.err()) + ", not EBADMSG or EACCES");
}

// Clear-text kinds must round-trip byte for byte.
template <typename T>
void check_round_trip(const T& m) {
  const std::string canonical = encode(m);
  auto again = decode(canonical);
  if (!again) fail("a re-encoded message does not decode: " + again.status().message());
  const T* same = std::get_if<T>(&*again);
  if (same == nullptr) fail("a re-encoded message decodes as another kind");
  if (encode(*same) != canonical) fail("encode(decode(encode(m))) != encode(m)");
}

void check_decoded(const ClusterMessage& m) {
  if (const auto* h = std::get_if<Hello>(&m)) check_round_trip(*h);
  if (const auto* c = std::get_if<Challenge>(&m)) check_round_trip(*c);
  if (const auto* r = std::get_if<Refused>(&m)) check_round_trip(*r);
  if (const auto* p = std::get_if<Proof>(&m)) expect_clean_refusal(open_proof(*p, fuzz_key()).status(), "open_proof");
  if (const auto* s = std::get_if<Sealed>(&m)) {
    expect_clean_refusal(open_welcome(*s, fuzz_key()).status(), "open_welcome");
    expect_clean_refusal(open_ping(*s, fuzz_key()).status(), "open_ping");
    expect_clean_refusal(open_pong(*s, fuzz_key()).status(), "open_pong");
  }
}

std::string msgpack(const json& j) {
  auto v = json::to_msgpack(j);
  return std::string(v.begin(), v.end());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!crypto_ready()) fail("libsodium did not initialise");
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto m = decode(bytes);
  if (!m) {
    if (m.status().err() != EBADMSG) fail("error with errno " + std::to_string(m.status().err()) + ", not EBADMSG");
    if (m.status().message().rfind("cluster message", 0) != 0) fail("error does not say what: " + m.status().message());
    return 0;
  }
  check_decoded(*m);
  return 0;
}

std::vector<dlfs::fuzz::Seed> dlfs::fuzz::seeds() {
  using namespace dlfs::transport;
  if (!crypto_ready()) ::fail("libsodium did not initialise");
  const Key& key = fuzz_key();
  Welcome w;
  w.rank = 2;
  w.to = 0;
  w.session = 77;
  w.resident = {{"imagenet", {{0, 3}, {5, 5}}}, {"empty", {}}};
  w.bytes = {1, 2, 3};
  w.stripes["imagenet"] = StripeOffer{.begin = 100, .end = 900, .extent_size = 64, .extents = 13,
                                      .base = 0x7f0000001000, .packed_key = std::string("k\0ey", 4)};
  w.stripes["empty"] = StripeOffer{.begin = 5, .end = 5, .extent_size = 64, .extents = 0, .base = 0, .packed_key = ""};
  w.worker_address = std::string("\x01\x00w", 3);
  Hello hello;
  hello.rank = 1, hello.to = 0, hello.session = 9, hello.nonce = fresh_nonce();
  Challenge challenge;
  challenge.rank = 0, challenge.to = 1, challenge.session = 9, challenge.nonce = fresh_nonce();
  Proof proof;
  proof.rank = 1, proof.to = 0, proof.session = 9, proof.mac = std::string(32, 'm');
  proof.datasets = {{"a", 1}, {"b", ~0ull}};
  Refused refused;
  refused.rank = 3, refused.to = 1, refused.session = 4, refused.why = "wrong job token";
  Ping ping;
  ping.rank = 0, ping.to = 1, ping.session = 12, ping.counter = 5;
  Pong pong;
  pong.rank = 1, pong.to = 0, pong.session = ~0ull, pong.counter = 5;
  pong.resident = {{"a", {{0, 0}, {2, 1000000}}}};
  pong.bytes = {10, 20, 30};
  return {
      {"hello", encode(hello)},
      {"challenge", encode(challenge)},
      {"proof", encode(proof, key)},
      {"refused", encode(refused)},
      {"welcome", encode(w, key)},
      {"ping", encode(ping, key)},
      {"pong", encode(pong, key)},
      // Near misses: a version-1 hello (no "v"), an unknown kind, not a map.
      {"v1_hello", msgpack({{"t", "hello"}, {"rank", 1}, {"token", "x"}, {"session", 1}, {"datasets", json::object()}})},
      {"unknown_kind", msgpack({{"t", "gossip"}, {"v", 3}, {"rank", 0}})},
      {"not_a_map", msgpack(json::array({1, "two", 3.0}))},
  };
}
