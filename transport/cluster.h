// Cluster: this daemon's place among the job's daemons, and the remote half
// of the read path.
//
// Join. Every node connects to every other node's listener (a full mesh of
// client endpoints; the server sides only answer). The first message is a
// hello carrying a digest of the job token, the sender's rank and the
// fingerprints of its datasets. The receiver checks all three; a wrong token
// or dataset is refused (logged on both sides) and gets nothing. A good hello
// is answered with a welcome: for each dataset this node's stripe range, the
// address and packed remote key of its memory, and which extents are resident.
//
// Heartbeats. Each node pings every peer it joined every `heartbeat`; the
// pong carries the peer's residency and byte counters. A peer silent for
// `down_after`, whose endpoint broke, or whose gets miss their deadline
// (`get_timeout`) is marked down; reads of its stripe go to the backend. The
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
// Threads: the Fabric's progress thread runs the message handler; one
// heartbeat thread connects, pings and marks peers down; fetch() runs on FUSE
// and prefetch threads. Lock order: Peer::mu only (never held across a get
// or a send... except the small sends of the heartbeat thread, which do not
// block).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/fetcher.h"
#include "cache/storage_buffer.h"
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
  std::chrono::milliseconds down_after{3000};
  std::chrono::milliseconds get_timeout{2000};
  std::chrono::milliseconds reconnect{1000};
};

// A dataset this node serves, as the cluster sees it. The buffer and fetcher
// belong to the daemon's Dataset, which must outlive the Cluster.
struct ServedDataset {
  std::string name;
  uint64_t fingerprint = 0;
  const cache::StorageBuffer* buffer = nullptr;
  cache::Fetcher* fetcher = nullptr;
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
  Cluster() = default;

  // cluster.cc: every message in, and the answers to hellos and pings.
  void on_message(Message& m);
  void on_hello(const Hello& hello, Message& m);
  void on_ping(const Ping& ping, Message& m);
  std::string refusal(uint32_t rank, const std::string& token_digest) const;  // why a sender is refused, or ""
  void refuse(MessageKind kind, uint32_t rank, uint64_t session, const std::string& why, Message& m) const;
  void reply(const std::string& bytes, uint32_t rank, Message& m) const;
  std::map<std::string, ExtentRuns> local_residency() const;
  std::map<std::string, StripeOffer> stripe_offers() const;
  NodeBytes local_bytes() const;

  // cluster_peer.cc: the answers to this node's hellos and pings, and the
  // peer state machine the heartbeat thread drives.
  void on_welcome(const Welcome& welcome);
  void on_refused(const Refused& refused);
  void on_pong(const Pong& pong);
  Peer* answering_peer(uint32_t rank);
  void heard(Peer& p, const std::map<std::string, ExtentRuns>& resident, const NodeBytes& bytes);  // under p.mu
  void heartbeat_loop();
  bool every_stripe_resident() const;
  void tick(Peer& p, std::chrono::steady_clock::time_point now);
  void ping(Peer& p, const Link& link);
  void join(Peer& p, std::chrono::steady_clock::time_point now);
  void mark_down(Peer& p, const std::string& why);  // under p.mu
  void finish_join(Peer& p, const std::shared_ptr<Link>& link);

  // cluster_remote.cc: gets found the data path to a peer stuck.
  void data_path_stalled(Peer& p, const std::shared_ptr<Link>& link, const std::string& why);

  ClusterOptions options_;
  std::string token_digest_;
  std::vector<ServedDataset> datasets_;
  std::function<NodeBytes()> node_bytes_;
  std::unique_ptr<Fabric> fabric_;
  std::vector<std::unique_ptr<Registration>> registrations_;  // per dataset (null if no memory)
  std::vector<std::unique_ptr<Peer>> peers_;                  // by rank; self included (unused)
  std::vector<std::unique_ptr<Remote>> remotes_;              // per dataset, installed in its fetcher
  std::atomic<uint64_t> session_counter_{0};
  std::atomic<bool> all_resident_logged_{false};
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread heartbeat_;
};

}  // namespace dlfs::transport
