// Cluster: rounds over the job's memory (cache/round_remote.h). Each member
// loads its part of every round into one of its two round slots; while a
// slot holds a loaded round it is served under that round's tag, and it
// stops being served before the slot is reused. A reader asks the member
// that holds a chunk for it by the round's tag, first in the slot this node
// holds the round in (members load rounds in the same sequence), then in
// the other: the answer is that round's bytes or a refusal (ESTALE: not
// there, not yet or no longer), never another round's bytes. A refusal, a
// peer that is down or a late answer: the reader goes to the backend.
#include <algorithm>
#include <thread>

#include <spdlog/spdlog.h>

#include "cache/round_remote.h"
#include "transport/cluster.h"
#include "transport/cluster_state.h"

namespace dlfs::transport {

Cluster::Rounds::Rounds(Cluster& c, const ServedDataset& d)
    : c_(c), name_(d.name), pipeline_(*d.rounds), key_(d.round_key) {
  pipeline_.set_slot_events(
      {[this](int slot, uint64_t epoch, uint32_t round, const std::byte* base, uint64_t bytes) {
         ready(slot, epoch, round, base, bytes);
       },
       [this](int slot) { retired(slot); },
       [this](int slot) { return served_[slot] ? c_.fabric_->served_bytes(served_[slot]) : 0; }});
}

Cluster::Rounds::~Rounds() {
  pipeline_.set_slot_events({});  // under the pipeline's lock: no event runs after this
  for (uint64_t& h : served_)
    if (h) c_.fabric_->unserve(std::exchange(h, 0));
}

void Cluster::Rounds::ready(int slot, uint64_t epoch, uint32_t round, const std::byte* base, uint64_t bytes) {
  if (bytes == 0) return;  // this node holds nothing of the round
  auto h = c_.fabric_->serve_tagged(base, bytes, cache::round_tag(key_, epoch, round));
  if (!h) {
    spdlog::warn("[{}] round {} of epoch {}: cannot serve it to peers ({}); they read its chunks from the backend",
                 name_, round, epoch, h.status().message());
    return;
  }
  served_[slot] = *h;
}

void Cluster::Rounds::retired(int slot) {
  if (served_[slot]) c_.fabric_->unserve(std::exchange(served_[slot], 0));
}

bool Cluster::Rounds::gave_up(uint32_t member, uint64_t epoch, uint32_t round) const {
  std::lock_guard lk(mu_);
  return std::find(gave_up_.begin(), gave_up_.end(), std::tuple{member, epoch, round}) != gave_up_.end();
}

void Cluster::Rounds::give_up(uint32_t member, uint64_t epoch, uint32_t round) {
  std::lock_guard lk(mu_);
  if (std::find(gave_up_.begin(), gave_up_.end(), std::tuple{member, epoch, round}) != gave_up_.end()) return;
  gave_up_.push_back({member, epoch, round});
  if (gave_up_.size() > kGaveUpKept) gave_up_.pop_front();
}

std::vector<uint64_t> Cluster::Rounds::slot_addresses() const {
  return {reinterpret_cast<uint64_t>(pipeline_.slot_base(0)), reinterpret_cast<uint64_t>(pipeline_.slot_base(1))};
}

bool Cluster::Rounds::fetch_round(uint32_t member, uint64_t epoch, uint32_t round, int slot_hint, uint64_t offset,
                                  std::span<std::byte> dst) {
  if (member >= c_.peers_.size() || member == c_.self() || dst.empty()) return false;
  const auto in_flight = inflight_.enter();
  Peer& p = *c_.peers_[member];
  std::shared_ptr<Link> link;
  {
    std::lock_guard lk(p.mu);
    if (p.state != PeerState::up || !p.link) return false;
    link = p.link;
  }
  auto s = link->stripes.find(name_);
  if (s == link->stripes.end() || s->second.round_slots.size() != 2) return false;
  const uint64_t tag = cache::round_tag(key_, epoch, round);
  const auto start = std::chrono::steady_clock::now();
  // Not there yet: the member loads the round once every rank has read its
  // part of the round before the one it holds (rounds move together), so a
  // reader ahead waits for it, up to kRoundWait, then reads the backend for
  // the rest of that round.
  const bool may_wait = !gave_up(member, epoch, round);
  const int first = slot_hint == 1 ? 1 : 0;
  Status st;
  for (;;) {
    for (int slot : {first, 1 - first}) {
      const auto posted = std::chrono::steady_clock::now();
      auto g = link->data_ep->start_get_tagged(s->second.round_slots[slot] + offset, dst.size(), tag);
      // Each get its own bounded wait: the waits for a round to load (up to
      // kRoundWait, longer than get_timeout) must not read as a stuck peer.
      st = link->data_ep->finish_get(g, dst, std::chrono::steady_clock::now() + c_.options_.get_timeout);
      c_.gets_.finished(st, std::chrono::steady_clock::now() - posted);
      if (st.is_ok()) return true;
      if (st.err() != ESTALE) break;
    }
    if (st.err() != ESTALE || !may_wait) break;
    if (std::chrono::steady_clock::now() - start >= kRoundWait) {
      give_up(member, epoch, round);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (st.err() == ESTALE) {
    stale_.fetch_add(1, std::memory_order_relaxed);
  } else if (st.err() == ETIMEDOUT) {
    c_.data_path_stalled(p, link, st.message());
  } else if (c_.loud()) {
    spdlog::warn("cluster: a get of round {} of epoch {} of '{}' from rank {} failed ({}); reading it from the "
                 "backend", round, epoch, name_, member, st.message());
  }
  return false;
}

}  // namespace dlfs::transport
