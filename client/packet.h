// The protocol's packets over a Unix SOCK_SEQPACKET socket
// (docs/client-protocol.md, "Packets"): a request is one JSON object; a reply
// is a 4-byte little-endian header length, the JSON header, then a binary
// payload, with descriptors by SCM_RIGHTS on the open reply.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/failure.h"

namespace dlfs::client {

inline constexpr size_t kMaxRequestBytes = 64 * 1024;
inline constexpr size_t kMaxReplyBytes = 256 * 1024;

// A connected SOCK_SEQPACKET socket to `path`. No socket there, or nobody
// listening, is `lost` (the daemon may be restarting); a path too long for
// sockaddr_un is not.
UniqueFd connect_socket(const std::string& path);

// Sends one request. A closed peer is `lost`.
void send_request(int fd, const nlohmann::json& request);

struct Reply {
  nlohmann::json header;          // an object whose "ok" is true
  std::span<const uint8_t> payload;  // into the receive buffer: valid until the next receive
  std::vector<UniqueFd> fds;      // the descriptors that came with it
};

// Receives one reply into `buffer` (resized to the protocol's maximum).
// EOF is `lost`; a reply that is not the protocol's is EPROTO, naming what is
// wrong; an "ok": false reply is thrown with its errno and dlfsd's message.
// `op` names the request in messages.
Reply receive_reply(int fd, std::vector<uint8_t>& buffer, const char* op);

// The errno for a protocol error code ("EACCES" -> EACCES); EIO if unknown.
int errno_of_code(const std::string& code);

// Little-endian integers from a payload.
inline uint64_t le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint32_t le32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
inline uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }

}  // namespace dlfs::client
