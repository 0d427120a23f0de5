// Cluster: this daemon's place among the job's daemons, and the remote half
// of the read path.
//
// Join. Every node connects to every other node's listener (a full mesh of
// client endpoints; the server sides only answer) and proves the job token
// by challenge-response (cluster_messages.h): hello with its nonce,
// challenge with the peer's fresh nonce, proof (a MAC keyed by the token over
// both nonces, both ranks and the session; its datasets' fingerprints sealed
// with the session key). The peer checks the proof, then the datasets; a wrong token or dataset is
// refused (logged on both sides) and gets nothing about the refusing node. A
// good proof is answered with a welcome sealed with the session key: for
// each dataset this node's stripe range, the address and packed remote key of
// its memory, and which extents are resident. A proof is good for one
// challenge only, so a recorded join replayed gets a refusal.
//
// Heartbeats. Each node watches a few peers (`watch`: the next ranks on a
// ring, r+1 .. r+watch mod N; every peer when watch is 0 or N-1 is smaller)
// and pings them every `heartbeat`; it also pings any peer whose stripes are
// not all resident yet (while it loads: residency comes with the pongs),
// and no other: an idle node's membership traffic does not grow with N. The
// pong carries the peer's residency and byte counters (and where its rounds
// are: rounds follow the newest a watched peer holds, which spreads around
// the ring). Both are sealed with
// the session key and carry a counter that only grows: a peer accepts pings
// only on the session it admitted, a node pongs only on its current link,
// and a replayed one is refused. A peer silent for
// `down_after`, whose endpoint broke, or whose gets miss their deadline
// (`get_timeout`) is marked down; reads of its stripe go to the backend. A
// watcher that finds a peer silent tells every other member (a down notice,
// sealed like a ping): they mark it down too and join it again (a peer that
// is alive is back within a join; a dead one stays down). A killed daemon's
// connections close, so every member sees that at its next tick. The
// node keeps reconnecting (on fresh endpoints; after stalled gets, backing
// off); when the peer is back (a restarted daemon has new memory and keys: a
// new welcome) and has reloaded extents, gets resume from it.
//
// Reads. fetch() (cache::RemoteFetch) gets bytes from the owner's memory
// only when the owner is up and every extent the bytes lie in is resident
// there; a get has a bounded wait (`get_timeout`), then the caller reads the
// backend. Never a wrong byte: resident extents never change while a daemon
// lives, and a restarted one is a new session with a new key.
//
// The messages and their codec are in cluster_messages.h; the fabric is an
// interface (fabric.h): UCX in daemons, an in-process fake in unit tests.
//
// Only the token's holders join, get keys or keep a peer up (docs/deploy.md,
// "The job token"); message bytes are not secret from the network except the
// sealed bodies, and dataset bytes travel in the clear.
//
// Threads: the Fabric's message thread (UCX fabric: the control channel's;
// the "progress thread" below) runs the message handler; one heartbeat
// thread connects, pings and marks peers down; fetch() runs on FUSE and
// prefetch threads. Locks: Peer::mu and serve_mu_, never both at once
// (log_mu_ is a leaf, taken under either); none is held across a get, and
// the only send under one is the proof, from the message thread (a send
// only queues the bytes).
#pragma once

#include <atomic>
#include <chrono>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/fetcher.h"
#include "cache/round_pipeline.h"
#include "cache/sample_reader.h"
#include "cache/storage_buffer.h"
#include "common/latency_histogram.h"
#include "common/status.h"
#include "transport/cluster_messages.h"
#include "transport/fabric.h"
#include "transport/membership.h"

namespace dlfs::transport {

struct ClusterOptions {
  Membership membership;
  std::string token;        // the job's shared secret; required with more than one node
  std::string listen_host;  // "" = every address
  std::chrono::milliseconds heartbeat{500};
  std::chrono::milliseconds down_after{2000};
  uint32_t watch = 3;  // peers each node pings (the next ranks on a ring); 0: every peer
  // A peer not up this long after start (or after it went down) is logged,
  // with why, and again every join_report_every.
  std::chrono::milliseconds join_report_after{10000};
  std::chrono::milliseconds join_report_every{30000};
  std::chrono::milliseconds get_timeout{2000};
  std::chrono::milliseconds reconnect{1000};
  GetMode gets = GetMode::automatic;  // FabricOptions::gets
};

// A dataset this node serves, as the cluster sees it. The buffer and fetcher
// belong to the daemon's Dataset, which must outlive the Cluster.
struct ServedDataset {
  std::string name;
  uint64_t fingerprint = 0;
  const cache::StorageBuffer* buffer = nullptr;
  cache::Fetcher* fetcher = nullptr;
  // Rounds over the job's memory (cache/round_remote.h), else null: this
  // node serves its round slots to peers by tagged gets, and its reader
  // gets the chunks other members hold from them. round_key names what the
  // members must agree on (plan::Planner::round_key).
  cache::RoundPipeline* rounds = nullptr;
  cache::SampleReader* reader = nullptr;
  uint64_t round_key = 0;
};

class Cluster {
 public:
  // Starts the listener and the heartbeat thread, registers each dataset's
  // memory and installs the remote path into its fetcher. Joins happen in
  // the background, over the fabric `make_fabric` makes (UCX unless a test
  // injects another). Errors name the address or the missing token.
  static Result<std::unique_ptr<Cluster>> create(ClusterOptions options, std::vector<ServedDataset> datasets,
                                                 std::function<NodeBytes()> node_bytes,
                                                 const FabricFactory& make_fabric = Fabric::create);
  ~Cluster();  // removes the remote path from the fetchers, waits for gets in flight, leaves
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  uint32_t self() const { return options_.membership.self; }
  uint32_t size() const { return static_cast<uint32_t>(options_.membership.peers.size()); }
  uint16_t port() const { return fabric_->port(); }
  // Members, their state, stripes, load progress and bytes (dlfs-ctl status).
  nlohmann::json status() const;

 private:
  struct Peer;
  struct Link;
  class Remote;
  class Rounds;
  Cluster() = default;

  // cluster.cc: every message in; this node as the responder of joins
  // (hello, proof) and heartbeats (ping).
  void on_message(Message& m);
  void on_hello(const Hello& hello, Message& m);
  void on_proof(const Proof& proof, Message& m);
  void on_ping(const Sealed& ping, Message& m);
  void on_down(const Sealed& notice, Message& m);
  std::optional<Key> admitted_key(const Sealed& s, const char* what, Message& m);
  bool take_counter(const Sealed& s);
  void on_version_mismatch(const VersionMismatch& v, Message& m);
  std::string requester_refusal(const Header& h) const;  // why a sender is refused, or ""
  void refuse(const char* what, const Header& h, const std::string& why, Message& m);
  void reply(const std::string& bytes, MessageKind kind, uint32_t rank, Message& m);
  bool loud();  // whether to log one more refusal or malformed message (at most 20 per 10 s)
  std::map<std::string, ExtentRuns> local_residency() const;
  std::map<std::string, StripeOffer> stripe_offers() const;
  NodeBytes local_bytes() const;
  std::map<std::string, cache::RoundSpan> local_rounds() const;  // the newest round of each dataset in rounds over the nodes

  // cluster_peer.cc: the answers to this node's joins and pings, and the
  // peer state machine the heartbeat thread drives.
  void on_challenge(const Challenge& challenge);
  void on_welcome(const Sealed& welcome);
  void on_refused(const Refused& refused);
  void on_pong(const Sealed& pong);
  // Under p.mu: takes a pong (its residency and counters); false if refused.
  bool took_pong(Peer& p, const Sealed& pong, std::map<std::string, cache::RoundSpan>& rounds);
  Peer* answering_peer(const Header& h);  // the peer an answer claims to come from, if it is one and for this node
  void heard(Peer& p, const std::map<std::string, ExtentRuns>& resident, const NodeBytes& bytes);  // under p.mu
  void heartbeat_loop();
  bool every_stripe_resident() const;
  void tick(Peer& p, std::chrono::steady_clock::time_point now);
  void ping(Peer& p, const std::shared_ptr<Link>& link);
  void join(Peer& p, std::chrono::steady_clock::time_point now);
  void mark_down(Peer& p, const std::string& why);  // under p.mu
  bool pinged(const Peer& p) const;                  // under p.mu: watched, or still loading
  void tell_down(uint32_t subject, const std::string& why);  // a down notice to every other member up
  void retell_down(Peer& q);  // to a member back up: the notices it may have missed
  void send_down(Peer& q, uint32_t subject, const std::string& why);
  void report_joins(std::chrono::steady_clock::time_point now);  // logs the peers not up past the bound
  void count_sent(const std::string& bytes, MessageKind kind);
  void count_received(const std::string& bytes, MessageKind kind);
  void finish_join(Peer& p, const std::shared_ptr<Link>& link);

  // cluster_remote.cc: gets found the data path to a peer stuck.
  void data_path_stalled(Peer& p, const std::shared_ptr<Link>& link, const std::string& why);

  // A join this node challenged, waiting for its proof (used once).
  struct Challenged {
    uint32_t rank = 0;
    uint64_t session = 0;
    std::string initiator_nonce, responder_nonce;
    std::chrono::steady_clock::time_point at;
  };
  // A peer whose proof this node accepted: the session its pings must be on.
  struct Admitted {
    uint64_t session = 0;
    Key key;
    uint64_t counter = 0;  // the last ping's
  };

  ClusterOptions options_;  // the token is wiped once the job key is derived
  Key job_key_;
  std::map<std::string, uint64_t> fingerprints_;  // of this node's datasets
  std::vector<ServedDataset> datasets_;
  std::function<NodeBytes()> node_bytes_;
  std::unique_ptr<Fabric> fabric_;
  std::vector<std::unique_ptr<Registration>> registrations_;  // per dataset (null if no memory)
  std::vector<std::unique_ptr<Peer>> peers_;                  // by rank; self included (unused)
  std::vector<std::unique_ptr<Remote>> remotes_;              // per dataset, installed in its fetcher
  std::vector<std::unique_ptr<Rounds>> rounds_;               // per dataset with rounds over the job's memory
  // The fabric delivers messages as soon as it exists, before create() has
  // registered memory and made the remotes, and until the destructor has
  // torn them down: messages are handled only while serving_ (a join that
  // comes too early is dropped; its sender retries). Held for each message.
  std::mutex handler_mu_;
  bool serving_ = false;  // under handler_mu_
  std::mutex serve_mu_;                   // guards challenged_ and admitted_
  std::deque<Challenged> challenged_;     // oldest first; at most kMaxChallenges
  std::map<uint32_t, Admitted> admitted_;  // by rank
  std::mutex log_mu_;
  std::chrono::steady_clock::time_point log_window_;
  unsigned logged_ = 0, unlogged_ = 0;
  std::atomic<bool> all_resident_logged_{false};
  // Membership messages (joins, heartbeats, notices, refusals) by kind, for
  // status: what an idle node spends on them.
  struct Traffic {
    std::atomic<uint64_t> messages[kMessageKinds + 1] = {};  // the last: undecodable
    std::atomic<uint64_t> bytes[kMessageKinds + 1] = {};
  };
  Traffic sent_, received_;
  // Gets from peers' memory (stripes and round slots): the latency of those
  // that succeeded, from posting to the bytes in place, and those that did
  // not, by why (status "gets"; docs/metrics.md).
  struct GetStats {
    LatencyHistogram latency;
    std::atomic<uint64_t> timeouts{0};  // missed get_timeout: the peer is then marked down
    std::atomic<uint64_t> stale{0};     // a round slot not holding that round (yet, or any more)
    std::atomic<uint64_t> errors{0};    // every other failure (peer gone, refused, endpoint failed)
    void finished(const Status& st, std::chrono::steady_clock::duration took) {
      if (st.is_ok()) latency.observe(took);
      else if (st.err() == ETIMEDOUT) timeouts.fetch_add(1, std::memory_order_relaxed);
      else if (st.err() == ESTALE) stale.fetch_add(1, std::memory_order_relaxed);
      else errors.fetch_add(1, std::memory_order_relaxed);
    }
  };
  GetStats gets_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point next_join_report_;
  // Peers this node found silent itself and that are not up again, with why
  // (heartbeat thread only).
  std::map<uint32_t, std::string> found_silent_;
  bool joins_reported_ = false;  // heartbeat thread only: a report went out and not every peer is up since
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread heartbeat_;
};

}  // namespace dlfs::transport
