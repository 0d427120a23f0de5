// The messages daemons of one job exchange (transport/cluster), their codec
// and the cryptography that authenticates them: the one place that knows how
// they look on the wire.
//
// On the wire a message is a MessagePack map with the protocol version "v",
// its kind "t", the sender's rank, the rank it is meant for ("to") and the
// session of the join it belongs to. At most kMaxMessageBytes.
//
// Join (challenge-response, libsodium). The joining node (the initiator) and
// the node it joins (the responder) each contribute a fresh random nonce:
//   initiator -> hello      {nonce_i}
//   responder -> challenge  {nonce_r}                      (remembered, used once)
//   initiator -> proof      {MAC_join(transcript), datasets sealed}
//   responder -> welcome    sealed with the session key    (or a refusal)
// The transcript is both ranks in their roles, the session, both nonces and
// the protocol version; the MAC (HMAC-SHA512-256) is keyed by a key derived
// from the job token. A recorded proof is worthless: the responder's nonce is
// new for every join. A proof made in one direction does not verify in the
// other (reflection): the roles are part of the transcript. Both sides derive
// the session key from the transcript (keyed BLAKE2b); everything about a
// node (its datasets in the proof; its stripes, remote keys, worker address
// and residency in the welcome) travels sealed (XChaCha20-Poly1305) with it,
// readable and acceptable only by a holder of the token in this very join.
// The responder sends nothing about itself before the proof verified.
//
// Heartbeats. A ping carries a counter that grows with every ping of the
// session and is sealed with the session key (an empty body: a MAC over the
// header); the pong echoes the counter, its body (residency, byte counters)
// sealed. A receiver takes a counter only once and only upwards: a replayed
// ping or pong is refused, and without the session key none can be made.
// The header (version, kind, both ranks, session, counter) is the additional
// data of every seal: a sealed message moved to another kind, direction or
// session does not open.
//
// Refusals are not authenticated (a node that did not prove the token has no
// key to share): they carry a reason and nothing about the refusing node.
//
// decode() checks every field it returns: garbage, a truncated or oversized
// message, or a field of the wrong type is an error naming the message and
// the field, never a crash or a half-filled struct. A message of another
// protocol version decodes as VersionMismatch (what could be read of it).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "cache/round_remote.h"
#include "common/status.h"

namespace dlfs::transport {

// Version 1: the digest of the token in every hello and ping (no "v" field).
inline constexpr uint32_t kProtocolVersion = 4;  // 3: gets carry a tag (transport/am_get.h); 4: down notices
// Larger messages are refused unread (a welcome or pong of a stripe in
// ~100,000 separate resident runs still fits).
inline constexpr size_t kMaxMessageBytes = size_t{1} << 20;
inline constexpr size_t kNonceBytes = 32;  // a join nonce

// Resident extents of a stripe as runs [first, last] (inclusive), in order.
using ExtentRuns = std::vector<std::pair<uint64_t, uint64_t>>;

// Byte counters of a node (reported to peers in pongs, for status).
struct NodeBytes {
  uint64_t local = 0, remote = 0, backend = 0;
};

enum class MessageKind { hello, challenge, proof, welcome, refused, ping, pong, down };
inline constexpr size_t kMessageKinds = 8;
const char* message_name(MessageKind kind);  // its "t" on the wire

// ---- Keys -------------------------------------------------------------------

// 32 secret bytes, wiped when dropped.
class Key {
 public:
  Key() { bytes_.fill(0); }
  ~Key();
  Key(const Key&) = default;
  Key& operator=(const Key&) = default;
  const unsigned char* data() const { return bytes_.data(); }
  unsigned char* data() { return bytes_.data(); }
  static constexpr size_t size() { return 32; }

 private:
  std::array<unsigned char, 32> bytes_;
};

// Initialises libsodium (once; safe from any thread). False if it cannot.
bool crypto_ready();
// Overwrites a secret's bytes, then empties it.
void wipe(std::string& secret);
// The job's key, derived from its token (BLAKE2b, personalised for DLFS).
Key job_key(std::string_view token);
std::string fresh_nonce();  // kNonceBytes random bytes
uint64_t fresh_session();   // random, never 0

// What a join proves and what its session key is derived from.
struct JoinTranscript {
  uint32_t initiator = 0, responder = 0;
  uint64_t session = 0;
  std::string initiator_nonce, responder_nonce;
};

// The initiator's MAC over the transcript.
std::string proof_mac(const Key& job, const JoinTranscript& t);
// Whether `mac` is that MAC (constant time).
bool proof_mac_valid(const Key& job, const JoinTranscript& t, std::string_view mac);
// The key both sides seal the session's welcome, pings and pongs with.
Key session_key(const Key& job, const JoinTranscript& t);

// ---- Messages ---------------------------------------------------------------

// Every message: the sender's rank, the rank it is for, the join's session.
struct Header {
  uint32_t rank = 0;  // the sender
  uint32_t to = 0;    // the receiver, as the sender knows it
  uint64_t session = 0;
};

// Join request: the initiator's nonce.
struct Hello : Header {
  static constexpr MessageKind kind = MessageKind::hello;
  std::string nonce;
};

// The responder's nonce, for this join only.
struct Challenge : Header {
  static constexpr MessageKind kind = MessageKind::challenge;
  std::string nonce;
};

// The initiator proves the token over both nonces; its datasets ride along
// sealed (the responder opens and checks them once the MAC holds).
struct Proof : Header {
  static constexpr MessageKind kind = MessageKind::proof;
  std::string mac;
  std::map<std::string, uint64_t> datasets;  // name -> fingerprint: filled by open_proof()
  std::string nonce, box;                    // their seal, as decoded
};

// One dataset's stripe as its owner offers it in a welcome.
struct StripeOffer {
  uint64_t begin = 0, end = 0;  // byte-space range
  uint64_t extent_size = 0, extents = 0;
  uint64_t base = 0;       // address of the registered memory (with a key only)
  std::string packed_key;  // empty: the owner holds nothing in memory
  // Rounds over the job's memory (cache/round_remote.h): the addresses of
  // the owner's two round slots, read by tagged gets; empty without.
  std::vector<uint64_t> round_slots;
};

// Answer to a good proof (sealed).
struct Welcome : Header {
  static constexpr MessageKind kind = MessageKind::welcome;
  std::map<std::string, ExtentRuns> resident;  // by dataset
  NodeBytes bytes;
  std::map<std::string, StripeOffer> stripes;  // by dataset
  std::string worker_address;                  // the fabric's: gets go over an endpoint made from it
};

// Answer to a message that was not accepted. Unauthenticated: a reason only.
struct Refused : Header {
  static constexpr MessageKind kind = MessageKind::refused;
  std::string why;
};

// Heartbeat (sealed, empty body).
struct Ping : Header {
  static constexpr MessageKind kind = MessageKind::ping;
  uint64_t counter = 0;  // > every earlier ping's of the session
};

// Answer to a good ping (sealed): the peer's residency and byte counters,
// and where its rounds are.
struct Pong : Header {
  static constexpr MessageKind kind = MessageKind::pong;
  uint64_t counter = 0;  // the ping's
  std::map<std::string, ExtentRuns> resident;
  NodeBytes bytes;
  // Per dataset in rounds over the job's memory: the rounds the peer holds
  // or loads, oldest and newest (members behind follow them,
  // cache::RoundPipeline::follow). Optional on the wire.
  std::map<std::string, cache::RoundSpan> rounds;
};

// A node that watches a peer found it silent for down_after: it tells every
// other member once (sealed like a ping, on the session the receiver
// admitted, with a counter of that session's sequence). The receiver marks
// the subject down and joins it again: a subject that is alive (the watcher
// alone lost it) is back within a join.
struct DownNotice : Header {
  static constexpr MessageKind kind = MessageKind::down;
  uint64_t counter = 0;  // > every earlier ping's and notice's of the session
  uint32_t subject = 0;  // the rank found silent
  std::string why;
};

// A welcome, ping, pong or down notice as it arrives: its header in the clear, its body
// sealed. open() with the session's key gives the message, or an error when
// the seal does not verify (another key, another header, tampered bytes).
struct Sealed : Header {
  MessageKind kind = MessageKind::ping;
  uint64_t counter = 0;
  std::string nonce;  // the seal's (24 bytes)
  std::string box;    // ciphertext and tag
};

// A message of another protocol version: what could be read of it, for the
// log line and the refusal (rank and session 0 when unreadable).
struct VersionMismatch {
  uint64_t version = 0;  // 1: a message without "v"
  std::string kind;      // "?" when unreadable
  uint32_t rank = 0;
  uint64_t session = 0;
};

using ClusterMessage = std::variant<Hello, Challenge, Proof, Refused, Sealed, VersionMismatch>;

std::string encode(const Hello& m);
std::string encode(const Challenge& m);
std::string encode(const Proof& m, const Key& session_key);  // seals m.datasets
std::string encode(const Refused& m);
std::string encode(const Welcome& m, const Key& session_key);
std::string encode(const Ping& m, const Key& session_key);
std::string encode(const Pong& m, const Key& session_key);
std::string encode(const DownNotice& m, const Key& session_key);

// Errors (EBADMSG; EMSGSIZE for oversized bytes) name the message kind, when
// known, and the missing or bad field.
Result<ClusterMessage> decode(std::string_view bytes);

// The proof's datasets (EACCES when their seal does not verify).
Result<Proof> open_proof(const Proof& m, const Key& session_key);
// Opens a sealed message of the given kind (EBADMSG when its kind differs;
// EACCES when the seal does not verify).
Result<Welcome> open_welcome(const Sealed& m, const Key& session_key);
Result<Ping> open_ping(const Sealed& m, const Key& session_key);
Result<Pong> open_pong(const Sealed& m, const Key& session_key);
Result<DownNotice> open_down(const Sealed& m, const Key& session_key);

}  // namespace dlfs::transport
