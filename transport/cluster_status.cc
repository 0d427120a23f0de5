// Cluster::status(): members, their state, stripes, load progress and bytes,
// as dlfs-ctl status shows them.
#include "transport/cluster.h"
#include "transport/cluster_state.h"

namespace dlfs::transport {
namespace {

using nlohmann::json;

json bytes_json(const NodeBytes& b) { return {{"local", b.local}, {"remote", b.remote}, {"backend", b.backend}}; }

template <class Traffic>
json traffic_json(const Traffic& t) {
  json by_kind = json::object();
  uint64_t messages = 0, bytes = 0;
  for (size_t k = 0; k <= kMessageKinds; ++k) {
    const uint64_t m = t.messages[k].load(std::memory_order_relaxed), b = t.bytes[k].load(std::memory_order_relaxed);
    messages += m;
    bytes += b;
    if (m) by_kind[k == kMessageKinds ? "other" : message_name(static_cast<MessageKind>(k))] = {{"messages", m}, {"bytes", b}};
  }
  return {{"messages", messages}, {"bytes", bytes}, {"by_kind", by_kind}};
}

}  // namespace

json Cluster::status() const {
  json members = json::array();
  const auto now = ClusterClock::now();
  bool all = true;
  uint64_t up = 0;
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
      m["bytes"] = bytes_json(local_bytes());
    } else {
      std::lock_guard lk(p->mu);
      m["state"] = state_name(p->state);
      m["watched"] = p->watched;
      if (p->state == PeerState::up) ++up;
      m["since_s"] = std::chrono::duration<double>(now - p->since).count();
      if (!p->last_error.empty()) m["last_error"] = p->last_error;
      if (p->state != PeerState::up) all = false;
      if (p->link)
        for (const auto& [name, rs] : p->link->stripes) {
          auto r = p->resident.find(name);
          uint64_t n = r == p->resident.end() ? 0 : extent_count(*r->second);
          stripes[name] = {{"begin", rs.begin}, {"end", rs.end}, {"extents", rs.extents}, {"resident_extents", n}};
          if (n < rs.extents) all = false;
        }
      m["bytes"] = bytes_json(p->bytes);
    }
    m["stripes"] = std::move(stripes);
    members.push_back(std::move(m));
  }
  return {{"self", self()},          {"size", size()},
          {"source", options_.membership.source},
          {"port", fabric_->port()}, {"all_resident", all},
          {"peers_up", up},          {"watch", options_.watch},
          {"up_s", std::chrono::duration<double>(now - started_).count()},
          // Membership messages (joins, heartbeats, notices, refusals) since start.
          {"membership", {{"sent", traffic_json(sent_)}, {"received", traffic_json(received_)}}},
          // Gets from peers' memory since start: the latency of those that
          // succeeded (common/latency_histogram.h), and the failed ones by why.
          {"gets",
           {{"latency", histogram_json(gets_.latency.snapshot())},
            {"failed",
             {{"timeout", gets_.timeouts.load(std::memory_order_relaxed)},
              {"stale", gets_.stale.load(std::memory_order_relaxed)},
              {"error", gets_.errors.load(std::memory_order_relaxed)}}}}},
          {"members", members}};
}

}  // namespace dlfs::transport
