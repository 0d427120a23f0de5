#include "client/packet.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>

namespace dlfs::client {
namespace {

std::string errno_text(int e) { return std::strerror(e); }

}  // namespace

UniqueFd connect_socket(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path)
    fail(EINVAL, "client socket path '" + path + "' is empty or longer than " +
                     std::to_string(sizeof addr.sun_path - 1) + " bytes");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd) fail(errno, "cannot make a SOCK_SEQPACKET socket: " + errno_text(errno));
  while (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    if (e == EINTR) continue;
    if (e == ENOENT || e == ECONNREFUSED)
      lost(e, "no dlfsd client socket at " + path + " (" + errno_text(e) + "): is dlfsd running?");
    fail(e, "cannot connect to dlfsd's client socket " + path + ": " + errno_text(e));
  }
  return fd;
}

void send_request(int fd, const nlohmann::json& request) {
  std::string text = request.dump();
  if (text.size() > kMaxRequestBytes)
    fail(EINVAL, "a request of " + std::to_string(text.size()) + " bytes is over the protocol's 64 KiB");
  for (;;) {
    // SEQPACKET: the packet goes whole or not at all. MSG_NOSIGNAL: a daemon
    // that went away is an error here, not a SIGPIPE that kills the trainer.
    if (::send(fd, text.data(), text.size(), MSG_NOSIGNAL) >= 0) return;
    int e = errno;
    if (e == EINTR) continue;
    if (e == EPIPE || e == ECONNRESET || e == ENOTCONN)
      lost(e, "dlfsd's client socket closed (" + errno_text(e) + ")");
    fail(e, "cannot send a request to dlfsd: " + errno_text(e));
  }
}

int errno_of_code(const std::string& code) {
  static const std::pair<const char*, int> kCodes[] = {
      {"EACCES", EACCES}, {"EINVAL", EINVAL}, {"ENOENT", ENOENT}, {"EPROTO", EPROTO},
      {"EBUSY", EBUSY},   {"EIO", EIO},       {"EPERM", EPERM},   {"ENOMEM", ENOMEM},
  };
  for (const auto& [name, value] : kCodes)
    if (code == name) return value;
  return EIO;
}

Reply receive_reply(int fd, std::vector<uint8_t>& buffer, const char* op) {
  buffer.resize(kMaxReplyBytes);
  // Room for more descriptors than any reply carries, so that a reply with
  // too many is seen (and its descriptors closed) rather than truncated.
  alignas(cmsghdr) char control[CMSG_SPACE(8 * sizeof(int))];
  Reply reply;
  ssize_t n;
  int flags;
  for (;;) {
    iovec iov{buffer.data(), buffer.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      int e = errno;
      if (e == EINTR) continue;
      if (e == ECONNRESET || e == ENOTCONN) lost(e, std::string("dlfsd's client socket closed awaiting the ") + op + " reply");
      fail(e, std::string("cannot receive dlfsd's ") + op + " reply: " + errno_text(e));
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int d;
        std::memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof d);
        reply.fds.emplace_back(d);
      }
    }
    flags = msg.msg_flags;
    break;
  }
  if (n == 0) lost(ECONNRESET, std::string("dlfsd closed the client socket (EOF awaiting the ") + op + " reply)");
  if (flags & MSG_TRUNC) fail(EPROTO, std::string("dlfsd's ") + op + " reply is longer than the protocol's 256 KiB");
  if (flags & MSG_CTRUNC) fail(EPROTO, std::string("dlfsd's ") + op + " reply came with too many descriptors");
  size_t size = static_cast<size_t>(n);
  if (size < 4) fail(EPROTO, std::string("dlfsd's ") + op + " reply of " + std::to_string(size) + " bytes has no header length");
  size_t header_bytes = le32(buffer.data());
  if (header_bytes > size - 4)
    fail(EPROTO, std::string("dlfsd's ") + op + " reply says its header has " + std::to_string(header_bytes) +
                     " bytes, the packet has " + std::to_string(size - 4) + " after the length");
  const auto* begin = buffer.data() + 4;
  reply.header = nlohmann::json::parse(begin, begin + header_bytes, nullptr, /*allow_exceptions=*/false);
  if (reply.header.is_discarded() || !reply.header.is_object())
    fail(EPROTO, std::string("dlfsd's ") + op + " reply header is not a JSON object");
  reply.payload = std::span<const uint8_t>(begin + header_bytes, size - 4 - header_bytes);
  const auto ok = reply.header.find("ok");
  if (ok == reply.header.end() || !ok->is_boolean())
    fail(EPROTO, std::string("dlfsd's ") + op + " reply header has no boolean \"ok\"");
  if (!ok->get<bool>()) {
    const auto code = reply.header.find("code");
    const auto error = reply.header.find("error");
    std::string code_text = code != reply.header.end() && code->is_string() ? code->get<std::string>() : "EIO";
    std::string message = error != reply.header.end() && error->is_string()
                              ? error->get<std::string>()
                              : std::string("dlfsd refused the ") + op + " request (" + code_text + ") without a message";
    fail(errno_of_code(code_text), message);
  }
  return reply;
}

}  // namespace dlfs::client
