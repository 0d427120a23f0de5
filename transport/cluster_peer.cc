// Cluster: the peer state machine. Answers to this node's joins and pings
// (progress thread: the challenge, which it proves, the welcome, refusals,
// pongs), and the heartbeat thread that joins peers, pings them, and marks
// them down when they fall silent or their endpoints break.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "transport/cluster.h"
#include "transport/cluster_state.h"

namespace dlfs::transport {

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

Cluster::Peer* Cluster::answering_peer(const Header& h) {
  if (h.rank >= size() || h.rank == self() || h.to != self()) return nullptr;
  return peers_[h.rank].get();
}

// The peer's challenge to this node's hello: proved at once, on the join's
// endpoint (one challenge per join: a second one is ignored).
void Cluster::on_challenge(const Challenge& challenge) {
  Peer* p = answering_peer(challenge);
  if (!p) return;
  std::lock_guard lk(p->mu);
  if (!p->answers(challenge.session) || p->link->proved) return;
  Link& link = *p->link;
  const JoinTranscript t{.initiator = self(), .responder = challenge.rank, .session = challenge.session,
                         .initiator_nonce = link.nonce, .responder_nonce = challenge.nonce};
  Proof proof;
  proof.rank = self();
  proof.to = challenge.rank;
  proof.session = challenge.session;
  proof.mac = proof_mac(job_key_, t);
  proof.datasets = fingerprints_;
  link.key = session_key(job_key_, t);
  link.proved = true;
  // Under p.mu on the progress thread: see the lock notes in cluster.h.
  const std::string bytes = encode(proof, link.key);
  count_sent(bytes, MessageKind::proof);
  if (Status s = link.ep->send(bytes); !s) p->last_error = s.message();
}

// A refusal is not authenticated: it counts only while this node's join is
// under way (after the welcome the peer has no reason to refuse the session,
// and anyone could send one).
void Cluster::on_refused(const Refused& refused) {
  Peer* p = answering_peer(refused);
  if (!p) return;
  std::lock_guard lk(p->mu);
  if (!p->answers(refused.session)) return;
  if (p->link->welcomed) {
    spdlog::debug("cluster: an unauthenticated refusal of rank {}'s admitted session ignored: {}", refused.rank,
                  refused.why);
    return;
  }
  if (p->state != PeerState::refused) {
    spdlog::error("cluster: rank {} ({}) refused this node: {}", refused.rank, p->address.to_string(), refused.why);
    if (p->state == PeerState::up) p->since = ClusterClock::now();
  }
  p->state = PeerState::refused;
  p->last_error = "refused: " + refused.why;
  p->retired = std::move(p->link);  // closed by the heartbeat thread, which also retries later
}

void Cluster::on_welcome(const Sealed& sealed) {
  Peer* p = answering_peer(sealed);
  if (!p) return;
  std::lock_guard lk(p->mu);
  if (!p->answers(sealed.session) || !p->link->proved || p->link->welcomed) return;
  auto opened = open_welcome(sealed, p->link->key);
  if (!opened) {
    if (loud())
      spdlog::warn("cluster: rank {} ({}): a welcome that does not open ignored: {}", sealed.rank,
                   p->address.to_string(), opened.status().message());
    return;
  }
  const Welcome& welcome = *opened;
  for (const auto& [name, s] : welcome.stripes) {
    RemoteStripe& rs = p->link->stripes[name];
    rs = RemoteStripe{};
    rs.begin = s.begin;
    rs.end = s.end;
    rs.extent_size = std::max<uint64_t>(1, s.extent_size);
    rs.extents = s.extents;
    rs.packed_key = s.packed_key;
    rs.base = s.packed_key.empty() ? 0 : s.base;
    rs.round_slots = s.round_slots;
  }
  p->link->worker_address = welcome.worker_address;
  p->link->welcomed = true;  // the heartbeat thread makes the data endpoint, then the peer is up
  heard(*p, welcome.resident, welcome.bytes);
}

// A pong counts once, for a ping this link sent, opened with its key.
void Cluster::on_pong(const Sealed& sealed) {
  Peer* p = answering_peer(sealed);
  if (!p) return;
  std::map<std::string, cache::RoundSpan> rounds;
  {
    std::lock_guard lk(p->mu);
    if (!took_pong(*p, sealed, rounds)) return;
  }
  // Not under the peer's lock: the round pipelines take their own.
  for (const auto& [name, held] : rounds)
    for (auto& r : rounds_)
      if (r && r->name() == name) r->follow(held);
}

bool Cluster::took_pong(Peer& peer, const Sealed& sealed, std::map<std::string, cache::RoundSpan>& rounds) {
  Peer* p = &peer;
  if (!p->answers(sealed.session) || !p->link->welcomed) return false;
  Link& link = *p->link;
  if (sealed.counter <= link.last_pong || sealed.counter > link.pings) {
    spdlog::debug("cluster: a pong from rank {} with counter {} ignored (taken up to {}, sent {})", sealed.rank,
                  sealed.counter, link.last_pong, link.pings);
    return false;
  }
  auto pong = open_pong(sealed, link.key);
  if (!pong) {
    if (loud())
      spdlog::warn("cluster: rank {} ({}): a pong that does not open ignored: {}", sealed.rank,
                   p->address.to_string(), pong.status().message());
    return false;
  }
  link.last_pong = sealed.counter;
  heard(*p, pong->resident, pong->bytes);
  rounds = std::move(pong->rounds);
  return true;
}

void Cluster::heard(Peer& p, const std::map<std::string, ExtentRuns>& resident, const NodeBytes& bytes) {
  for (const auto& [name, runs] : resident) p.resident[name] = std::make_shared<const ExtentRuns>(runs);
  p.bytes = bytes;
  p.last_heard = ClusterClock::now();
}

void Cluster::mark_down(Peer& p, const std::string& why) {
  if (p.state == PeerState::up)
    spdlog::warn("cluster: rank {} ({}) is down: {}; its stripe is read from the backend", p.rank,
                 p.address.to_string(), why);
  // `since` is when the peer stopped being up (or started connecting):
  // failed attempts to join it again do not reset it (report_joins).
  if (p.state == PeerState::up) p.since = ClusterClock::now();
  if (p.state != PeerState::refused) p.state = p.ever_up ? PeerState::down : PeerState::connecting;
  p.last_error = why;
  p.link.reset();
  p.next_attempt = ClusterClock::now() + options_.reconnect;
}

bool Cluster::pinged(const Peer& p) const {
  if (p.watched || !p.link) return true;
  for (const auto& [name, rs] : p.link->stripes) {
    auto r = p.resident.find(name);
    if (r == p.resident.end() || extent_count(*r->second) < rs.extents) return true;  // still loading
  }
  return false;
}

void Cluster::tell_down(uint32_t subject, const std::string& why) {
  found_silent_[subject] = why;
  for (auto& q : peers_)
    if (q->rank != self() && q->rank != subject) send_down(*q, subject, why);
}

// A member that was not up when this node told the others (it was joining
// again) hears of the silent peers once it is back.
void Cluster::retell_down(Peer& q) {
  std::erase_if(found_silent_, [&](const auto& e) {
    const Peer& subject = *peers_[e.first];
    std::lock_guard lk(subject.mu);
    return subject.state == PeerState::up;  // back: nothing to tell any more
  });
  for (const auto& [subject, why] : found_silent_)
    if (subject != q.rank) send_down(q, subject, why);
}

void Cluster::send_down(Peer& q, uint32_t subject, const std::string& why) {
  std::shared_ptr<Link> link;
  DownNotice notice;
  Key key;
  {
    std::lock_guard lk(q.mu);
    if (q.state != PeerState::up || !q.link) return;
    link = q.link;
    notice.counter = ++link->pings;  // the session's one sequence: pings and notices
    key = link->key;
  }
  notice.rank = self();
  notice.to = q.rank;
  notice.session = link->session;
  notice.subject = subject;
  notice.why = why;
  const std::string bytes = encode(notice, key);
  count_sent(bytes, MessageKind::down);
  if (Status s = link->ep->send(bytes); !s) spdlog::debug("cluster: down notice to rank {}: {}", q.rank, s.message());
}

void Cluster::report_joins(ClusterClock::time_point now) {
  if (now < next_join_report_) return;
  std::vector<std::string> lines;
  size_t not_up = 0;
  for (auto& p : peers_) {
    if (p->rank == self()) continue;
    std::lock_guard lk(p->mu);
    if (p->state == PeerState::up) continue;
    ++not_up;
    const auto waited = now - p->since;
    if (waited < options_.join_report_after) continue;
    if (lines.size() < 8)
      lines.push_back(fmt::format("rank {} ({}) {} for {:.0f} s: {}", p->rank, p->address.to_string(),
                                  state_name(p->state), std::chrono::duration<double>(waited).count(),
                                  p->last_error.empty() ? "no answer yet" : p->last_error));
    else
      lines.push_back("");
  }
  if (lines.empty()) {
    if (not_up == 0 && joins_reported_) {
      spdlog::info("cluster: every peer is up ({:.1f} s after start)",
                   std::chrono::duration<double>(now - started_).count());
      joins_reported_ = false;
    }
    return;
  }
  std::string text;
  size_t shown = 0;
  for (const auto& l : lines)
    if (!l.empty()) text += (shown++ ? "; " : "") + l;
  if (lines.size() > shown) text += fmt::format("; and {} more (dlfs-ctl status lists them)", lines.size() - shown);
  spdlog::warn("cluster: {} of {} peers not up: {}", not_up, size() - 1, text);
  joins_reported_ = true;
  next_join_report_ = now + options_.join_report_every;
}

void Cluster::tick(Peer& p, ClusterClock::time_point now) {
  // UCX calls (connect, send, closing an endpoint) are made without p.mu:
  // the progress thread holds UCX's worker lock while its message handler
  // takes p.mu, so the opposite order would deadlock.
  std::shared_ptr<Link> retired, old, ping_on, finish;
  std::string silent;  // why a watched peer was marked down: the other members are told
  {
    std::lock_guard lk(p.mu);
    retired = std::move(p.retired);
    const bool has_link = p.link != nullptr;
    if (has_link && p.link->failed()) {
      old = p.link;
      mark_down(p, "connection lost");
    } else if (has_link && p.state == PeerState::up && pinged(p) && now - p.last_heard > options_.down_after) {
      old = p.link;
      silent = fmt::format("no heartbeat for {:.1f} s", std::chrono::duration<double>(now - p.last_heard).count());
      mark_down(p, silent);
    } else if (has_link && p.link->welcomed && !p.link->data_ep) {
      finish = p.link;  // welcomed: finished at this tick, however long ticks are
    } else if (has_link && p.state != PeerState::up && now - p.link->started > options_.down_after) {
      old = std::move(p.link);  // no welcome in time: try again
      p.last_error = "no answer to the join";
      p.next_attempt = now + options_.reconnect;
    } else if (has_link && p.state == PeerState::up) {
      if (!pinged(p)) return;  // a peer another member watches, loaded: nothing to ask it
      ping_on = p.link;
    } else if (has_link) {
      return;  // the join is under way
    }
    const bool join = !finish && !ping_on && silent.empty();
    if (join && (p.link || now < p.next_attempt)) return;
    // A refused peer is retried less often: it is usually misconfigured.
    if (join) p.next_attempt = now + (p.state == PeerState::refused ? 5 * options_.reconnect : options_.reconnect);
  }
  if (!silent.empty()) {
    tell_down(p.rank, silent);
    return;
  }
  if (finish) {
    finish_join(p, finish);
    retell_down(p);
  }
  else if (ping_on) ping(p, ping_on);
  else join(p, now);
}

void Cluster::ping(Peer& p, const std::shared_ptr<Link>& link) {
  Ping ping;
  ping.rank = self();
  ping.to = p.rank;
  ping.session = link->session;
  Key key;
  {
    std::lock_guard lk(p.mu);
    ping.counter = ++link->pings;
    key = link->key;
  }
  const std::string bytes = encode(ping, key);
  count_sent(bytes, MessageKind::ping);
  if (Status s = link->ep->send(bytes); !s) {
    std::lock_guard lk(p.mu);
    p.last_error = s.message();
  }
}

// (Re)joins: a fresh endpoint through the peer's listener, and a hello on it
// with a fresh session and nonce.
void Cluster::join(Peer& p, ClusterClock::time_point now) {
  auto link = std::make_shared<Link>();
  link->session = fresh_session();
  link->nonce = fresh_nonce();
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
  Hello hello;
  hello.rank = self();
  hello.to = p.rank;
  hello.session = link->session;
  hello.nonce = link->nonce;
  {
    // Installed before the hello goes out, so that the challenge finds it.
    std::lock_guard lk(p.mu);
    if (p.state != PeerState::refused) p.state = p.ever_up ? PeerState::down : PeerState::connecting;
    p.link = link;
  }
  const std::string bytes = encode(hello);
  count_sent(bytes, MessageKind::hello);
  if (Status s = link->ep->send(bytes); !s) {
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
    // Its lanes, and whether gets go as ucp_get or as DLFS's messages.
    spdlog::debug("cluster: data endpoint to rank {}:\n{}", rank, (*data)->describe());
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
    p.next_attempt = ClusterClock::now() + options_.reconnect;
    return;
  }
  link->data_ep = std::move(data).value();
  for (auto& [name, k] : keys) link->stripes[name].key = std::move(k);
  p.state = PeerState::up;
  p.last_heard = ClusterClock::now();  // the welcome counts as heard; pings follow
  p.since = p.last_heard;
  p.last_error.clear();
  std::string what;
  for (const auto& [name, rs] : link->stripes)
    what += fmt::format("{}'{}' [{}, {}) {}/{} extents resident", what.empty() ? "" : ", ", name, rs.begin, rs.end,
                        p.resident.count(name) ? extent_count(*p.resident[name]) : 0, rs.extents);
  spdlog::info("cluster: rank {} ({}) is {}: {}", rank, p.address.to_string(), p.ever_up ? "back" : "up", what);
  p.ever_up = true;
}

void Cluster::heartbeat_loop() {
  for (;;) {
    {
      std::unique_lock lk(stop_mu_);
      if (stop_cv_.wait_for(lk, options_.heartbeat, [&] { return stop_; })) return;
    }
    const auto now = ClusterClock::now();
    for (auto& p : peers_)
      if (p->rank != self()) tick(*p, now);
    report_joins(now);
    const bool all = every_stripe_resident();
    if (all && !all_resident_logged_.exchange(true))
      spdlog::info("cluster: every stripe is resident on its node ({} nodes): the whole dataset is in memory", size());
    if (!all) all_resident_logged_.store(false);
  }
}

// Every peer up with all its extents resident, and this node's stripes loaded.
bool Cluster::every_stripe_resident() const {
  bool all = true;
  for (const auto& p : peers_) {
    if (p->rank == self()) continue;
    std::lock_guard lk(p->mu);
    if (p->state != PeerState::up || !p->link) {
      all = false;
      continue;
    }
    for (const auto& [name, rs] : p->link->stripes) {
      auto r = p->resident.find(name);
      if (r == p->resident.end() || extent_count(*r->second) < rs.extents) all = false;
    }
  }
  for (const auto& d : datasets_)
    if (d.buffer->resident_extents() < d.buffer->cacheable_extents() ||
        d.buffer->cacheable_extents() < d.buffer->extent_count())
      all = false;
  return all;
}

}  // namespace dlfs::transport
