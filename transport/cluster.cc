#include "transport/cluster.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include "common/units.h"

namespace dlfs::transport {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;  // [first, last] extent runs

std::string encode(const json& j) {
  auto v = json::to_msgpack(j);
  return std::string(v.begin(), v.end());
}

// The token never travels: a digest of it does (it keeps other jobs' daemons
// out; it is not a defence against someone who can read the wire).
std::string digest(const std::string& token) {
  XXH128_hash_t h = XXH3_128bits(token.data(), token.size());
  char b[40];
  std::snprintf(b, sizeof b, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return b;
}

Ranges residency_of(const cache::StorageBuffer& b) {
  Ranges r;
  for (uint64_t e = 0; e < b.extent_count(); ++e) {
    if (b.state(e) != cache::ExtentState::resident) continue;
    if (!r.empty() && r.back().second + 1 == e) r.back().second = e;
    else r.emplace_back(e, e);
  }
  return r;
}

bool covers(const Ranges& r, uint64_t first, uint64_t last) {
  for (const auto& [a, b] : r)
    if (a <= first && last <= b) return true;
  return false;
}

uint64_t count(const Ranges& r) {
  uint64_t n = 0;
  for (const auto& [a, b] : r) n += b - a + 1;
  return n;
}

}  // namespace

// One joined peer's stripe of one dataset.
struct RemoteStripe {
  uint64_t begin = 0, end = 0, extent_size = 1, extents = 0, base = 0;
  std::string packed_key;                    // empty: the peer holds nothing in memory
  std::unique_ptr<Endpoint::RemoteKey> key;  // packed_key unpacked on the data endpoint
};

// A connection attempt to a peer and what its welcome said. Replaced as a
// whole on reconnect; fetches hold it by shared_ptr while they get.
struct Cluster::Link {
  uint64_t session = 0;
  std::unique_ptr<Endpoint> ep;       // through the peer's listener: join, heartbeats
  std::unique_ptr<Endpoint> data_ep;  // from the peer's worker address: gets (every transport)
  std::string worker_address;         // from the welcome
  bool welcomed = false;
  std::map<std::string, RemoteStripe> stripes;  // set before the peer is up, then read-only
  Clock::time_point started;
  bool failed() const { return ep->failed() || (data_ep && data_ep->failed()); }
};

enum class PeerState { self, connecting, up, down, refused };
const char* state_name(PeerState s) {
  switch (s) {
    case PeerState::self: return "self";
    case PeerState::connecting: return "connecting";
    case PeerState::up: return "up";
    case PeerState::down: return "down";
    case PeerState::refused: return "refused";
  }
  return "?";
}

struct Cluster::Peer {
  uint32_t rank = 0;
  PeerAddress address;
  mutable std::mutex mu;  // guards everything below
  PeerState state = PeerState::connecting;
  std::shared_ptr<Link> link;
  std::shared_ptr<Link> retired;  // dropped on the progress thread, closed on the heartbeat thread
  std::map<std::string, std::shared_ptr<const Ranges>> resident;  // by dataset
  Clock::time_point last_heard, next_attempt, since;
  std::string last_error;
  NodeBytes bytes;
  bool ever_up = false;
  // Times in a row its gets missed their deadline while it was up (reset by a
  // batch of gets that all arrived): each doubles the wait before rejoining.
  std::atomic<unsigned> stalls{0};
};

// The remote path of one dataset, installed in its Fetcher.
class Cluster::Remote : public cache::RemoteFetch {
 public:
  Remote(Cluster& c, std::string name) : c_(c), name_(std::move(name)) {}
  bool fetch(uint32_t owner, uint64_t offset, std::span<std::byte> dst) override;
  void fetch_many(uint32_t owner, std::span<Piece> pieces) override;
  void drain() {
    while (inflight_.load() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::atomic<int> inflight_{0};

 private:
  Cluster& c_;
  std::string name_;
};

bool Cluster::Remote::fetch(uint32_t owner, uint64_t offset, std::span<std::byte> dst) {
  Piece one{offset, dst};
  fetch_many(owner, std::span<Piece>(&one, 1));
  return one.ok;
}

void Cluster::Remote::fetch_many(uint32_t owner, std::span<Piece> pieces) {
  for (Piece& p : pieces) p.ok = false;
  if (owner >= c_.peers_.size() || owner == c_.self() || pieces.empty()) return;
  inflight_.fetch_add(1);
  struct Done {
    std::atomic<int>& n;
    ~Done() { n.fetch_sub(1); }
  } done{inflight_};
  Peer& p = *c_.peers_[owner];
  std::shared_ptr<Link> link;
  std::shared_ptr<const Ranges> resident;
  {
    std::lock_guard lk(p.mu);
    if (p.state != PeerState::up || !p.link) return;
    link = p.link;
    auto r = p.resident.find(name_);
    if (r == p.resident.end()) return;
    resident = r->second;
  }
  auto s = link->stripes.find(name_);
  if (s == link->stripes.end() || !s->second.key) return;
  const RemoteStripe& rs = s->second;
  // Post every get whose bytes the peer holds, then collect them: one
  // deadline for the batch, so a dead peer costs get_timeout once, not per sample.
  std::vector<Endpoint::PendingGet> gets(pieces.size());
  std::vector<bool> posted(pieces.size(), false);
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& pc = pieces[i];
    if (pc.dst.empty() || pc.offset < rs.begin || pc.offset + pc.dst.size() > rs.end) continue;
    const uint64_t first = (pc.offset - rs.begin) / rs.extent_size;
    const uint64_t last = (pc.offset + pc.dst.size() - 1 - rs.begin) / rs.extent_size;
    if (!covers(*resident, first, last)) continue;
    gets[i] = link->data_ep->start_get(*rs.key, rs.base + (pc.offset - rs.begin), pc.dst.size());
    posted[i] = true;
  }
  const auto deadline = std::chrono::steady_clock::now() + c_.options_.get_timeout;
  std::string first_error, first_timeout;
  size_t failed = 0, timed_out = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!posted[i]) continue;
    Status st = link->data_ep->finish_get(gets[i], pieces[i].dst, deadline);
    pieces[i].ok = st.is_ok();
    if (!st && failed++ == 0) first_error = st.message();
    if (!st && st.err() == ETIMEDOUT && timed_out++ == 0) first_timeout = st.message();
  }
  if (failed > 0)
    spdlog::warn("cluster: {} of {} gets of '{}' from rank {} failed ({}); reading those from the backend", failed,
                 pieces.size(), name_, owner, first_error);
  if (timed_out > 0) c_.data_path_stalled(p, link, first_timeout);
  else if (failed == 0 && p.stalls.load(std::memory_order_relaxed) != 0) p.stalls.store(0);
}

// A get that misses its deadline means the data path to the peer is stuck,
// whatever its heartbeats say: a SIGSTOPped daemon, an overloaded link, or a
// shared-memory queue that a killed third daemon left half-written (UCX's
// posix/sysv FIFOs never recover from that). Waiting out get_timeout on every
// read would turn a fault into minutes of stalls; instead the peer is marked
// down at once (its stripe comes from the backend at full speed), its
// endpoints are closed, and it is rejoined on fresh ones after `reconnect`,
// doubled for each stall in a row (at most 64x).
void Cluster::data_path_stalled(Peer& p, const std::shared_ptr<Link>& link, const std::string& why) {
  std::shared_ptr<Link> drop;  // released after p.mu: closing endpoints must not happen under it
  std::lock_guard lk(p.mu);
  if (p.link != link || p.state != PeerState::up) return;  // already handled by another reader
  const unsigned stalls = std::min(p.stalls.fetch_add(1) + 1, 7u);
  mark_down(p, "its gets missed their deadline (" + why + ")");
  drop = std::move(p.retired);
  p.retired = link;  // closed by the heartbeat thread
  p.next_attempt = Clock::now() + options_.reconnect * (1u << (stalls - 1));
}

Result<std::unique_ptr<Cluster>> Cluster::create(ClusterOptions options, std::vector<ServedDataset> datasets,
                                                 std::function<NodeBytes()> node_bytes) {
  const auto& m = options.membership;
  if (m.peers.empty() || m.self >= m.peers.size())
    return Status(EINVAL, "cluster: rank " + std::to_string(m.self) + " is not in a membership of " +
                              std::to_string(m.peers.size()) + " nodes");
  if (m.peers.size() > 1 && options.token.empty())
    return Status(EINVAL, "cluster of " + std::to_string(m.peers.size()) +
                              " nodes needs a job token ([cluster] token_file or --token-file): the token keeps "
                              "other jobs' daemons out");
  std::unique_ptr<Cluster> c(new Cluster());
  c->options_ = std::move(options);
  c->token_digest_ = digest(c->options_.token);
  c->datasets_ = std::move(datasets);
  c->node_bytes_ = std::move(node_bytes);
  for (uint32_t r = 0; r < c->options_.membership.peers.size(); ++r) {
    auto p = std::make_unique<Peer>();
    p->rank = r;
    p->address = c->options_.membership.peers[r];
    p->state = r == c->self() ? PeerState::self : PeerState::connecting;
    p->since = Clock::now();
    c->peers_.push_back(std::move(p));
  }
  FabricOptions fo;
  fo.listen_host = c->options_.listen_host;
  fo.port = c->options_.membership.peers[c->self()].port;
  fo.listen = c->size() > 1;
  auto fabric = Fabric::create(fo, [cp = c.get()](Message& msg) { cp->on_message(msg); });
  if (!fabric) return fabric.status().with_context("cluster rank " + std::to_string(c->self()));
  c->fabric_ = std::move(fabric).value();
  for (const auto& d : c->datasets_) {
    std::unique_ptr<Registration> reg;
    if (d.buffer->capacity_bytes() > 0) {
      auto r = c->fabric_->register_memory(d.buffer->extent_data(0), d.buffer->capacity_bytes());
      if (!r) return r.status().with_context("dataset '" + d.name + "'");
      reg = std::move(r).value();
    }
    c->registrations_.push_back(std::move(reg));
  }
  for (const auto& d : c->datasets_) {
    c->remotes_.push_back(std::make_unique<Remote>(*c, d.name));
    d.fetcher->set_remote(c->remotes_.back().get());
  }
  if (c->size() > 1) {
    spdlog::info("cluster: rank {} of {} ({}), listening on port {}; {}", c->self(), c->size(),
                 c->options_.membership.source, c->fabric_->port(), c->fabric_->transports());
    c->heartbeat_ = std::thread([cp = c.get()] { cp->heartbeat_loop(); });
  }
  return c;
}

Cluster::~Cluster() {
  for (size_t i = 0; i < datasets_.size(); ++i) datasets_[i].fetcher->set_remote(nullptr);
  for (auto& r : remotes_) r->drain();
  {
    std::lock_guard lk(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  for (auto& p : peers_) {
    std::shared_ptr<Link> l, r;
    {
      std::lock_guard lk(p->mu);
      l = std::move(p->link);
      r = std::move(p->retired);
    }
  }
  registrations_.clear();
  fabric_.reset();
}

json Cluster::local_residency() const {
  json r = json::object();
  for (const auto& d : datasets_) r[d.name] = residency_of(*d.buffer);
  return r;
}

json Cluster::welcome() const {
  json stripes = json::object();
  for (size_t i = 0; i < datasets_.size(); ++i) {
    const auto& b = *datasets_[i].buffer;
    json s = {{"begin", b.range_begin()}, {"end", b.range_end()}, {"extent", b.extent_size()},
              {"extents", b.extent_count()}};
    if (registrations_[i]) {
      s["base"] = registrations_[i]->address();
      const std::string& k = registrations_[i]->packed_rkey();
      s["rkey"] = json::binary(std::vector<uint8_t>(k.begin(), k.end()));
    }
    stripes[datasets_[i].name] = std::move(s);
  }
  return stripes;
}

void Cluster::on_message(Message& m) {
  json j = json::from_msgpack(m.bytes, true, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("t") || !j["t"].is_string()) {
    spdlog::warn("cluster: malformed message from {} ignored", m.from);
    return;
  }
  const std::string t = j["t"];
  const uint32_t from = j.value("rank", UINT32_MAX);
  auto bytes_json = [&] {
    NodeBytes b = node_bytes_ ? node_bytes_() : NodeBytes{};
    return json{{"local", b.local}, {"remote", b.remote}, {"backend", b.backend}};
  };
  if (t == "hello" || t == "ping") {
    if (!m.reply) return;
    std::string why;
    if (j.value("token", std::string()) != token_digest_) why = "wrong job token";
    else if (from >= size() || from == self()) why = "rank " + std::to_string(from) + " is not a peer of this node";
    else if (t == "hello") {
      const json ds = j.value("datasets", json::object());
      for (const auto& d : datasets_) {
        auto it = ds.find(d.name);
        if (it == ds.end()) why = "it does not serve dataset '" + d.name + "'";
        else if (!it->is_number_unsigned() || it->get<uint64_t>() != d.fingerprint)
          why = "its dataset '" + d.name + "' differs from this node's (another tree, format or size)";
      }
    }
    if (!why.empty()) {
      spdlog::warn("cluster: refused a {} from {} (claims rank {}): {}", t, m.from, from, why);
      Status sent = m.reply(encode({{"t", "refused"}, {"rank", self()}, {"why", why}, {"session", j.value("session", 0)}}));
      if (!sent) spdlog::debug("cluster: refusal to {}: {}", m.from, sent.message());
      return;
    }
    json out = {{"t", t == "hello" ? "welcome" : "pong"}, {"rank", self()}, {"session", j.value("session", 0)},
                {"resident", local_residency()}, {"bytes", bytes_json()}};
    if (t == "hello") {
      out["stripes"] = welcome();
      const std::string w = fabric_->worker_address();
      out["worker"] = json::binary(std::vector<uint8_t>(w.begin(), w.end()));
    }
    if (Status s = m.reply(encode(out)); !s) spdlog::warn("cluster: reply to rank {}: {}", from, s.message());
    return;
  }
  if (from >= size() || from == self()) return;
  Peer& p = *peers_[from];
  std::lock_guard lk(p.mu);
  if (!p.link || p.link->session != j.value("session", uint64_t{0})) return;  // an old connection's answer
  if (t == "refused") {
    const std::string why = j.value("why", std::string("?"));
    if (p.state != PeerState::refused)
      spdlog::error("cluster: rank {} ({}) refused this node: {}", from, p.address.to_string(), why);
    p.state = PeerState::refused;
    p.last_error = "refused: " + why;
    p.since = Clock::now();
    p.retired = std::move(p.link);  // closed by the heartbeat thread, which also retries later
    return;
  }
  if (t != "welcome" && t != "pong") return;
  if (t == "welcome") {
    const json stripes = j.value("stripes", json::object());  // items() must not outlive it
    for (auto& [name, s] : stripes.items()) {
      RemoteStripe rs;
      rs.begin = s.value("begin", uint64_t{0});
      rs.end = s.value("end", uint64_t{0});
      rs.extent_size = std::max<uint64_t>(1, s.value("extent", uint64_t{1}));
      rs.extents = s.value("extents", uint64_t{0});
      if (s.contains("rkey") && s["rkey"].is_binary()) {
        const auto& bin = s["rkey"].get_binary();
        rs.packed_key.assign(bin.begin(), bin.end());
        rs.base = s.value("base", uint64_t{0});
      }
      p.link->stripes[name] = std::move(rs);
    }
    if (j.contains("worker") && j["worker"].is_binary()) {
      const auto& w = j["worker"].get_binary();
      p.link->worker_address.assign(w.begin(), w.end());
    }
    p.link->welcomed = true;  // the heartbeat thread makes the data endpoint, then the peer is up
  }
  const json resident = j.value("resident", json::object());
  for (auto& [name, r] : resident.items())
    p.resident[name] = std::make_shared<const Ranges>(r.get<Ranges>());
  const json b = j.value("bytes", json::object());
  p.bytes = {b.value("local", uint64_t{0}), b.value("remote", uint64_t{0}), b.value("backend", uint64_t{0})};
  p.last_heard = Clock::now();
}

void Cluster::mark_down(Peer& p, const std::string& why) {
  if (p.state == PeerState::up)
    spdlog::warn("cluster: rank {} ({}) is down: {}; its stripe is read from the backend", p.rank,
                 p.address.to_string(), why);
  if (p.state != PeerState::refused) p.state = PeerState::down;
  p.last_error = why;
  p.since = Clock::now();
  p.link.reset();
  p.next_attempt = Clock::now() + options_.reconnect;
}

void Cluster::tick(Peer& p, Clock::time_point now) {
  // UCX calls (connect, send, closing an endpoint) are made without p.mu:
  // the progress thread holds UCX's worker lock while its message handler
  // takes p.mu, so the opposite order would deadlock.
  std::shared_ptr<Link> retired, old, ping_on, finish;
  {
    std::lock_guard lk(p.mu);
    retired = std::move(p.retired);
    const bool has_link = p.link != nullptr;
    if (has_link && p.link->failed()) {
      old = p.link;
      mark_down(p, "connection lost");
    } else if (has_link && p.state == PeerState::up && now - p.last_heard > options_.down_after) {
      old = p.link;
      mark_down(p, fmt::format("no heartbeat for {:.1f} s", std::chrono::duration<double>(now - p.last_heard).count()));
    } else if (has_link && p.state != PeerState::up && now - p.link->started > options_.down_after) {
      old = std::move(p.link);  // no welcome in time: try again
      p.last_error = "no answer to the join";
      p.next_attempt = now + options_.reconnect;
    } else if (has_link && p.link->welcomed && !p.link->data_ep) {
      finish = p.link;
    } else if (has_link && p.state == PeerState::up) {
      ping_on = p.link;
    } else if (has_link) {
      return;  // the join is under way
    }
    const bool join = !finish && !ping_on;
    if (join && (p.link || now < p.next_attempt)) return;
    // A refused peer is retried less often: it is usually misconfigured.
    if (join) p.next_attempt = now + (p.state == PeerState::refused ? 5 * options_.reconnect : options_.reconnect);
  }
  if (finish) {
    finish_join(p, finish);
    return;
  }
  if (ping_on) {
    json ping = {{"t", "ping"}, {"rank", self()}, {"token", token_digest_}, {"session", ping_on->session}};
    if (Status s = ping_on->ep->send(encode(ping)); !s) {
      std::lock_guard lk(p.mu);
      p.last_error = s.message();
    }
    return;
  }
  // (Re)join.
  auto link = std::make_shared<Link>();
  link->session = ++session_counter_;
  link->started = now;
  const uint32_t rank = p.rank;
  auto ep = fabric_->connect(p.address.host, p.address.port, [rank](const std::string& why) {
    spdlog::debug("cluster: endpoint to rank {} failed: {}", rank, why);
  });
  if (!ep) {
    std::lock_guard lk(p.mu);
    p.last_error = ep.status().message();
    return;
  }
  link->ep = std::move(ep).value();
  json ds = json::object();
  for (const auto& d : datasets_) ds[d.name] = d.fingerprint;
  {
    // Installed before the hello goes out, so that the welcome finds it.
    std::lock_guard lk(p.mu);
    if (p.state != PeerState::refused) p.state = p.ever_up ? PeerState::down : PeerState::connecting;
    p.link = link;
  }
  json hello = {{"t", "hello"}, {"rank", self()}, {"token", token_digest_}, {"session", link->session}, {"datasets", ds}};
  if (Status s = link->ep->send(encode(hello)); !s) {
    std::lock_guard lk(p.mu);
    p.last_error = s.message();
  }
}

// After a welcome: the data endpoint (from the peer's worker address) and the
// stripes' keys unpacked on it; then the peer is up. Runs on the heartbeat
// thread, UCX calls outside p.mu.
void Cluster::finish_join(Peer& p, const std::shared_ptr<Link>& link) {
  const uint32_t rank = p.rank;
  auto data = fabric_->connect_worker(link->worker_address, p.address.to_string(), [rank](const std::string& why) {
    spdlog::debug("cluster: data endpoint to rank {} failed: {}", rank, why);
  });
  std::map<std::string, std::unique_ptr<Endpoint::RemoteKey>> keys;
  std::string error;
  if (data) {
    for (auto& [name, rs] : link->stripes) {
      if (rs.packed_key.empty()) continue;
      auto key = (*data)->unpack(rs.packed_key);
      if (key) keys[name] = std::move(key).value();
      else error = key.status().message();
    }
  } else {
    error = data.status().message();
  }
  std::lock_guard lk(p.mu);
  if (p.link != link) return;  // replaced meanwhile
  if (!data || !error.empty()) {
    spdlog::warn("cluster: rank {} ({}): {}", rank, p.address.to_string(), error);
    p.last_error = error;
    p.retired = std::move(p.link);
    p.next_attempt = Clock::now() + options_.reconnect;
    return;
  }
  link->data_ep = std::move(data).value();
  for (auto& [name, k] : keys) link->stripes[name].key = std::move(k);
  p.state = PeerState::up;
  p.last_heard = Clock::now();  // the welcome counts as heard; pings follow
  p.since = p.last_heard;
  p.last_error.clear();
  std::string what;
  for (const auto& [name, rs] : link->stripes)
    what += fmt::format("{}'{}' [{}, {}) {}/{} extents resident", what.empty() ? "" : ", ", name, rs.begin, rs.end,
                        p.resident.count(name) ? count(*p.resident[name]) : 0, rs.extents);
  spdlog::info("cluster: rank {} ({}) is {}: {}", rank, p.address.to_string(), p.ever_up ? "back" : "up", what);
  p.ever_up = true;
}

void Cluster::heartbeat_loop() {
  for (;;) {
    {
      std::unique_lock lk(stop_mu_);
      if (stop_cv_.wait_for(lk, options_.heartbeat, [&] { return stop_; })) return;
    }
    const auto now = Clock::now();
    bool all = true;
    for (auto& p : peers_) {
      if (p->rank == self()) continue;
      tick(*p, now);
      std::lock_guard lk(p->mu);
      if (p->state != PeerState::up || !p->link) {
        all = false;
        continue;
      }
      for (const auto& [name, rs] : p->link->stripes) {
        auto r = p->resident.find(name);
        if (r == p->resident.end() || count(*r->second) < rs.extents) all = false;
      }
    }
    for (const auto& d : datasets_)
      if (d.buffer->resident_extents() < d.buffer->cacheable_extents() ||
          d.buffer->cacheable_extents() < d.buffer->extent_count())
        all = false;
    if (all && !all_resident_logged_.exchange(true))
      spdlog::info("cluster: every stripe is resident on its node ({} nodes): the whole dataset is in memory", size());
    if (!all) all_resident_logged_.store(false);
  }
}

json Cluster::status() const {
  json members = json::array();
  const auto now = Clock::now();
  bool all = true;
  for (const auto& p : peers_) {
    json m = {{"rank", p->rank}, {"address", p->address.to_string()}};
    json stripes = json::object();
    if (p->rank == self()) {
      m["state"] = "self";
      for (const auto& d : datasets_) {
        const auto& b = *d.buffer;
        stripes[d.name] = {{"begin", b.range_begin()}, {"end", b.range_end()}, {"extents", b.extent_count()},
                           {"resident_extents", b.resident_extents()}, {"resident_bytes", b.resident_bytes()}};
        if (b.resident_extents() < b.extent_count()) all = false;
      }
      NodeBytes nb = node_bytes_ ? node_bytes_() : NodeBytes{};
      m["bytes"] = {{"local", nb.local}, {"remote", nb.remote}, {"backend", nb.backend}};
    } else {
      std::lock_guard lk(p->mu);
      m["state"] = state_name(p->state);
      m["since_s"] = std::chrono::duration<double>(now - p->since).count();
      if (!p->last_error.empty()) m["last_error"] = p->last_error;
      if (p->state != PeerState::up) all = false;
      if (p->link)
        for (const auto& [name, rs] : p->link->stripes) {
          auto r = p->resident.find(name);
          uint64_t n = r == p->resident.end() ? 0 : count(*r->second);
          stripes[name] = {{"begin", rs.begin}, {"end", rs.end}, {"extents", rs.extents}, {"resident_extents", n}};
          if (n < rs.extents) all = false;
        }
      m["bytes"] = {{"local", p->bytes.local}, {"remote", p->bytes.remote}, {"backend", p->bytes.backend}};
    }
    m["stripes"] = std::move(stripes);
    members.push_back(std::move(m));
  }
  return {{"self", self()},          {"size", size()},
          {"source", options_.membership.source},
          {"port", fabric_->port()}, {"all_resident", all},
          {"members", members}};
}

}  // namespace dlfs::transport
