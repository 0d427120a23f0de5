#include "fs/daemon/client_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/control_protocol.h"
#include "fs/daemon/unix_listener.h"

namespace dlfs::fs {
namespace {

PeerCredentials peer_of(int fd) {
  PeerCredentials p;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
    p.uid = cred.uid;
    p.gid = cred.gid;
    p.pid = cred.pid;
  } else {
    p.uid = p.gid = UINT32_MAX;  // nobody: refused below unless the dataset is open to all
  }
  std::vector<gid_t> groups(64);
  for (int tries = 0; tries < 3; ++tries) {
    len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      p.groups.assign(groups.begin(), groups.end());
      break;
    }
    if (errno != ERANGE) break;  // unknown groups count against the peer (Audience::may_read)
    groups.resize(len / sizeof(gid_t) + 1);
  }
  return p;
}

// One reply packet: u32 header length, header, payload; descriptors attached.
bool send_reply(int fd, const ClientReply& r) {
  const std::string header = json_text(r.header);
  const uint32_t len = static_cast<uint32_t>(header.size());
  std::string packet;
  packet.reserve(4 + header.size() + r.payload.size());
  packet.append(reinterpret_cast<const char*>(&len), 4);
  packet += header;
  packet += r.payload;
  iovec iov{packet.data(), packet.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control;
  if (!r.fds.empty()) {
    control.assign(CMSG_SPACE(sizeof(int) * r.fds.size()), 0);
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * r.fds.size());
    std::memcpy(CMSG_DATA(c), r.fds.data(), sizeof(int) * r.fds.size());
  }
  for (;;) {
    if (::sendmsg(fd, &msg, MSG_NOSIGNAL) >= 0) return true;
    if (errno != EINTR) return false;
  }
}

}  // namespace

Result<std::unique_ptr<ClientServer>> ClientServer::start(const std::string& path, ClientPolicy policy,
                                                          DatasetLookup lookup) {
  // As root a directory of its own, 0755, and a socket every user reaches
  // (each connection's credentials decide); otherwise only dlfsd's user.
  const bool open_to_others = ::geteuid() == 0 && policy.others_allowed;
  // The socket first: a server object that fails to start would unlink the path it was given.
  DLFS_ASSIGN_OR_RETURN(UniqueFd fd, listen_unix(path, {.type = SOCK_SEQPACKET,
                                                        .mode = static_cast<mode_t>(open_to_others ? 0666 : 0600),
                                                        .dir_mode = static_cast<mode_t>(open_to_others ? 0755 : 0700),
                                                        .backlog = 64,
                                                        .what = "client socket"}));
  std::unique_ptr<ClientServer> s(new ClientServer(path, policy, std::move(lookup)));
  s->listen_fd_ = std::move(fd);
  s->wake_fd_.reset(::eventfd(0, EFD_CLOEXEC));
  if (!s->wake_fd_.valid()) return Status::from_errno(errno, "eventfd");
  s->acceptor_ = std::thread([raw = s.get()] { raw->accept_loop(); });
  return s;
}

ClientServer::~ClientServer() {
  stopping_ = true;
  uint64_t one = 1;
  if (wake_fd_.valid()) (void)!::write(wake_fd_.get(), &one, sizeof one);  // never read: stays readable
  if (acceptor_.joinable()) acceptor_.join();
  while (active_.load() > 0) ::usleep(10000);  // each connection's thread sees the wake and ends
  ::unlink(path_.c_str());
}

void ClientServer::accept_loop() {
  accept_connections(
      listen_fd_.get(), wake_fd_.get(), stopping_, active_, kMaxConnections,
      [this](int fd) {
        counters_.connections.fetch_add(1, std::memory_order_relaxed);
        ClientReply busy;
        busy.header = {{"ok", false}, {"code", "EBUSY"},
                       {"error", "dlfsd serves " + std::to_string(kMaxConnections) + " client connections already"}};
        (void)send_reply(fd, busy);
      },
      [this](int fd) {
        counters_.connections.fetch_add(1, std::memory_order_relaxed);
        serve(fd);
      });
}

void ClientServer::serve(int fd) {
  counters_.open_connections.fetch_add(1, std::memory_order_relaxed);
  // Replies up to ClientSession::kMaxReply: a packet must fit the send buffer.
  int sndbuf = 1 << 20;
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  ClientSession session(peer_of(fd), policy_, lookup_, counters_);
  std::vector<char> buf(ClientSession::kMaxRequest + 1);
  while (!stopping_) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents) break;
    if (fds[0].revents & (POLLERR | POLLNVAL)) break;
    // MSG_TRUNC: the packet's real length, to refuse one too large. A
    // client's descriptors (SCM_RIGHTS) are not wanted: with no control
    // buffer the kernel closes them.
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_TRUNC);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      break;
    }
    if (n == 0) break;  // the client closed (or died)
    ClientReply reply = static_cast<size_t>(n) > ClientSession::kMaxRequest
                            ? session.too_large()
                            : session.handle(std::string_view(buf.data(), static_cast<size_t>(n)));
    if (!send_reply(fd, reply)) {
      spdlog::debug("client socket: reply to pid {} failed: {}", session.peer().pid, std::strerror(errno));
      break;
    }
    if (reply.close) {
      spdlog::warn("client socket: closed the connection of pid {} (uid {}): {}", session.peer().pid,
                   session.peer().uid, reply.header.value("error", ""));
      break;
    }
  }
  counters_.open_connections.fetch_sub(1, std::memory_order_relaxed);
}

nlohmann::json ClientServer::stats() const {
  auto v = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  return {{"socket", path_},
          {"connections", v(counters_.connections)},
          {"open_connections", v(counters_.open_connections)},
          {"opens", v(counters_.opens)},
          {"refused", v(counters_.refused)},
          {"bad_requests", v(counters_.bad_requests)},
          {"batches", v(counters_.batches)},
          {"memory_samples", v(counters_.memory_samples)},
          {"staged_samples", v(counters_.staged_samples)},
          {"staged_bytes", v(counters_.staged_bytes)}};
}

}  // namespace dlfs::fs
