// Cluster: creation and teardown, every message in (decoded, then handed to
// one handler per kind), and this node as a responder: its challenges to
// hellos, its checks of proofs (then the welcome) and of pings (then the pong).
#include "transport/cluster.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <type_traits>
#include <variant>

#include <spdlog/spdlog.h>

#include "transport/cluster_state.h"

namespace dlfs::transport {
namespace {

// Joins challenged and not yet proved, at most (the oldest go first): a flood
// of hellos costs memory up to this, and the honest joins it pushed out retry.
constexpr size_t kMaxChallenges = 256;

}  // namespace

ExtentRuns residency_of(const cache::StorageBuffer& b) {
  ExtentRuns r;
  for (uint64_t e = 0; e < b.extent_count(); ++e) {
    if (b.state(e) != cache::ExtentState::resident) continue;
    if (!r.empty() && r.back().second + 1 == e) r.back().second = e;
    else r.emplace_back(e, e);
  }
  return r;
}

bool covers(const ExtentRuns& r, uint64_t first, uint64_t last) {
  for (const auto& [a, b] : r)
    if (a <= first && last <= b) return true;
  return false;
}

uint64_t extent_count(const ExtentRuns& r) {
  uint64_t n = 0;
  for (const auto& [a, b] : r) n += b - a + 1;
  return n;
}

Result<std::unique_ptr<Cluster>> Cluster::create(ClusterOptions options, std::vector<ServedDataset> datasets,
                                                 std::function<NodeBytes()> node_bytes,
                                                 const FabricFactory& make_fabric) {
  const auto& m = options.membership;
  if (m.peers.empty() || m.self >= m.peers.size())
    return Status(EINVAL, "cluster: rank " + std::to_string(m.self) + " is not in a membership of " +
                              std::to_string(m.peers.size()) + " nodes");
  if (m.peers.size() > 1 && options.token.empty())
    return Status(EINVAL, "cluster of " + std::to_string(m.peers.size()) +
                              " nodes needs a job token ([cluster] token_file or --token-file): the token keeps "
                              "other jobs' daemons out");
  if (!crypto_ready()) return Status(EIO, "cluster: libsodium could not be initialised");
  std::unique_ptr<Cluster> c(new Cluster());
  c->options_ = std::move(options);
  c->job_key_ = job_key(c->options_.token);
  wipe(c->options_.token);
  c->datasets_ = std::move(datasets);
  for (const auto& d : c->datasets_) c->fingerprints_[d.name] = d.fingerprint;
  c->node_bytes_ = std::move(node_bytes);
  for (uint32_t r = 0; r < c->options_.membership.peers.size(); ++r) {
    auto p = std::make_unique<Peer>();
    p->rank = r;
    p->address = c->options_.membership.peers[r];
    p->state = r == c->self() ? PeerState::self : PeerState::connecting;
    p->since = ClusterClock::now();
    const uint32_t n = c->size(), ahead = (r + n - c->self()) % n;  // r is self + ahead on the ring
    p->watched = c->options_.watch == 0 || c->options_.watch >= n - 1 || (ahead >= 1 && ahead <= c->options_.watch);
    c->peers_.push_back(std::move(p));
  }
  c->started_ = ClusterClock::now();
  c->next_join_report_ = c->started_ + c->options_.join_report_after;
  FabricOptions fo;
  fo.listen_host = c->options_.listen_host;
  fo.port = c->options_.membership.peers[c->self()].port;
  fo.listen = c->size() > 1;
  fo.gets = c->options_.gets;
  fo.max_accepted = std::max<size_t>(fo.max_accepted, 2 * size_t{c->size()} + 64);  // rejoins overlap old connections
  auto fabric = make_fabric(fo, [cp = c.get()](Message& msg) { cp->on_message(msg); });
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
    // Rounds over the job's memory: serve this node's slots, read the others'.
    c->rounds_.push_back(d.rounds && c->size() > 1 ? std::make_unique<Rounds>(*c, d) : nullptr);
    if (c->rounds_.back() && d.reader) d.reader->set_round_remote(c->rounds_.back().get());
  }
  {
    std::lock_guard lk(c->handler_mu_);
    c->serving_ = true;
  }
  if (c->size() > 1) {
    spdlog::info("cluster: rank {} of {} ({}), listening on port {}; {}", c->self(), c->size(),
                 c->options_.membership.source, c->fabric_->port(), c->fabric_->transports());
    c->heartbeat_ = std::thread([cp = c.get()] { cp->heartbeat_loop(); });
  }
  return c;
}

Cluster::~Cluster() {
  {
    std::lock_guard lk(handler_mu_);  // waits for a message being handled
    serving_ = false;
  }
  for (size_t i = 0; i < datasets_.size(); ++i) {
    datasets_[i].fetcher->set_remote(nullptr);
    if (datasets_[i].reader) datasets_[i].reader->set_round_remote(nullptr);
  }
  for (auto& r : remotes_) r->drain();
  for (auto& r : rounds_)
    if (r) r->drain();
  rounds_.clear();  // stops serving the round slots (before the fabric goes)
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

void Cluster::on_message(Message& m) {
  std::lock_guard lk(handler_mu_);
  if (!serving_) return;  // not set up yet, or going away
  auto decoded = decode(m.bytes);
  count_received(m.bytes, !decoded ? MessageKind{kMessageKinds} : std::visit([](const auto& msg) {
    using T = std::decay_t<decltype(msg)>;
    if constexpr (std::is_same_v<T, VersionMismatch>) return MessageKind{kMessageKinds};
    else return msg.kind;
  }, *decoded));
  if (!decoded) {
    if (loud()) spdlog::warn("cluster: malformed message from {} ignored: {}", m.from, decoded.status().message());
    return;
  }
  std::visit(
      [&](const auto& msg) {
        using T = std::decay_t<decltype(msg)>;
        if constexpr (std::is_same_v<T, Hello>) on_hello(msg, m);
        else if constexpr (std::is_same_v<T, Challenge>) on_challenge(msg);
        else if constexpr (std::is_same_v<T, Proof>) on_proof(msg, m);
        else if constexpr (std::is_same_v<T, Refused>) on_refused(msg);
        else if constexpr (std::is_same_v<T, VersionMismatch>) on_version_mismatch(msg, m);
        else if (msg.kind == MessageKind::ping) on_ping(msg, m);
        else if (msg.kind == MessageKind::down) on_down(msg, m);
        else if (msg.kind == MessageKind::welcome) on_welcome(msg);
        else on_pong(msg);
      },
      *decoded);
}

bool Cluster::loud() {
  constexpr auto kWindow = std::chrono::seconds(10);
  constexpr unsigned kLines = 20;
  std::lock_guard lk(log_mu_);
  const auto now = ClusterClock::now();
  if (now - log_window_ > kWindow) {
    if (unlogged_ > 0)
      spdlog::warn("cluster: {} more refused or malformed messages in the last {} s were not logged", unlogged_,
                   std::chrono::duration_cast<std::chrono::seconds>(now - log_window_).count());
    log_window_ = now;
    logged_ = unlogged_ = 0;
  }
  if (logged_ < kLines) return ++logged_, true;
  ++unlogged_;
  return false;
}

std::string Cluster::requester_refusal(const Header& h) const {
  if (h.rank >= size() || h.rank == self()) return "rank " + std::to_string(h.rank) + " is not a peer of this node";
  if (h.to != self())
    return "this node is rank " + std::to_string(self()) + ", not " + std::to_string(h.to) +
           " (the nodes' peer lists differ)";
  return {};
}

void Cluster::refuse(const char* what, const Header& h, const std::string& why, Message& m) {
  if (loud()) spdlog::warn("cluster: refused a {} from {} (claims rank {}): {}", what, m.from, h.rank, why);
  Refused r;
  r.rank = self();
  r.to = h.rank;
  r.session = h.session;
  r.why = why;
  const std::string bytes = encode(r);
  count_sent(bytes, MessageKind::refused);
  Status sent = m.reply(bytes);
  if (!sent) spdlog::debug("cluster: refusal to {}: {}", m.from, sent.message());
}

void Cluster::count_sent(const std::string& bytes, MessageKind kind) {
  const auto k = std::min<size_t>(static_cast<size_t>(kind), kMessageKinds);
  sent_.messages[k].fetch_add(1, std::memory_order_relaxed);
  sent_.bytes[k].fetch_add(bytes.size(), std::memory_order_relaxed);
}

void Cluster::count_received(const std::string& bytes, MessageKind kind) {
  const auto k = std::min<size_t>(static_cast<size_t>(kind), kMessageKinds);
  received_.messages[k].fetch_add(1, std::memory_order_relaxed);
  received_.bytes[k].fetch_add(bytes.size(), std::memory_order_relaxed);
}

void Cluster::reply(const std::string& bytes, MessageKind kind, uint32_t rank, Message& m) {
  if (bytes.size() > kMaxMessageBytes)
    spdlog::warn("cluster: a message of {} bytes to rank {} is larger than the maximum ({}): it will drop it",
                 bytes.size(), rank, kMaxMessageBytes);
  count_sent(bytes, kind);
  if (Status s = m.reply(bytes); !s) spdlog::warn("cluster: reply to rank {}: {}", rank, s.message());
}

// A hello: a fresh challenge, remembered for the proof. Nothing about this
// node goes out before the proof.
void Cluster::on_hello(const Hello& hello, Message& m) {
  if (!m.reply) return;
  if (std::string why = requester_refusal(hello); !why.empty()) return refuse("join", hello, why, m);
  Challenge c;
  c.rank = self();
  c.to = hello.rank;
  c.session = hello.session;
  c.nonce = fresh_nonce();
  {
    std::lock_guard lk(serve_mu_);
    const auto now = ClusterClock::now();
    const auto ttl = 2 * options_.down_after;  // the joiner gives up after down_after
    while (!challenged_.empty() && (now - challenged_.front().at > ttl || challenged_.size() >= kMaxChallenges))
      challenged_.pop_front();
    std::erase_if(challenged_, [&](const Challenged& x) { return x.rank == hello.rank && x.session == hello.session; });
    challenged_.push_back({hello.rank, hello.session, hello.nonce, c.nonce, now});
  }
  reply(encode(c), MessageKind::challenge, hello.rank, m);
}

// A proof: good for the one challenge of its join (taken here, whatever the
// outcome), then the datasets; a good one admits the peer's session and gets
// the welcome, sealed with the session key.
void Cluster::on_proof(const Proof& proof, Message& m) {
  if (!m.reply) return;
  if (std::string why = requester_refusal(proof); !why.empty()) return refuse("join", proof, why, m);
  std::optional<Challenged> challenge;
  {
    std::lock_guard lk(serve_mu_);
    auto it = std::find_if(challenged_.begin(), challenged_.end(),
                           [&](const Challenged& x) { return x.rank == proof.rank && x.session == proof.session; });
    if (it != challenged_.end()) {
      challenge = std::move(*it);
      challenged_.erase(it);
    }
  }
  if (!challenge)
    return refuse("join", proof, "no challenge is pending for this join (a replayed, late or repeated proof)", m);
  const JoinTranscript t{.initiator = proof.rank, .responder = self(), .session = proof.session,
                         .initiator_nonce = challenge->initiator_nonce, .responder_nonce = challenge->responder_nonce};
  if (!proof_mac_valid(job_key_, t, proof.mac)) return refuse("join", proof, "wrong job token", m);
  const Key key = session_key(job_key_, t);
  auto opened = open_proof(proof, key);
  if (!opened) return refuse("join", proof, opened.status().message(), m);
  const auto& datasets = opened->datasets;
  std::string why;
  for (const auto& d : datasets_) {  // the last mismatch is the one reported
    auto it = datasets.find(d.name);
    if (it == datasets.end()) why = "it does not serve dataset '" + d.name + "'";
    else if (it->second != d.fingerprint)
      why = "its dataset '" + d.name + "' differs from this node's (another tree, format or size)";
  }
  if (!why.empty()) return refuse("join", proof, why, m);
  {
    std::lock_guard lk(serve_mu_);
    Admitted& a = admitted_[proof.rank];  // a rejoin replaces the session
    a.session = proof.session;
    a.key = key;
    a.counter = 0;
  }
  spdlog::debug("cluster: admitted rank {} ({}), session {:016x}", proof.rank, m.from, proof.session);
  Welcome w;
  w.rank = self();
  w.to = proof.rank;
  w.session = proof.session;
  w.resident = local_residency();
  w.bytes = local_bytes();
  w.stripes = stripe_offers();
  w.worker_address = fabric_->worker_address();
  reply(encode(w, key), MessageKind::welcome, proof.rank, m);
}

// The key of a sealed message (ping, down notice) on the session its sender
// was admitted with, if its counter is above every earlier one; otherwise it
// is refused and nullopt.
std::optional<Key> Cluster::admitted_key(const Sealed& s, const char* what, Message& m) {
  if (std::string why = requester_refusal(s); !why.empty()) return refuse(what, s, why, m), std::nullopt;
  std::optional<Key> key;
  uint64_t last = 0;
  {
    std::lock_guard lk(serve_mu_);
    auto it = admitted_.find(s.rank);
    if (it != admitted_.end() && it->second.session == s.session) {
      key = it->second.key;
      last = it->second.counter;
    }
  }
  if (!key) return refuse(what, s, "not on a session this node admitted (join again)", m), std::nullopt;
  if (s.counter <= last)
    return refuse(what, s, std::string("a replayed ") + (s.kind == MessageKind::ping ? "heartbeat" : what) +
                               " (counter " + std::to_string(s.counter) + ", seen up to " + std::to_string(last) + ")", m),
           std::nullopt;
  return key;
}

// Takes a sealed message's counter once it opened: false if another of the
// session, or a rejoin, came meanwhile (only if handlers ever ran on several
// threads): the counter only grows.
bool Cluster::take_counter(const Sealed& s) {
  std::lock_guard lk(serve_mu_);
  auto it = admitted_.find(s.rank);
  if (it == admitted_.end() || it->second.session != s.session || it->second.counter >= s.counter) return false;
  it->second.counter = s.counter;
  return true;
}

// A ping: only on the admitted session of its sender, sealed with its key,
// with a counter above every earlier one.
void Cluster::on_ping(const Sealed& ping, Message& m) {
  if (!m.reply) return;
  const std::optional<Key> key = admitted_key(ping, "ping", m);
  if (!key) return;
  if (auto opened = open_ping(ping, *key); !opened) return refuse("ping", ping, "the heartbeat does not authenticate", m);
  if (!take_counter(ping)) return;
  Pong pong;
  pong.rank = self();
  pong.to = ping.rank;
  pong.session = ping.session;
  pong.counter = ping.counter;
  pong.resident = local_residency();
  pong.bytes = local_bytes();
  pong.rounds = local_rounds();
  reply(encode(pong, *key), MessageKind::pong, ping.rank, m);
}

// A down notice: authenticated as a ping is. The subject is marked down and
// joined again at the next tick (no answer goes back).
void Cluster::on_down(const Sealed& sealed, Message& m) {
  const std::optional<Key> key = admitted_key(sealed, "down notice", m);
  if (!key) return;
  auto notice = open_down(sealed, *key);
  if (!notice) return refuse("down notice", sealed, "the notice does not authenticate", m);
  if (!take_counter(sealed)) return;
  const uint32_t subject = notice->subject;
  if (subject >= size() || subject == self() || subject == sealed.rank) {
    spdlog::debug("cluster: rank {} reports rank {} silent: ignored ({})", sealed.rank, subject,
                  subject == self() ? "this node" : "not a third member");
    return;
  }
  Peer& p = *peers_[subject];
  std::lock_guard lk(p.mu);
  if (p.state != PeerState::up) return;
  p.retired = std::move(p.link);  // closed by the heartbeat thread (no UCX call on this one under p.mu)
  mark_down(p, fmt::format("rank {} found it silent ({})", sealed.rank, notice->why));
  p.next_attempt = ClusterClock::now();  // join again at once: a subject that is alive comes back
}

void Cluster::on_version_mismatch(const VersionMismatch& v, Message& m) {
  if (loud())
    spdlog::warn("cluster: {} a {} from {} (claims rank {}): protocol version {}, this node speaks version {}",
                 m.reply ? "refused" : "ignored", v.kind, m.from, v.rank, v.version, kProtocolVersion);
  if (!m.reply) return;
  Refused r;
  r.rank = self();
  r.to = v.rank;
  r.session = v.session;
  r.why = "protocol version " + std::to_string(v.version) + " is not this node's (" +
          std::to_string(kProtocolVersion) + "): run one DLFS version on every node";
  const std::string bytes = encode(r);
  count_sent(bytes, MessageKind::refused);
  if (Status s = m.reply(bytes); !s) spdlog::debug("cluster: refusal to {}: {}", m.from, s.message());
}

std::map<std::string, ExtentRuns> Cluster::local_residency() const {
  std::map<std::string, ExtentRuns> r;
  for (const auto& d : datasets_) r[d.name] = residency_of(*d.buffer);
  return r;
}

std::map<std::string, StripeOffer> Cluster::stripe_offers() const {
  std::map<std::string, StripeOffer> stripes;
  for (size_t i = 0; i < datasets_.size(); ++i) {
    const auto& b = *datasets_[i].buffer;
    StripeOffer s;
    s.begin = b.range_begin();
    s.end = b.range_end();
    s.extent_size = b.extent_size();
    s.extents = b.extent_count();
    if (registrations_[i]) {
      s.base = registrations_[i]->address();
      s.packed_key = registrations_[i]->packed_rkey();
    }
    if (i < rounds_.size() && rounds_[i]) s.round_slots = rounds_[i]->slot_addresses();
    stripes[datasets_[i].name] = std::move(s);
  }
  return stripes;
}

std::map<std::string, cache::RoundSpan> Cluster::local_rounds() const {
  std::map<std::string, cache::RoundSpan> out;
  for (const auto& r : rounds_) {
    cache::RoundSpan held;
    if (r && r->held(held)) out[r->name()] = held;
  }
  return out;
}

NodeBytes Cluster::local_bytes() const { return node_bytes_ ? node_bytes_() : NodeBytes{}; }

}  // namespace dlfs::transport
