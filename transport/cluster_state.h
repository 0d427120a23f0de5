// The Cluster's private state, shared by its files (cluster.cc: creation and
// the answers to hellos and pings; cluster_peer.cc: the peer state machine and
// heartbeats; cluster_remote.cc: gets; cluster_status.cc: status). Not for
// use outside transport/.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>
#include <thread>
#include <tuple>

#include "cache/storage_buffer.h"
#include "transport/cluster.h"
#include "transport/cluster_messages.h"

namespace dlfs::transport {

using ClusterClock = std::chrono::steady_clock;

// The resident extents of a buffer, as runs.
ExtentRuns residency_of(const cache::StorageBuffer& b);
// Whether one run holds every extent of [first, last].
bool covers(const ExtentRuns& r, uint64_t first, uint64_t last);
uint64_t extent_count(const ExtentRuns& r);

// One joined peer's stripe of one dataset.
struct RemoteStripe {
  uint64_t begin = 0, end = 0, extent_size = 1, extents = 0, base = 0;
  std::string packed_key;                    // empty: the peer holds nothing in memory
  std::unique_ptr<Endpoint::RemoteKey> key;  // packed_key unpacked on the data endpoint
  std::vector<uint64_t> round_slots;         // its two round slots' addresses, or none
};

// A connection attempt to a peer and what its welcome said. Replaced as a
// whole on reconnect; fetches hold it by shared_ptr while they get.
struct Cluster::Link {
  uint64_t session = 0;               // random: an answer names it
  std::string nonce;                  // this node's, in the hello
  std::unique_ptr<Endpoint> ep;       // through the peer's listener: join, heartbeats
  std::unique_ptr<Endpoint> data_ep;  // from the peer's worker address: gets (every transport)
  std::string worker_address;         // from the welcome
  bool proved = false;                // the proof went out (after the one challenge taken)
  Key key;                            // the session key, once proved
  bool welcomed = false;              // a welcome opened with it
  uint64_t pings = 0, last_pong = 0;  // counters: pings sent, the last pong taken
  std::map<std::string, RemoteStripe> stripes;  // set before the peer is up, then read-only
  ClusterClock::time_point started;
  bool failed() const { return ep->failed() || (data_ep && data_ep->failed()); }
};

enum class PeerState { self, connecting, up, down, refused };
const char* state_name(PeerState s);

struct Cluster::Peer {
  uint32_t rank = 0;
  PeerAddress address;
  mutable std::mutex mu;  // guards everything below
  PeerState state = PeerState::connecting;
  std::shared_ptr<Link> link;
  std::shared_ptr<Link> retired;  // dropped on the progress thread, closed on the heartbeat thread
  std::map<std::string, std::shared_ptr<const ExtentRuns>> resident;  // by dataset
  ClusterClock::time_point last_heard, next_attempt, since;
  std::string last_error;
  NodeBytes bytes;
  bool ever_up = false;
  bool watched = false;  // this node pings it whatever its residency (set at creation)
  // Times in a row its gets missed their deadline while it was up (reset by a
  // batch of gets that all arrived): each doubles the wait before rejoining.
  std::atomic<unsigned> stalls{0};

  // Whether an answer is to the current link (not an old connection's, nor a
  // guess: sessions are random). Under mu.
  bool answers(uint64_t session) const { return link && link->session == session; }
};

// Reads in flight through a remote path, so that its owner can wait for
// them once the path is removed (Remote and Rounds both).
class InFlight {
 public:
  struct Guard {
    std::atomic<int>& n;
    ~Guard() { n.fetch_sub(1); }
  };
  [[nodiscard]] Guard enter() {
    n_.fetch_add(1);
    return Guard{n_};
  }
  void drain() const {
    while (n_.load() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

 private:
  std::atomic<int> n_{0};
};

// The remote path of one dataset, installed in its Fetcher.
class Cluster::Remote : public cache::RemoteFetch {
 public:
  Remote(Cluster& c, std::string name) : c_(c), name_(std::move(name)) {}
  bool fetch(uint32_t owner, uint64_t offset, std::span<std::byte> dst) override;
  void fetch_many(uint32_t owner, std::span<Piece> pieces) override;
  // Waits for the fetches in flight (after the remote was removed from its fetcher).
  void drain() const { inflight_.drain(); }

 private:
  Cluster& c_;
  std::string name_;
  InFlight inflight_;
};

// One dataset's rounds over the job's memory: serves this node's round
// slots to peers under their round's tag while they hold it (SlotEvents),
// and reads the chunks other members hold from their slots by that tag.
class Cluster::Rounds : public cache::RoundRemote {
 public:
  Rounds(Cluster& c, const ServedDataset& d);
  ~Rounds() override;  // stops serving (the pipeline's events are cleared first)
  bool fetch_round(uint32_t member, uint64_t epoch, uint32_t round, int slot_hint, uint64_t offset,
                   std::span<std::byte> dst) override;
  void drain() const { inflight_.drain(); }
  std::vector<uint64_t> slot_addresses() const;
  uint64_t stale() const { return stale_.load(std::memory_order_relaxed); }  // refusals: not that round there
  const std::string& name() const { return name_; }
  // A peer's rounds (its pong): this node's rounds follow them.
  void follow(const cache::RoundSpan& held) { pipeline_.follow(held); }
  bool held(cache::RoundSpan& out) const { return pipeline_.held_rounds(out); }

 private:
  void ready(int slot, uint64_t epoch, uint32_t round, const std::byte* base, uint64_t bytes);  // under the pipeline's lock
  void retired(int slot);                                                                      // the same
  // Rounds a member did not have within kRoundWait: their other chunks go
  // to the backend at once (a member far behind must not cost every read a wait).
  bool gave_up(uint32_t member, uint64_t epoch, uint32_t round) const;
  void give_up(uint32_t member, uint64_t epoch, uint32_t round);
  // Long enough for a member to finish loading its part of the round and
  // for a slow rank to release the slot it needs (RoundPipeline::kReleaseIdle).
  static constexpr std::chrono::milliseconds kRoundWait{5000};
  static constexpr size_t kGaveUpKept = 64;

  Cluster& c_;
  std::string name_;
  cache::RoundPipeline& pipeline_;
  uint64_t key_;
  uint64_t served_[2] = {0, 0};  // handles of serve_tagged; 0: not served (under the pipeline's lock)
  InFlight inflight_;
  std::atomic<uint64_t> stale_{0};
  mutable std::mutex mu_;  // guards gave_up_
  std::deque<std::tuple<uint32_t, uint64_t, uint32_t>> gave_up_;  // (member, epoch, round), oldest first
};

}  // namespace dlfs::transport
