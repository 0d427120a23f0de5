// Cluster: the remote half of the read path (cache::RemoteFetch): one-sided
// gets from the owner's registered stripe, with one bounded wait per batch.
#include <algorithm>
#include <vector>

#include <spdlog/spdlog.h>

#include "transport/cluster.h"
#include "transport/cluster_state.h"

namespace dlfs::transport {

bool Cluster::Remote::fetch(uint32_t owner, uint64_t offset, std::span<std::byte> dst) {
  Piece one{offset, dst};
  fetch_many(owner, std::span<Piece>(&one, 1));
  return one.ok;
}

void Cluster::Remote::fetch_many(uint32_t owner, std::span<Piece> pieces) {
  for (Piece& p : pieces) p.ok = false;
  if (owner >= c_.peers_.size() || owner == c_.self() || pieces.empty()) return;
  const auto in_flight = inflight_.enter();
  Peer& p = *c_.peers_[owner];
  std::shared_ptr<Link> link;
  std::shared_ptr<const ExtentRuns> resident;
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
  std::vector<std::chrono::steady_clock::time_point> posted_at(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& pc = pieces[i];
    if (pc.dst.empty() || pc.offset < rs.begin || pc.offset + pc.dst.size() > rs.end) continue;
    const uint64_t first = (pc.offset - rs.begin) / rs.extent_size;
    const uint64_t last = (pc.offset + pc.dst.size() - 1 - rs.begin) / rs.extent_size;
    if (!covers(*resident, first, last)) continue;
    posted_at[i] = std::chrono::steady_clock::now();
    gets[i] = link->data_ep->start_get_into(*rs.key, rs.base + (pc.offset - rs.begin), pc.dst);
    posted[i] = true;
  }
  const auto deadline = std::chrono::steady_clock::now() + c_.options_.get_timeout;
  std::string first_error, first_timeout;
  size_t failed = 0, timed_out = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!posted[i]) continue;
    Status st = link->data_ep->finish_get(gets[i], pieces[i].dst, deadline);
    pieces[i].ok = st.is_ok();
    c_.gets_.finished(st, std::chrono::steady_clock::now() - posted_at[i]);
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
  p.next_attempt = ClusterClock::now() + options_.reconnect * (1u << (stalls - 1));
}

}  // namespace dlfs::transport
