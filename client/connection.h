// One connection to dlfsd's client socket: the open handshake and its
// mapped regions, view ids, and single batch requests checked against the
// regions (docs/client-protocol.md). The reconnects and the slot rotation are
// dlfs_client.cc's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "client/dlfs_client.h"
#include "client/failure.h"
#include "client/packet.h"

namespace dlfs::client {

// A read-only shared mapping of a whole region, unmapped when destroyed.
class Mapping {
 public:
  Mapping() = default;
  // Maps `bytes` of `fd` (nothing for 0 bytes). `what` names the region in
  // messages. Refuses a descriptor smaller than `bytes` (touching the mapping
  // past its end would be SIGBUS, not an error).
  static Mapping map(int fd, uint64_t bytes, const std::string& what);
  ~Mapping() { reset(); }
  Mapping(Mapping&& o) noexcept;
  Mapping& operator=(Mapping&& o) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  const uint8_t* data() const { return static_cast<const uint8_t*>(addr_); }
  uint64_t bytes() const { return bytes_; }
  void reset();

 private:
  void* addr_ = nullptr;
  uint64_t bytes_ = 0;
};

struct DatasetInfo {
  std::string name;
  std::string format;
  uint64_t samples = 0;
  bool grouped = false;
  uint64_t fixed_size = 0;
  uint32_t slots = 0;
  uint64_t slot_bytes = 0;
};

// A sample of a batch reply, located in this connection's mappings.
struct Located {
  const uint8_t* data;
  uint64_t length;
  uint64_t sample;
  uint32_t members;
  size_t member_index;  // its first member in the caller's vector
};

struct BatchResult {
  uint32_t count = 0;   // located (appended)
  bool staged = false;  // some sample was copied into the slot
};

inline constexpr uint32_t kMaxViewsPerConnection = 64;
inline constexpr uint32_t kMaxBatchCount = 4096;

class Connection {
 public:
  // Connects to `socket_path`, opens `dataset`, maps the regions.
  Connection(const std::string& socket_path, const std::string& dataset);

  const DatasetInfo& info() const { return info_; }

  struct View {
    uint32_t id;
    uint64_t samples;
  };
  // The view's id here: remembered, or asked of the daemon.
  View view(uint32_t epoch, uint32_t world_size, uint32_t rank);
  // Whether asking for this view would go over the daemon's 64 per connection.
  bool views_full(uint32_t epoch, uint32_t world_size, uint32_t rank) const;

  // One batch request for [start, start + count) (count <= 4096) into `slot`:
  // appends the samples to `out` and their members to `member_spans`.
  BatchResult batch(uint32_t view, uint64_t start, uint32_t count, uint32_t slot, std::vector<Located>& out,
                    std::vector<dlfs_member>& member_spans);

  // After the daemon went away: no more requests, the mappings stay.
  void close_socket() { fd_.reset(); }
  // Unmaps the staging memory (when no sample there can still be in use).
  void release_staging() { region1_.reset(); }

 private:
  void parse_open(const Reply& reply, const std::string& dataset);

  UniqueFd fd_;
  DatasetInfo info_;
  Mapping region0_;
  Mapping region1_;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, View> views_;
  std::vector<uint8_t> buffer_;
};

}  // namespace dlfs::client
