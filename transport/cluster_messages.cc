#include "transport/cluster_messages.h"

#include <cerrno>
#include <limits>

#include <nlohmann/json.hpp>

namespace dlfs::transport {
namespace {

using nlohmann::json;

std::string pack(const json& j) {
  auto v = json::to_msgpack(j);
  return std::string(v.begin(), v.end());
}

json binary(const std::string& s) { return json::binary(std::vector<uint8_t>(s.begin(), s.end())); }

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
    out[name] = std::move(o);
  }
  return out;
}

// The fields of one object of a message (the message itself, or a map in
// it). Every read checks presence and type; errors name the message and the
// field's path in it ("stripes.ds.begin").
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
  Result<uint32_t> rank() const {
    DLFS_ASSIGN_OR_RETURN(uint64_t r, uint("rank"));
    if (r > std::numeric_limits<uint32_t>::max()) return bad("rank", "is out of range");
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
  return o;
}

Result<Hello> hello_of(const Fields& f) {
  Hello m;
  DLFS_ASSIGN_OR_RETURN(m.rank, f.rank());
  DLFS_ASSIGN_OR_RETURN(m.token_digest, f.string("token"));
  DLFS_ASSIGN_OR_RETURN(m.session, f.uint("session"));
  DLFS_ASSIGN_OR_RETURN(Fields ds, f.object("datasets"));
  for (const auto& item : ds.value().items()) {
    DLFS_ASSIGN_OR_RETURN(m.datasets[item.key()], ds.uint(item.key()));
  }
  return m;
}

Result<Welcome> welcome_of(const Fields& f) {
  Welcome m;
  DLFS_ASSIGN_OR_RETURN(m.rank, f.rank());
  DLFS_ASSIGN_OR_RETURN(m.session, f.uint("session"));
  DLFS_ASSIGN_OR_RETURN(m.resident, resident_of(f));
  DLFS_ASSIGN_OR_RETURN(m.bytes, bytes_of(f));
  DLFS_ASSIGN_OR_RETURN(Fields stripes, f.object("stripes"));
  for (const auto& item : stripes.value().items()) {
    DLFS_ASSIGN_OR_RETURN(Fields s, stripes.object(item.key()));
    DLFS_ASSIGN_OR_RETURN(m.stripes[item.key()], stripe_of(s));
  }
  DLFS_ASSIGN_OR_RETURN(m.worker_address, f.bytes("worker"));
  return m;
}

Result<Refused> refused_of(const Fields& f) {
  Refused m;
  DLFS_ASSIGN_OR_RETURN(m.rank, f.rank());
  DLFS_ASSIGN_OR_RETURN(m.session, f.uint("session"));
  DLFS_ASSIGN_OR_RETURN(m.why, f.string("why"));
  return m;
}

Result<Ping> ping_of(const Fields& f) {
  Ping m;
  DLFS_ASSIGN_OR_RETURN(m.rank, f.rank());
  DLFS_ASSIGN_OR_RETURN(m.token_digest, f.string("token"));
  DLFS_ASSIGN_OR_RETURN(m.session, f.uint("session"));
  return m;
}

Result<Pong> pong_of(const Fields& f) {
  Pong m;
  DLFS_ASSIGN_OR_RETURN(m.rank, f.rank());
  DLFS_ASSIGN_OR_RETURN(m.session, f.uint("session"));
  DLFS_ASSIGN_OR_RETURN(m.resident, resident_of(f));
  DLFS_ASSIGN_OR_RETURN(m.bytes, bytes_of(f));
  return m;
}

// Widens a decoded struct into the variant (Result<T> does not convert).
template <typename T>
Result<ClusterMessage> as_message(Result<T> r) {
  if (!r) return r.status();
  return ClusterMessage(std::move(r).value());
}

Result<ClusterMessage> decode_object(const json& j) {
  static const std::string unknown = "?";
  if (!j.is_object()) return Status(EBADMSG, "cluster message: not a map");
  auto t = j.find("t");
  if (t == j.end() || !t->is_string()) return Fields(j, unknown, "").bad("t", "(the kind) is missing or not a string");
  const std::string kind = t->get<std::string>();
  const Fields f(j, kind, "");
  if (kind == "hello") return as_message(hello_of(f));
  if (kind == "welcome") return as_message(welcome_of(f));
  if (kind == "refused") return as_message(refused_of(f));
  if (kind == "ping") return as_message(ping_of(f));
  if (kind == "pong") return as_message(pong_of(f));
  return Status(EBADMSG, "cluster message of unknown kind '" + kind + "'");
}

}  // namespace

const char* message_name(MessageKind kind) {
  switch (kind) {
    case MessageKind::hello: return "hello";
    case MessageKind::welcome: return "welcome";
    case MessageKind::refused: return "refused";
    case MessageKind::ping: return "ping";
    case MessageKind::pong: return "pong";
  }
  return "?";
}

std::string encode(const Hello& m) {
  json ds = json::object();
  for (const auto& [name, fingerprint] : m.datasets) ds[name] = fingerprint;
  return pack({{"t", message_name(m.kind)}, {"rank", m.rank}, {"token", m.token_digest}, {"session", m.session},
               {"datasets", std::move(ds)}});
}

std::string encode(const Welcome& m) {
  return pack({{"t", message_name(m.kind)}, {"rank", m.rank}, {"session", m.session},
               {"resident", resident_json(m.resident)}, {"bytes", bytes_json(m.bytes)},
               {"stripes", stripes_json(m.stripes)}, {"worker", binary(m.worker_address)}});
}

std::string encode(const Refused& m) {
  return pack({{"t", message_name(m.kind)}, {"rank", m.rank}, {"why", m.why}, {"session", m.session}});
}

std::string encode(const Ping& m) {
  return pack({{"t", message_name(m.kind)}, {"rank", m.rank}, {"token", m.token_digest}, {"session", m.session}});
}

std::string encode(const Pong& m) {
  return pack({{"t", message_name(m.kind)}, {"rank", m.rank}, {"session", m.session},
               {"resident", resident_json(m.resident)}, {"bytes", bytes_json(m.bytes)}});
}

Result<ClusterMessage> decode(std::string_view bytes) {
  // Parsing reports errors by a discarded value, and every read below checks
  // the type first; the catch is the last guard that garbage from the network
  // never throws through the fabric's progress thread.
  try {
    const json j = json::from_msgpack(bytes.begin(), bytes.end(), true, false);
    if (j.is_discarded()) return Status(EBADMSG, "cluster message: not MessagePack (or truncated)");
    return decode_object(j);
  } catch (const json::exception& e) {
    return Status(EBADMSG, std::string("cluster message: ") + e.what());
  }
}

}  // namespace dlfs::transport
