#include "transport/control_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

namespace dlfs::transport {
namespace {

constexpr char kGreeting[] = "DLFSCTL1";
constexpr size_t kGreetingBytes = sizeof kGreeting - 1;
constexpr size_t kFrameHeader = 5;                    // length (4, little-endian), flags (1)
constexpr size_t kMaxQueuedOut = size_t{64} << 20;    // a peer that stops reading: its connection fails
constexpr uint8_t kWantReply = 1;

std::string errno_text(int e) { return std::strerror(e); }

std::string frame(const std::string& payload, uint8_t flags) {
  std::string f(kFrameHeader, '\0');
  const auto n = static_cast<uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) f[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  f[4] = static_cast<char>(flags);
  f += payload;
  return f;
}

// The payload length a frame header at `at` of `in` announces (little-endian).
uint32_t frame_length(const std::string& in, size_t at) {
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(static_cast<uint8_t>(in[at + i])) << (8 * i);
  return n;
}

std::string address_text(const sockaddr* sa, socklen_t len) {
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (::getnameinfo(sa, len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0) return "?";
  return std::string(host) + ":" + serv;
}

Result<addrinfo*> resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string p = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), p.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) return Status(EHOSTUNREACH, "address '" + host + "': " + gai_strerror(rc));
  return res;
}

void no_delay(int fd) {
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

struct ControlChannel::Conn {
  int fd = -1;
  std::string peer;
  bool client = false;
  bool connecting = false;  // a non-blocking connect under way
  bool greeted = false;     // the other side's greeting arrived
  // Bytes read, not yet a whole frame. Its capacity is what the budget
  // counts (kMaxBufferedBytes): it grows as bytes arrive, at most to twice
  // what arrived and never beyond the frame announced (take()).
  std::string in;
  std::chrono::steady_clock::time_point unfinished_since;  // when `in` last became non-empty
  std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_frame = since;  // the last whole frame it delivered
  std::function<void(const std::string& why)> on_failure;
  std::atomic<bool> failed{false};
  std::atomic<bool> dropped{false};  // its endpoint is gone: close
  std::mutex out_mu;
  std::string out;  // bytes to write (the greeting first)

  // Appends bytes read to `in`, growing it by doubling but never past the
  // end of the frame being read, once its header says how long it is.
  void take(const char* bytes, size_t n) {
    const size_t need = in.size() + n;
    if (need > in.capacity()) {
      size_t frame_end = need;  // unknown length: no more than needed
      const size_t head = greeted ? 0 : kGreetingBytes;
      if (in.size() >= head + kFrameHeader) {
        frame_end = head + kFrameHeader + frame_length(in, head);
      }
      in.reserve(std::max(need, std::min(2 * in.capacity(), frame_end)));
    }
    in.append(bytes, n);
  }

  // Queues a frame; false if the connection is broken or too far behind.
  bool queue(const std::string& payload, uint8_t flags) {
    if (failed.load()) return false;
    std::lock_guard lk(out_mu);
    if (out.size() + payload.size() > kMaxQueuedOut) return false;
    out += frame(payload, flags);
    return true;
  }
};

namespace {

class ControlEndpoint final : public Endpoint {
 public:
  ControlEndpoint(std::shared_ptr<ControlChannel::Conn> c, std::function<void()> wake)
      : c_(std::move(c)), wake_(std::move(wake)) {}
  ~ControlEndpoint() override {
    c_->dropped.store(true);
    wake_();
  }
  Status send(const std::string& bytes, bool want_reply) override {
    if (bytes.size() > ControlChannel::kMaxFrameBytes)
      return Status(EMSGSIZE, "message of " + std::to_string(bytes.size()) + " bytes to " + c_->peer + ": too large");
    if (!c_->queue(bytes, want_reply ? kWantReply : 0))
      return Status(ECONNRESET, "connection to " + c_->peer + " is broken");
    wake_();
    return Status::ok();
  }
  bool failed() const override { return c_->failed.load(); }
  const std::string& peer() const override { return c_->peer; }
  std::string describe() const override { return "TCP control connection to " + c_->peer; }
  Result<std::unique_ptr<RemoteKey>> unpack(const std::string&) override { return not_data(); }
  PendingGet start_get(const RemoteKey&, uint64_t, size_t size) override { return PendingGet(not_data(), size); }
  Status finish_get(PendingGet& g, std::span<std::byte>, std::chrono::steady_clock::time_point) override {
    return g.posted() ? not_data() : g.posted();
  }

 private:
  Status not_data() const {
    return Status(ENOTSUP, "the control connection to " + c_->peer +
                               " carries messages only: gets go over an endpoint made from a worker address");
  }
  std::shared_ptr<ControlChannel::Conn> c_;
  std::function<void()> wake_;
};

}  // namespace

Result<std::unique_ptr<ControlChannel>> ControlChannel::create(const FabricOptions& options, Fabric::Handler handler) {
  std::unique_ptr<ControlChannel> ch(new ControlChannel());
  ch->handler_ = std::move(handler);
  ch->wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (ch->wake_fd_ < 0) return Status(errno, "control channel: eventfd: " + errno_text(errno));
  ch->max_accepted_ = options.max_accepted;
  if (options.listen) {
    const std::string where =
        (options.listen_host.empty() ? "*" : options.listen_host) + ":" + std::to_string(options.port);
    auto res = resolve(options.listen_host, options.port, true);
    if (!res) return res.status().with_context("listener on " + where);
    // With no host, the IPv6 wildcard first (it takes IPv4 too), then the others.
    std::vector<addrinfo*> candidates;
    for (addrinfo* a = *res; a; a = a->ai_next) candidates.push_back(a);
    std::stable_partition(candidates.begin(), candidates.end(), [](addrinfo* a) { return a->ai_family == AF_INET6; });
    int fd = -1, err = 0;
    for (addrinfo* a : candidates) {
      fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) {
        err = errno;
        continue;
      }
      int one = 1, zero = 0;
      (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // a restarted daemon gets its port back
      if (a->ai_family == AF_INET6) (void)::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
        err = 0;
        break;
      }
      err = errno;
      ::close(fd);
      fd = -1;
      if (err == EADDRINUSE) break;  // the port is taken: say so
    }
    ::freeaddrinfo(*res);
    if (fd < 0) return Status(err ? err : EADDRNOTAVAIL, "listener on " + where + ": " + errno_text(err));
    ch->listen_fd_ = fd;
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
      ch->port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                                 : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  }
  ch->thread_ = std::thread([p = ch.get()] { p->loop(); });
  return ch;
}

ControlChannel::~ControlChannel() {
  stop_.store(true);
  wake();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lk(mu_);
  for (auto& c : conns_)
    if (c->fd >= 0) ::close(c->fd);
  conns_.clear();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void ControlChannel::wake() const {
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof one);
}

void ControlChannel::add(std::shared_ptr<Conn> c) {
  {
    std::lock_guard lk(mu_);
    conns_.push_back(std::move(c));
  }
  wake();
}

Result<std::unique_ptr<Endpoint>> ControlChannel::connect(const std::string& host, uint16_t port,
                                                          std::function<void(const std::string& why)> on_failure) {
  const std::string peer = host + ":" + std::to_string(port);
  auto res = resolve(host, port, false);
  if (!res) return res.status().with_context("peer " + peer);
  auto c = std::make_shared<Conn>();
  c->peer = peer;
  c->client = true;
  c->on_failure = std::move(on_failure);
  c->out.assign(kGreeting, kGreetingBytes);
  const addrinfo* a = *res;
  c->fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int err = c->fd < 0 ? errno : 0;
  if (c->fd >= 0) {
    no_delay(c->fd);
    if (::connect(c->fd, a->ai_addr, a->ai_addrlen) != 0) {
      if (errno == EINPROGRESS) c->connecting = true;
      else err = errno;
    }
  }
  ::freeaddrinfo(*res);
  if (err != 0) {
    // Refused at once (loopback): an endpoint that is failed, as a connection
    // that breaks later would be.
    if (c->fd >= 0) ::close(c->fd);
    c->fd = -1;
    c->failed.store(true);
    spdlog::debug("control: connect to {}: {}", peer, errno_text(err));
  }
  auto ep = std::make_unique<ControlEndpoint>(c, [this] { wake(); });
  if (c->fd >= 0) add(std::move(c));
  return std::unique_ptr<Endpoint>(std::move(ep));
}

void ControlChannel::fail(Conn& c, const std::string& why) {
  if (c.fd >= 0) ::close(c.fd);
  c.fd = -1;
  if (c.failed.exchange(true)) return;
  spdlog::debug("control: connection {} {}: {}", c.client ? "to" : "from", c.peer, why);
  if (c.client && c.on_failure) c.on_failure(why);
}

void ControlChannel::accept_all() {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        spdlog::warn("control: accepting on port {}: {}", port_, errno_text(errno));  // e.g. out of descriptors
      return;
    }
    no_delay(fd);
    auto c = std::make_shared<Conn>();
    c->fd = fd;
    c->peer = address_text(reinterpret_cast<sockaddr*>(&ss), len);
    c->out.assign(kGreeting, kGreetingBytes);
    std::lock_guard lk(mu_);
    size_t accepted = 0;
    for (const auto& x : conns_) accepted += !x->client && x->fd >= 0;
    if (accepted >= max_accepted_) {
      // Make room: the accepted connection silent for longest goes (a
      // member's connection stays open while idle: Cluster sizes the cap to
      // hold one per member and their rejoins).
      std::shared_ptr<Conn> victim;
      for (const auto& x : conns_)
        if (!x->client && x->fd >= 0 && (!victim || x->last_frame < victim->last_frame)) victim = x;
      if (victim) fail(*victim, "too many connections: the one silent for longest is closed");
    }
    conns_.push_back(std::move(c));
  }
}

void ControlChannel::deliver(const std::shared_ptr<Conn>& c) {
  for (;;) {
    if (c->fd < 0) return;
    if (!c->greeted) {
      if (c->in.size() < kGreetingBytes) return;
      if (c->in.compare(0, kGreetingBytes, kGreeting, kGreetingBytes) != 0)
        return fail(*c, "not a DLFS control connection (wrong greeting)");
      c->greeted = true;
      c->in.erase(0, kGreetingBytes);
      c->unfinished_since = std::chrono::steady_clock::now();  // what follows starts the first frame
      continue;
    }
    if (c->in.size() < kFrameHeader) return;
    const uint32_t n = frame_length(c->in, 0);
    if (n > kMaxFrameBytes)
      return fail(*c, "a frame of " + std::to_string(n) + " bytes (the maximum is " + std::to_string(kMaxFrameBytes) +
                          ")");
    if (c->in.size() < kFrameHeader + n) return;
    const uint8_t flags = static_cast<uint8_t>(c->in[4]);
    Message m;
    m.bytes = c->in.substr(kFrameHeader, n);
    c->in.erase(0, kFrameHeader + n);
    c->last_frame = std::chrono::steady_clock::now();
    c->unfinished_since = c->last_frame;  // the next frame's bytes, if any, start its clock
    m.from = c->peer;
    if (flags & kWantReply) {
      std::weak_ptr<Conn> weak = c;
      m.reply = [weak, this](const std::string& bytes) -> Status {
        auto conn = weak.lock();
        if (!conn || bytes.size() > kMaxFrameBytes || !conn->queue(bytes, 0))
          return Status(ECONNRESET, "reply: connection broken");
        wake();
        return Status::ok();
      };
    }
    try {
      handler_(m);
    } catch (const std::exception& e) {
      spdlog::error("control: message handler failed: {}", e.what());
    }
  }
}

std::string ControlChannel::serve(Conn& c, short revents, size_t& room) {
  if (c.connecting) {
    if (!(revents & (POLLOUT | POLLERR | POLLHUP))) return {};
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) return "connect: " + errno_text(err);
    c.connecting = false;
  }
  std::string why;
  if (revents & (POLLIN | POLLHUP | POLLERR)) {
    // At most one greeting and one largest frame buffered: deliver() consumes
    // them, the rest waits in the kernel for the next round (or until the
    // budget across connections has room again).
    const size_t limit = kGreetingBytes + kFrameHeader + kMaxFrameBytes;
    char buf[65536];
    while (c.in.size() < limit && room > 0) {
      ssize_t r = ::recv(c.fd, buf, std::min({sizeof buf, limit - c.in.size(), room}), 0);
      if (r > 0) {
        if (c.in.empty()) c.unfinished_since = std::chrono::steady_clock::now();
        c.take(buf, static_cast<size_t>(r));
        room -= static_cast<size_t>(r);
        continue;
      }
      if (r == 0) why = "closed by the other side";
      else if (errno == EINTR) continue;
      else if (errno != EAGAIN && errno != EWOULDBLOCK) why = "read: " + errno_text(errno);
      break;
    }
  }
  if (why.empty() && (revents & POLLOUT)) {
    std::lock_guard lk(c.out_mu);
    while (!c.out.empty()) {
      ssize_t w = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (w > 0) {
        c.out.erase(0, static_cast<size_t>(w));
      } else if (w < 0 && errno == EINTR) {
        continue;
      } else {
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) why = "write: " + errno_text(errno);
        break;
      }
    }
  }
  return why;
}

void ControlChannel::expire_unfinished(std::chrono::steady_clock::time_point now) {
  for (auto& c : conns_) {
    if (c->fd < 0) continue;
    if (!c->client && !c->greeted && now - c->since > kGreetTimeout)
      fail(*c, "no greeting within " + std::to_string(kGreetTimeout.count()) + " s");
    else if (c->greeted && !c->in.empty() && now - c->unfinished_since > kFrameTimeout)
      fail(*c, "a frame unfinished after " + std::to_string(kFrameTimeout.count()) + " s (" +
                   std::to_string(c->in.size()) + " bytes of it arrived)");
  }
}

size_t ControlChannel::close_largest_holder() {
  std::lock_guard lk(mu_);
  std::shared_ptr<Conn> largest;
  for (const auto& c : conns_)
    if (c->fd >= 0 && (!largest || c->in.capacity() > largest->in.capacity())) largest = c;
  if (!largest || largest->in.empty()) return 0;
  const size_t freed = largest->in.capacity();
  fail(*largest, "holds " + std::to_string(freed) + " bytes of unfinished frames when all connections together may hold " +
                     std::to_string(kMaxBufferedBytes) + ": the largest holder is closed");
  std::string().swap(largest->in);
  return freed;
}

void ControlChannel::loop() {
  std::vector<pollfd> fds;
  std::vector<std::shared_ptr<Conn>> polled;
  while (!stop_.load()) {
    fds.clear();
    polled.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    if (listen_fd_ >= 0) fds.push_back({listen_fd_, POLLIN, 0});
    const size_t first = fds.size();
    size_t buffered = 0;  // unfinished frames, all connections
    {
      std::lock_guard lk(mu_);
      for (auto& c : conns_) {
        if (c->dropped.load() && c->fd >= 0) {
          ::close(c->fd);
          c->fd = -1;
          c->failed.store(true);
        }
      }
      expire_unfinished(std::chrono::steady_clock::now());
      std::erase_if(conns_, [](const auto& c) { return c->fd < 0; });
      for (auto& c : conns_) {
        buffered += c->in.capacity();
        short events = POLLIN;
        if (c->connecting) {
          events = POLLOUT;
        } else {
          std::lock_guard olk(c->out_mu);
          if (!c->out.empty()) events |= POLLOUT;
        }
        fds.push_back({c->fd, events, 0});
        polled.push_back(c);
      }
    }
    int n = ::poll(fds.data(), fds.size(), 1000);
    if (n < 0) {
      if (errno != EINTR) {
        spdlog::warn("control: poll: {}", errno_text(errno));
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      continue;
    }
    if (fds[0].revents) {
      uint64_t v;
      while (::read(wake_fd_, &v, sizeof v) > 0) {
      }
    }
    if (listen_fd_ >= 0 && (fds[1].revents & POLLIN)) accept_all();
    for (size_t i = 0; i < polled.size(); ++i) {
      Conn& c = *polled[i];
      const short revents = fds[first + i].revents;
      if (revents == 0 || c.fd < 0) continue;
      const size_t before = c.in.capacity();
      size_t room = kMaxBufferedBytes - std::min(buffered, kMaxBufferedBytes);
      const std::string why = serve(c, revents, room);
      deliver(polled[i]);  // what arrived before a close still counts
      if (c.in.empty() && c.in.capacity() > (size_t{64} << 10)) std::string().swap(c.in);  // a large frame's memory
      buffered = buffered - before + c.in.capacity();
      if (!why.empty() && c.fd >= 0) fail(c, why);
      if (buffered >= kMaxBufferedBytes) buffered -= close_largest_holder();
    }
  }
}

}  // namespace dlfs::transport
