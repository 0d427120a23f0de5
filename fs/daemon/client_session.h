// ClientSession: one local client's connection (docs/client-protocol.md):
// who it is, the dataset it opened, its staging memory and its views.
// Requests in, replies out; the socket is ClientServer's
// (fs/daemon/client_server.h).
//
// A request never makes the daemon trust the client: every field is
// checked (type, range, the view id is one this connection made), a bad
// one is an error reply naming it, and 16 bad requests in a row close the
// connection.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/gather.h"
#include "cache/shared_memory.h"
#include "common/status.h"
#include "fs/views/epoch_view.h"

namespace dlfs::fs {

class Dataset;

// The peer, from SO_PEERCRED and SO_PEERGROUPS.
struct PeerCredentials {
  uint32_t uid = 0, gid = 0;
  pid_t pid = 0;
  std::vector<uint32_t> groups;
};

// What every session obeys.
struct ClientPolicy {
  bool others_allowed = true;  // false: only root and the daemon's user (the mount without allow_other)
  uint32_t daemon_uid = 0;
  uint32_t slots = 4;                       // staging slots per connection
  uint64_t min_slot_bytes = 8ull << 20;     // at least the largest sample
};

// Figures for stats (relaxed atomics), shared by every session.
struct ClientCounters {
  std::atomic<uint64_t> connections{0};      // accepted, ever
  std::atomic<uint64_t> open_connections{0};
  std::atomic<uint64_t> opens{0};            // datasets opened
  std::atomic<uint64_t> refused{0};          // opens refused: permission
  std::atomic<uint64_t> bad_requests{0};
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> memory_samples{0};   // located in the dataset memory (no copy)
  std::atomic<uint64_t> staged_samples{0};   // copied into staging
  std::atomic<uint64_t> staged_bytes{0};
};

// A reply packet: header, payload, descriptors to pass.
struct ClientReply {
  nlohmann::json header;
  std::string payload;
  std::vector<int> fds;  // owned by the session; valid until its next request
  bool close = false;    // close the connection after sending
};

// Finds a dataset by name, waiting while it scans; errors say why.
using DatasetLookup = std::function<Result<const Dataset*>(const std::string& name)>;

class ClientSession {
 public:
  static constexpr uint32_t kVersion = 1;
  static constexpr size_t kMaxRequest = 64 << 10;
  static constexpr size_t kMaxReply = 240 << 10;  // the protocol's bound is 256 KiB
  static constexpr uint64_t kMaxBatch = 4096;
  static constexpr size_t kMaxViews = 64;
  static constexpr int kMaxBadInARow = 16;

  ClientSession(PeerCredentials peer, ClientPolicy policy, DatasetLookup lookup, ClientCounters& counters);
  // Never throws; a request that is not JSON, or wrong, is an error reply.
  ClientReply handle(std::string_view request);
  // The reply to a request larger than kMaxRequest (counted as bad).
  ClientReply too_large();
  const PeerCredentials& peer() const { return peer_; }

 private:
  ClientReply open(const nlohmann::json& r);
  ClientReply view(const nlohmann::json& r);
  Result<std::shared_ptr<const ViewContext>> view_context(const nlohmann::json& r) const;
  ClientReply batch(const nlohmann::json& r);
  ClientReply bad(int err, const std::string& message);  // counts toward kMaxBadInARow
  // Why the peer may not read `ds`, or "" if it may.
  std::string refusal(const Dataset& ds) const;

  const PeerCredentials peer_;
  const ClientPolicy policy_;
  DatasetLookup lookup_;
  ClientCounters& counters_;
  const Dataset* ds_ = nullptr;
  std::unique_ptr<cache::SharedMemory> staging_;
  std::unique_ptr<cache::SharedMemory> empty_;  // region 0 when the dataset memory is not shared
  uint64_t slot_bytes_ = 0;
  std::vector<std::shared_ptr<const EpochView>> views_;  // view id = index + 1
  cache::Gather gather_;
  int bad_in_a_row_ = 0;
};

}  // namespace dlfs::fs
