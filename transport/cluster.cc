// Cluster: creation and teardown, every message in (decoded, then handed to
// one handler per kind), and this node's answers to hellos and pings.
#include "transport/cluster.h"

#include <cstdio>
#include <type_traits>
#include <variant>

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include "transport/cluster_state.h"

namespace dlfs::transport {
namespace {

// The token never travels: a digest of it does (it keeps other jobs' daemons
// out; it is not a defence against someone who can read the wire).
std::string digest(const std::string& token) {
  XXH128_hash_t h = XXH3_128bits(token.data(), token.size());
  char b[40];
  std::snprintf(b, sizeof b, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return b;
}

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
    p->since = ClusterClock::now();
    c->peers_.push_back(std::move(p));
  }
  FabricOptions fo;
  fo.listen_host = c->options_.listen_host;
  fo.port = c->options_.membership.peers[c->self()].port;
  fo.listen = c->size() > 1;
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

void Cluster::on_message(Message& m) {
  auto decoded = decode(m.bytes);
  if (!decoded) {
    spdlog::warn("cluster: malformed message from {} ignored: {}", m.from, decoded.status().message());
    return;
  }
  std::visit(
      [&](const auto& msg) {
        using T = std::decay_t<decltype(msg)>;
        if constexpr (std::is_same_v<T, Hello>) on_hello(msg, m);
        else if constexpr (std::is_same_v<T, Ping>) on_ping(msg, m);
        else if constexpr (std::is_same_v<T, Welcome>) on_welcome(msg);
        else if constexpr (std::is_same_v<T, Refused>) on_refused(msg);
        else on_pong(msg);
      },
      *decoded);
}

std::string Cluster::refusal(uint32_t rank, const std::string& token_digest) const {
  if (token_digest != token_digest_) return "wrong job token";
  if (rank >= size() || rank == self()) return "rank " + std::to_string(rank) + " is not a peer of this node";
  return {};
}

void Cluster::refuse(MessageKind kind, uint32_t rank, uint64_t session, const std::string& why, Message& m) const {
  spdlog::warn("cluster: refused a {} from {} (claims rank {}): {}", message_name(kind), m.from, rank, why);
  Status sent = m.reply(encode(Refused{.rank = self(), .session = session, .why = why}));
  if (!sent) spdlog::debug("cluster: refusal to {}: {}", m.from, sent.message());
}

void Cluster::reply(const std::string& bytes, uint32_t rank, Message& m) const {
  if (Status s = m.reply(bytes); !s) spdlog::warn("cluster: reply to rank {}: {}", rank, s.message());
}

void Cluster::on_hello(const Hello& hello, Message& m) {
  if (!m.reply) return;
  std::string why = refusal(hello.rank, hello.token_digest);
  if (why.empty())
    for (const auto& d : datasets_) {  // the last mismatch is the one reported
      auto it = hello.datasets.find(d.name);
      if (it == hello.datasets.end()) why = "it does not serve dataset '" + d.name + "'";
      else if (it->second != d.fingerprint)
        why = "its dataset '" + d.name + "' differs from this node's (another tree, format or size)";
    }
  if (!why.empty()) return refuse(hello.kind, hello.rank, hello.session, why, m);
  reply(encode(Welcome{.rank = self(),
                       .session = hello.session,
                       .resident = local_residency(),
                       .bytes = local_bytes(),
                       .stripes = stripe_offers(),
                       .worker_address = fabric_->worker_address()}),
        hello.rank, m);
}

void Cluster::on_ping(const Ping& ping, Message& m) {
  if (!m.reply) return;
  if (std::string why = refusal(ping.rank, ping.token_digest); !why.empty())
    return refuse(ping.kind, ping.rank, ping.session, why, m);
  reply(encode(Pong{.rank = self(), .session = ping.session, .resident = local_residency(), .bytes = local_bytes()}),
        ping.rank, m);
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
    stripes[datasets_[i].name] = std::move(s);
  }
  return stripes;
}

NodeBytes Cluster::local_bytes() const { return node_bytes_ ? node_bytes_() : NodeBytes{}; }

}  // namespace dlfs::transport
