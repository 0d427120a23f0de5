// Membership: who the job's daemons are, and which one this is.
//
// The list is the same on every node (from the config's peer list, or from
// Slurm's node list), and a node's rank is its index in it: placement is then
// a pure function of (list, dataset) everywhere. Pure C++: no sockets beyond
// reading this host's own addresses.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dlfs::transport {

struct PeerAddress {
  std::string host;
  uint16_t port = 0;
  std::string to_string() const;  // "host:port", "[v6]:port"
};

struct Membership {
  std::vector<PeerAddress> peers;  // index = rank; identical on every node
  uint32_t self = 0;               // this node's rank
  std::string source;              // "single", "peers" or "slurm": for logs and status
};

// "host:port", "[::1]:7710", or "host" (then default_port). Errors name the
// entry and what is wrong with it.
Result<PeerAddress> parse_peer(std::string_view text, uint16_t default_port);

// Slurm's hostlist expansion, as `scontrol show hostnames` does it:
// "node[01-03,07],gpu5" -> node01 node02 node03 node07 gpu5. Zero padding of
// a range's first bound is kept; several bracket groups in one name expand as
// a cartesian product, left to right; names are separated by ',', ' ' or tab
// outside brackets. Errors (unbalanced or empty brackets, a reversed or
// non-numeric range, no names, more than 65536 names) quote the list.
Result<std::vector<std::string>> expand_hostlist(std::string_view list);

struct MembershipInput {
  std::vector<std::string> peers;       // from the config or --peers
  std::optional<uint32_t> rank;         // --rank / [cluster] rank
  uint16_t default_port = 7710;
  std::function<const char*(const char*)> getenv = [](const char* n) { return std::getenv(n); };
  std::vector<std::string> local_addresses;  // this host's addresses and names
};

// Peers given: those, self = rank, or the one peer whose host is one of this
// host's addresses. Else Slurm (SLURM_JOB_NODELIST or SLURM_NODELIST, with
// SLURM_NODEID). Else a cluster of one.
Result<Membership> resolve_membership(const MembershipInput& in);

// This host's IP addresses (numeric) and its host name (full and short).
std::vector<std::string> local_addresses();

}  // namespace dlfs::transport
