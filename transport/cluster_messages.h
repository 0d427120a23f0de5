// The messages daemons of one job exchange (transport/cluster), and their
// codec: the one place that knows how they look on the wire.
//
// On the wire a message is a MessagePack map whose "t" names its kind. A
// joining node sends a hello; the peer answers with a welcome (its stripes,
// their keys, its worker address) or a refusal. Every heartbeat a node pings
// each peer it joined; the peer answers with a pong (or a refusal). Answers
// echo the session of the connection they answer, so that an old
// connection's answer is told apart from the current one's.
//
// decode() checks every field it returns: garbage, a truncated message or a
// field of the wrong type is an error naming the message and the field, never
// a crash or a half-filled struct.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/status.h"

namespace dlfs::transport {

// Resident extents of a stripe as runs [first, last] (inclusive), in order.
using ExtentRuns = std::vector<std::pair<uint64_t, uint64_t>>;

// Byte counters of a node (reported to peers in pongs, for status).
struct NodeBytes {
  uint64_t local = 0, remote = 0, backend = 0;
};

enum class MessageKind { hello, welcome, refused, ping, pong };
const char* message_name(MessageKind kind);  // its "t" on the wire

// Join request. The token never travels: a digest of it does (it keeps other
// jobs' daemons out; it is not a defence against someone who can read the wire).
struct Hello {
  static constexpr MessageKind kind = MessageKind::hello;
  uint32_t rank = 0;
  std::string token_digest;
  uint64_t session = 0;
  std::map<std::string, uint64_t> datasets;  // name -> fingerprint
};

// One dataset's stripe as its owner offers it in a welcome.
struct StripeOffer {
  uint64_t begin = 0, end = 0;  // byte-space range
  uint64_t extent_size = 0, extents = 0;
  uint64_t base = 0;       // address of the registered memory (with a key only)
  std::string packed_key;  // empty: the owner holds nothing in memory
};

// Answer to a good hello.
struct Welcome {
  static constexpr MessageKind kind = MessageKind::welcome;
  uint32_t rank = 0;
  uint64_t session = 0;
  std::map<std::string, ExtentRuns> resident;  // by dataset
  NodeBytes bytes;
  std::map<std::string, StripeOffer> stripes;  // by dataset
  std::string worker_address;                  // the fabric's: gets go over an endpoint made from it
};

// Answer to a hello or ping that was not accepted (wrong token, rank or dataset).
struct Refused {
  static constexpr MessageKind kind = MessageKind::refused;
  uint32_t rank = 0;
  uint64_t session = 0;
  std::string why;
};

// Heartbeat.
struct Ping {
  static constexpr MessageKind kind = MessageKind::ping;
  uint32_t rank = 0;
  std::string token_digest;
  uint64_t session = 0;
};

// Answer to a good ping: the peer's residency and byte counters.
struct Pong {
  static constexpr MessageKind kind = MessageKind::pong;
  uint32_t rank = 0;
  uint64_t session = 0;
  std::map<std::string, ExtentRuns> resident;
  NodeBytes bytes;
};

using ClusterMessage = std::variant<Hello, Welcome, Refused, Ping, Pong>;

std::string encode(const Hello& m);
std::string encode(const Welcome& m);
std::string encode(const Refused& m);
std::string encode(const Ping& m);
std::string encode(const Pong& m);

// Errors (EBADMSG) name the message kind, when known, and the missing or bad field.
Result<ClusterMessage> decode(std::string_view bytes);

}  // namespace dlfs::transport
