#include "transport/cluster_messages.h"

#include <cerrno>
#include <limits>

#include <nlohmann/json.hpp>
#include <sodium.h>

namespace dlfs::transport {
namespace {

using nlohmann::json;

static_assert(Key::size() == crypto_auth_KEYBYTES);
static_assert(Key::size() == crypto_kdf_KEYBYTES);
static_assert(Key::size() == crypto_aead_xchacha20poly1305_ietf_KEYBYTES);
constexpr size_t kSealNonceBytes = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;
constexpr size_t kSealTagBytes = crypto_aead_xchacha20poly1305_ietf_ABYTES;
constexpr char kKdfContext[crypto_kdf_CONTEXTBYTES + 1] = "dlfsjoin";
constexpr uint64_t kProofKeyId = 1, kSessionRootKeyId = 2;

const unsigned char* uc(const std::string& s) { return reinterpret_cast<const unsigned char*>(s.data()); }
const unsigned char* uc(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

// Little-endian, length-prefixed bytes: the canonical input of MACs and
// seals (never the MessagePack, whose encoding of a value is not unique).
class Canon {
 public:
  explicit Canon(std::string_view label) { str(label); }
  Canon& u8(uint8_t v) { return put(v, 1); }
  Canon& u32(uint32_t v) { return put(v, 4); }
  Canon& u64(uint64_t v) { return put(v, 8); }
  Canon& str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.append(s);
    return *this;
  }
  const std::string& bytes() const { return out_; }

 private:
  Canon& put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return *this;
  }
  std::string out_;
};

Canon transcript(std::string_view label, const JoinTranscript& t) {
  Canon c(label);
  c.u32(kProtocolVersion).u32(t.initiator).u32(t.responder).u64(t.session).str(t.initiator_nonce).str(t.responder_nonce);
  return c;
}

std::string proof_input(const JoinTranscript& t) { return transcript("dlfs join proof", t).bytes(); }

Key subkey(const Key& job, uint64_t id) {
  Key k;
  crypto_kdf_derive_from_key(k.data(), Key::size(), id, kKdfContext, job.data());
  return k;
}

// The additional data of a seal: everything in the clear that it vouches for.
std::string seal_header(MessageKind kind, const Header& h, uint64_t counter) {
  return Canon("dlfs seal").u32(kProtocolVersion).u8(static_cast<uint8_t>(kind)).u32(h.rank).u32(h.to)
      .u64(h.session).u64(counter).bytes();
}

std::string pack(const json& j) {
  auto v = json::to_msgpack(j);
  return std::string(v.begin(), v.end());
}

json binary(const std::string& s) { return json::binary(std::vector<uint8_t>(s.begin(), s.end())); }

json header_json(MessageKind kind, const Header& h) {
  return {{"v", kProtocolVersion}, {"t", message_name(kind)}, {"rank", h.rank}, {"to", h.to}, {"session", h.session}};
}

// Seals `body` under `key`, vouching for the header: {"nonce", "box"} of j.
void seal_into(json& j, MessageKind kind, const Header& h, uint64_t counter, const std::string& body, const Key& key) {
  const std::string ad = seal_header(kind, h, counter);
  std::string nonce(kSealNonceBytes, '\0');
  randombytes_buf(nonce.data(), nonce.size());
  std::string box(body.size() + kSealTagBytes, '\0');
  unsigned long long box_len = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(reinterpret_cast<unsigned char*>(box.data()), &box_len, uc(body),
                                             body.size(), uc(ad), ad.size(), nullptr, uc(nonce), key.data());
  box.resize(box_len);
  j["nonce"] = binary(nonce);
  j["box"] = binary(box);
}

std::string seal(MessageKind kind, const Header& h, uint64_t counter, const std::string& body, const Key& key) {
  json j = header_json(kind, h);
  j["n"] = counter;
  seal_into(j, kind, h, counter, body, key);
  return pack(j);
}

json bytes_json(const NodeBytes& b) { return {{"local", b.local}, {"remote", b.remote}, {"backend", b.backend}}; }

json resident_json(const std::map<std::string, ExtentRuns>& resident) {
  json r = json::object();
  for (const auto& [name, runs] : resident) r[name] = runs;
  return r;
}

json stripes_json(const std::map<std::string, StripeOffer>& stripes) {
  json out = json::object();
  for (const auto& [name, s] : stripes) {
    json o = {{"begin", s.begin}, {"end", s.end}, {"extent", s.extent_size}, {"extents", s.extents}};
    if (!s.packed_key.empty()) {
      o["base"] = s.base;
      o["rkey"] = binary(s.packed_key);
    }
    if (!s.round_slots.empty()) o["round_slots"] = s.round_slots;
    out[name] = std::move(o);
  }
  return out;
}

// The fields of one object of a message (the message itself, a map in it,
// or a sealed body). Every read checks presence and type; errors name the
// message and the field's path in it ("stripes.ds.begin").
class Fields {
 public:
  Fields(const json& j, const std::string& message, std::string path) : j_(&j), message_(&message), path_(std::move(path)) {}

  const json& value() const { return *j_; }
  bool has(const std::string& key) const { return j_->contains(key); }
  Status bad(const std::string& key, const std::string& what) const {
    return Status(EBADMSG, "cluster message '" + *message_ + "': field '" + path_ + key + "' " + what);
  }
  Result<const json*> field(const std::string& key) const {
    auto it = j_->find(key);
    if (it == j_->end()) return bad(key, "is missing");
    return &*it;
  }
  Result<uint64_t> uint(const std::string& key) const {
    DLFS_ASSIGN_OR_RETURN(const json* v, field(key));
    if (!v->is_number_unsigned()) return bad(key, "is not an unsigned integer");
    return v->get<uint64_t>();
  }
  Result<uint32_t> uint32(const std::string& key) const {
    DLFS_ASSIGN_OR_RETURN(uint64_t r, uint(key));
    if (r > std::numeric_limits<uint32_t>::max()) return bad(key, "is out of range");
    return static_cast<uint32_t>(r);
  }
  Result<std::string> string(const std::string& key) const {
    DLFS_ASSIGN_OR_RETURN(const json* v, field(key));
    if (!v->is_string()) return bad(key, "is not a string");
    return v->get<std::string>();
  }
  Result<std::string> bytes(const std::string& key) const {
    DLFS_ASSIGN_OR_RETURN(const json* v, field(key));
    if (!v->is_binary()) return bad(key, "is not binary");
    const auto& b = v->get_binary();
    return std::string(b.begin(), b.end());
  }
  // Binary of exactly `n` bytes.
  Result<std::string> bytes(const std::string& key, size_t n) const {
    DLFS_ASSIGN_OR_RETURN(std::string b, bytes(key));
    if (b.size() != n) return bad(key, "is " + std::to_string(b.size()) + " bytes, not " + std::to_string(n));
    return b;
  }
  Result<Fields> object(const std::string& key) const {
    DLFS_ASSIGN_OR_RETURN(const json* v, field(key));
    if (!v->is_object()) return bad(key, "is not a map");
    return Fields(*v, *message_, path_ + key + ".");
  }

 private:
  const json* j_;
  const std::string* message_;
  std::string path_;
};

Result<ExtentRuns> runs_of(const Fields& resident, const std::string& name) {
  const json& v = resident.value()[name];
  if (!v.is_array()) return resident.bad(name, "is not a list of extent runs");
  ExtentRuns runs;
  for (const json& run : v) {
    if (!run.is_array() || run.size() != 2 || !run[0].is_number_unsigned() || !run[1].is_number_unsigned())
      return resident.bad(name, "has a run that is not [first, last]");
    runs.emplace_back(run[0].get<uint64_t>(), run[1].get<uint64_t>());
  }
  return runs;
}

Result<std::map<std::string, ExtentRuns>> resident_of(const Fields& f) {
  DLFS_ASSIGN_OR_RETURN(Fields r, f.object("resident"));
  std::map<std::string, ExtentRuns> out;
  for (const auto& item : r.value().items()) {
    DLFS_ASSIGN_OR_RETURN(out[item.key()], runs_of(r, item.key()));
  }
  return out;
}

Result<NodeBytes> bytes_of(const Fields& f) {
  DLFS_ASSIGN_OR_RETURN(Fields b, f.object("bytes"));
  NodeBytes out;
  DLFS_ASSIGN_OR_RETURN(out.local, b.uint("local"));
  DLFS_ASSIGN_OR_RETURN(out.remote, b.uint("remote"));
  DLFS_ASSIGN_OR_RETURN(out.backend, b.uint("backend"));
  return out;
}

Result<StripeOffer> stripe_of(const Fields& s) {
  StripeOffer o;
  DLFS_ASSIGN_OR_RETURN(o.begin, s.uint("begin"));
  DLFS_ASSIGN_OR_RETURN(o.end, s.uint("end"));
  DLFS_ASSIGN_OR_RETURN(o.extent_size, s.uint("extent"));
  DLFS_ASSIGN_OR_RETURN(o.extents, s.uint("extents"));
  if (s.has("rkey")) {
    DLFS_ASSIGN_OR_RETURN(o.packed_key, s.bytes("rkey"));
    DLFS_ASSIGN_OR_RETURN(o.base, s.uint("base"));
  }
  if (s.has("round_slots")) {
    DLFS_ASSIGN_OR_RETURN(const json* v, s.field("round_slots"));
    if (!v->is_array() || v->size() != 2) return s.bad("round_slots", "is not a list of two slot addresses");
    for (const json& a : *v) {
      if (!a.is_number_unsigned()) return s.bad("round_slots", "has an address that is not an unsigned integer");
      o.round_slots.push_back(a.get<uint64_t>());
    }
  }
  return o;
}

Status header_of(const Fields& f, Header& h) {
  DLFS_ASSIGN_OR_RETURN(h.rank, f.uint32("rank"));
  DLFS_ASSIGN_OR_RETURN(h.to, f.uint32("to"));
  DLFS_ASSIGN_OR_RETURN(h.session, f.uint("session"));
  return Status::ok();
}

Result<Hello> hello_of(const Fields& f) {
  Hello m;
  DLFS_RETURN_IF_ERROR(header_of(f, m));
  DLFS_ASSIGN_OR_RETURN(m.nonce, f.bytes("nonce", kNonceBytes));
  return m;
}

Result<Challenge> challenge_of(const Fields& f) {
  Challenge m;
  DLFS_RETURN_IF_ERROR(header_of(f, m));
  DLFS_ASSIGN_OR_RETURN(m.nonce, f.bytes("nonce", kNonceBytes));
  return m;
}

Result<Proof> proof_of(const Fields& f) {
  Proof m;
  DLFS_RETURN_IF_ERROR(header_of(f, m));
  DLFS_ASSIGN_OR_RETURN(m.mac, f.bytes("mac", crypto_auth_BYTES));
  DLFS_ASSIGN_OR_RETURN(m.nonce, f.bytes("nonce", kSealNonceBytes));
  DLFS_ASSIGN_OR_RETURN(m.box, f.bytes("box"));
  if (m.box.size() < kSealTagBytes) return f.bad("box", "is shorter than its tag");
  return m;
}

Result<Refused> refused_of(const Fields& f) {
  Refused m;
  DLFS_RETURN_IF_ERROR(header_of(f, m));
  DLFS_ASSIGN_OR_RETURN(m.why, f.string("why"));
  return m;
}

Result<Sealed> sealed_of(const Fields& f, MessageKind kind) {
  Sealed m;
  m.kind = kind;
  DLFS_RETURN_IF_ERROR(header_of(f, m));
  DLFS_ASSIGN_OR_RETURN(m.counter, f.uint("n"));
  DLFS_ASSIGN_OR_RETURN(m.nonce, f.bytes("nonce", kSealNonceBytes));
  DLFS_ASSIGN_OR_RETURN(m.box, f.bytes("box"));
  if (m.box.size() < kSealTagBytes) return f.bad("box", "is shorter than its tag");
  return m;
}

// Widens a decoded struct into the variant (Result<T> does not convert).
template <typename T>
Result<ClusterMessage> as_message(Result<T> r) {
  if (!r) return r.status();
  return ClusterMessage(std::move(r).value());
}

VersionMismatch mismatch_of(const json& j, uint64_t version) {
  VersionMismatch m;
  m.version = version;
  auto t = j.find("t");
  m.kind = t != j.end() && t->is_string() ? t->get<std::string>() : "?";
  if (m.kind.size() > 32) m.kind = m.kind.substr(0, 32) + "...";
  auto r = j.find("rank");
  if (r != j.end() && r->is_number_unsigned() && r->get<uint64_t>() <= std::numeric_limits<uint32_t>::max())
    m.rank = static_cast<uint32_t>(r->get<uint64_t>());
  auto s = j.find("session");
  if (s != j.end() && s->is_number_unsigned()) m.session = s->get<uint64_t>();
  return m;
}

Result<ClusterMessage> decode_object(const json& j) {
  static const std::string unknown = "?";
  if (!j.is_object()) return Status(EBADMSG, "cluster message: not a map");
  uint64_t version = 1;  // version 1 had no "v"
  if (auto v = j.find("v"); v != j.end()) {
    if (!v->is_number_unsigned()) return Fields(j, unknown, "").bad("v", "(the protocol version) is not an unsigned integer");
    version = v->get<uint64_t>();
  }
  if (version != kProtocolVersion) return ClusterMessage(mismatch_of(j, version));
  auto t = j.find("t");
  if (t == j.end() || !t->is_string()) return Fields(j, unknown, "").bad("t", "(the kind) is missing or not a string");
  const std::string kind = t->get<std::string>();
  const Fields f(j, kind, "");
  if (kind == "hello") return as_message(hello_of(f));
  if (kind == "challenge") return as_message(challenge_of(f));
  if (kind == "proof") return as_message(proof_of(f));
  if (kind == "refused") return as_message(refused_of(f));
  if (kind == "welcome") return as_message(sealed_of(f, MessageKind::welcome));
  if (kind == "ping") return as_message(sealed_of(f, MessageKind::ping));
  if (kind == "pong") return as_message(sealed_of(f, MessageKind::pong));
  if (kind == "down") return as_message(sealed_of(f, MessageKind::down));
  return Status(EBADMSG, "cluster message of unknown kind '" + kind.substr(0, 32) + "'");
}

// A sealed body, once its seal verified.
Result<std::string> open_seal(MessageKind kind, const Header& h, uint64_t counter, const std::string& nonce,
                              const std::string& box, const Key& key) {
  if (nonce.size() != kSealNonceBytes || box.size() < kSealTagBytes)
    return Status(EBADMSG, std::string("cluster message '") + message_name(kind) + "': malformed seal");
  const std::string ad = seal_header(kind, h, counter);
  std::string body(box.size() - kSealTagBytes, '\0');
  unsigned long long body_len = 0;
  if (crypto_aead_xchacha20poly1305_ietf_decrypt(reinterpret_cast<unsigned char*>(body.data()), &body_len, nullptr,
                                                 uc(box), box.size(), uc(ad), ad.size(), uc(nonce), key.data()) != 0)
    return Status(EACCES, std::string("cluster message '") + message_name(kind) +
                              "' does not authenticate (another session's key, or altered)");
  body.resize(body_len);
  return body;
}

// The body of a sealed message of `kind`.
Result<std::string> open_body(const Sealed& m, MessageKind kind, const Key& key) {
  if (m.kind != kind)
    return Status(EBADMSG, std::string("cluster message '") + message_name(m.kind) + "' opened as a " +
                               message_name(kind));
  return open_seal(kind, m, m.counter, m.nonce, m.box, key);
}

Result<json> body_json(const std::string& body, MessageKind kind) {
  json j = json::from_msgpack(body.begin(), body.end(), true, false);
  if (j.is_discarded() || !j.is_object())
    return Status(EBADMSG, std::string("cluster message '") + message_name(kind) + "': sealed body is not a map");
  return j;
}

// Runs a decoder over bytes from the network: parse errors are values, and
// the catch is the last guard that garbage never throws through the fabric's
// progress thread.
template <typename F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const json::exception& e) {
    return Status(EBADMSG, std::string("cluster message: ") + e.what());
  } catch (const std::bad_alloc&) {
    return Status(EBADMSG, "cluster message: too large to decode");
  }
}

}  // namespace

Key::~Key() { sodium_memzero(bytes_.data(), bytes_.size()); }

bool crypto_ready() {
  static const bool ready = sodium_init() >= 0;
  return ready;
}

void wipe(std::string& secret) {
  if (!secret.empty()) sodium_memzero(secret.data(), secret.size());
  secret.clear();
}

Key job_key(std::string_view token) {
  (void)crypto_ready();
  Key k;
  static constexpr unsigned char personal[crypto_generichash_blake2b_PERSONALBYTES] = {
      'd', 'l', 'f', 's', '-', 'j', 'o', 'b', '-', 't', 'o', 'k', 'e', 'n', '-', '2'};
  crypto_generichash_blake2b_salt_personal(k.data(), Key::size(), uc(token), token.size(), nullptr, 0, nullptr,
                                           personal);
  return k;
}

std::string fresh_nonce() {
  (void)crypto_ready();
  std::string n(kNonceBytes, '\0');
  randombytes_buf(n.data(), n.size());
  return n;
}

uint64_t fresh_session() {
  (void)crypto_ready();
  uint64_t s = 0;
  while (s == 0) randombytes_buf(&s, sizeof s);
  return s;
}

std::string proof_mac(const Key& job, const JoinTranscript& t) {
  const Key k = subkey(job, kProofKeyId);
  const std::string in = proof_input(t);
  std::string mac(crypto_auth_BYTES, '\0');
  crypto_auth(reinterpret_cast<unsigned char*>(mac.data()), uc(in), in.size(), k.data());
  return mac;
}

bool proof_mac_valid(const Key& job, const JoinTranscript& t, std::string_view mac) {
  if (mac.size() != crypto_auth_BYTES) return false;
  const Key k = subkey(job, kProofKeyId);
  const std::string in = proof_input(t);
  return crypto_auth_verify(uc(mac), uc(in), in.size(), k.data()) == 0;
}

Key session_key(const Key& job, const JoinTranscript& t) {
  const Key root = subkey(job, kSessionRootKeyId);
  const std::string in = transcript("dlfs session key", t).bytes();
  Key k;
  crypto_generichash(k.data(), Key::size(), uc(in), in.size(), root.data(), Key::size());
  return k;
}

const char* message_name(MessageKind kind) {
  switch (kind) {
    case MessageKind::hello: return "hello";
    case MessageKind::challenge: return "challenge";
    case MessageKind::proof: return "proof";
    case MessageKind::welcome: return "welcome";
    case MessageKind::refused: return "refused";
    case MessageKind::ping: return "ping";
    case MessageKind::pong: return "pong";
    case MessageKind::down: return "down";
  }
  return "?";
}

std::string encode(const Hello& m) {
  json j = header_json(m.kind, m);
  j["nonce"] = binary(m.nonce);
  return pack(j);
}

std::string encode(const Challenge& m) {
  json j = header_json(m.kind, m);
  j["nonce"] = binary(m.nonce);
  return pack(j);
}

std::string encode(const Proof& m, const Key& key) {
  json ds = json::object();
  for (const auto& [name, fingerprint] : m.datasets) ds[name] = fingerprint;
  json j = header_json(m.kind, m);
  j["mac"] = binary(m.mac);
  seal_into(j, m.kind, m, 0, pack(json{{"datasets", std::move(ds)}}), key);
  return pack(j);
}

std::string encode(const Refused& m) {
  json j = header_json(m.kind, m);
  j["why"] = m.why;
  return pack(j);
}

std::string encode(const Welcome& m, const Key& key) {
  const json body = {{"resident", resident_json(m.resident)},
                     {"bytes", bytes_json(m.bytes)},
                     {"stripes", stripes_json(m.stripes)},
                     {"worker", binary(m.worker_address)}};
  return seal(m.kind, m, 0, pack(body), key);
}

std::string encode(const Ping& m, const Key& key) { return seal(m.kind, m, m.counter, std::string(), key); }

std::string encode(const Pong& m, const Key& key) {
  json body = {{"resident", resident_json(m.resident)}, {"bytes", bytes_json(m.bytes)}};
  if (!m.rounds.empty()) {
    json rounds = json::object();
    for (const auto& [name, held] : m.rounds)
      rounds[name] = json::array({held.oldest.epoch, held.oldest.round, held.newest.epoch, held.newest.round});
    body["rounds"] = std::move(rounds);
  }
  return seal(m.kind, m, m.counter, pack(body), key);
}

std::string encode(const DownNotice& m, const Key& key) {
  return seal(m.kind, m, m.counter, pack(json{{"subject", m.subject}, {"why", m.why}}), key);
}

Result<ClusterMessage> decode(std::string_view bytes) {
  if (bytes.size() > kMaxMessageBytes)
    return Status(EMSGSIZE, "cluster message of " + std::to_string(bytes.size()) + " bytes: larger than the maximum (" +
                                std::to_string(kMaxMessageBytes) + ")");
  return guarded([&]() -> Result<ClusterMessage> {
    const json j = json::from_msgpack(bytes.begin(), bytes.end(), true, false);
    if (j.is_discarded()) return Status(EBADMSG, "cluster message: not MessagePack (or truncated)");
    return decode_object(j);
  });
}

Result<Proof> open_proof(const Proof& m, const Key& key) {
  DLFS_ASSIGN_OR_RETURN(std::string body, open_seal(m.kind, m, 0, m.nonce, m.box, key));
  return guarded([&]() -> Result<Proof> {
    DLFS_ASSIGN_OR_RETURN(json j, body_json(body, MessageKind::proof));
    static const std::string name = "proof";
    const Fields f(j, name, "");
    Proof p = m;
    p.datasets.clear();
    DLFS_ASSIGN_OR_RETURN(Fields ds, f.object("datasets"));
    for (const auto& item : ds.value().items()) {
      DLFS_ASSIGN_OR_RETURN(p.datasets[item.key()], ds.uint(item.key()));
    }
    return p;
  });
}

Result<Welcome> open_welcome(const Sealed& m, const Key& key) {
  DLFS_ASSIGN_OR_RETURN(std::string body, open_body(m, MessageKind::welcome, key));
  return guarded([&]() -> Result<Welcome> {
    DLFS_ASSIGN_OR_RETURN(json j, body_json(body, MessageKind::welcome));
    static const std::string name = "welcome";
    const Fields f(j, name, "");
    Welcome w;
    static_cast<Header&>(w) = m;
    DLFS_ASSIGN_OR_RETURN(w.resident, resident_of(f));
    DLFS_ASSIGN_OR_RETURN(w.bytes, bytes_of(f));
    DLFS_ASSIGN_OR_RETURN(Fields stripes, f.object("stripes"));
    for (const auto& item : stripes.value().items()) {
      DLFS_ASSIGN_OR_RETURN(Fields s, stripes.object(item.key()));
      DLFS_ASSIGN_OR_RETURN(w.stripes[item.key()], stripe_of(s));
    }
    DLFS_ASSIGN_OR_RETURN(w.worker_address, f.bytes("worker"));
    return w;
  });
}

Result<Ping> open_ping(const Sealed& m, const Key& key) {
  DLFS_ASSIGN_OR_RETURN(std::string body, open_body(m, MessageKind::ping, key));
  if (!body.empty()) return Status(EBADMSG, "cluster message 'ping': sealed body is not empty");
  Ping p;
  static_cast<Header&>(p) = m;
  p.counter = m.counter;
  return p;
}

Result<Pong> open_pong(const Sealed& m, const Key& key) {
  DLFS_ASSIGN_OR_RETURN(std::string body, open_body(m, MessageKind::pong, key));
  return guarded([&]() -> Result<Pong> {
    DLFS_ASSIGN_OR_RETURN(json j, body_json(body, MessageKind::pong));
    static const std::string name = "pong";
    const Fields f(j, name, "");
    Pong p;
    static_cast<Header&>(p) = m;
    p.counter = m.counter;
    DLFS_ASSIGN_OR_RETURN(p.resident, resident_of(f));
    DLFS_ASSIGN_OR_RETURN(p.bytes, bytes_of(f));
    if (f.has("rounds")) {
      DLFS_ASSIGN_OR_RETURN(Fields rounds, f.object("rounds"));
      for (const auto& item : rounds.value().items()) {
        const json& v = item.value();
        bool ok = v.is_array() && v.size() == 4;
        for (size_t k = 0; ok && k < 4; ++k)
          ok = v[k].is_number_unsigned() && (k % 2 == 0 || v[k].get<uint64_t>() <= std::numeric_limits<uint32_t>::max());
        if (!ok) return rounds.bad(item.key(), "is not [oldest epoch, round, newest epoch, round]");
        auto at = [&](size_t k) { return cache::RoundAt{v[k].get<uint64_t>(), static_cast<uint32_t>(v[k + 1].get<uint64_t>())}; };
        p.rounds[item.key()] = cache::RoundSpan{at(0), at(2)};
      }
    }
    return p;
  });
}

Result<DownNotice> open_down(const Sealed& m, const Key& key) {
  DLFS_ASSIGN_OR_RETURN(std::string body, open_body(m, MessageKind::down, key));
  return guarded([&]() -> Result<DownNotice> {
    DLFS_ASSIGN_OR_RETURN(json j, body_json(body, MessageKind::down));
    static const std::string name = "down";
    const Fields f(j, name, "");
    DownNotice d;
    static_cast<Header&>(d) = m;
    d.counter = m.counter;
    DLFS_ASSIGN_OR_RETURN(uint64_t subject, f.uint("subject"));
    if (subject > std::numeric_limits<uint32_t>::max()) return f.bad("subject", "is not a rank");
    d.subject = static_cast<uint32_t>(subject);
    DLFS_ASSIGN_OR_RETURN(d.why, f.string("why"));
    return d;
  });
}

}  // namespace dlfs::transport
