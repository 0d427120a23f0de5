#include "fake_fabric.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace dlfs::transport::test {

class FakeFabric;

namespace {

// Runs tasks in order on one thread: a node's "progress thread".
class TaskThread {
 public:
  TaskThread() : thread_([this] { run(); }) {}
  ~TaskThread() { stop(); }
  void post(std::function<void()> task) {
    std::lock_guard lk(mu_);
    tasks_.push_back(std::move(task));
    cv_.notify_one();
  }
  void stop() {  // drops the tasks not yet run
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return stop_ || !tasks_.empty(); });
        if (stop_) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the rest exists
};

// One get in flight: filled on the owner's thread, copied out by finish_get.
struct FakeGetOp : Endpoint::PendingGet::Op {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  std::vector<std::byte> buffer;
  void complete(Status s) {
    {
      std::lock_guard lk(mu);
      done = true;
      status = std::move(s);
    }
    cv.notify_all();
  }
};

struct Region {
  uint16_t port = 0;
  uint64_t incarnation = 0;
  const std::byte* base = nullptr;
  size_t length = 0;
};

// A range served for tagged gets (Fabric::serve_tagged).
struct TaggedRange {
  uint16_t port = 0;
  const std::byte* base = nullptr;
  size_t length = 0;
  uint64_t tag = 0;
  mutable uint64_t bytes_read = 0;  // by gets (Fabric::served_bytes)
};

struct HeldGet {
  uint64_t key = 0, address = 0;
  std::shared_ptr<FakeGetOp> op;
  uint64_t tag = 0;  // a tagged get's (then no key)
};

std::string node_name(uint16_t port) { return "node:" + std::to_string(port); }

}  // namespace

// One side of a connection as it was when the connection was made: it is
// broken once that incarnation is gone or the node was cut off since.
struct End {
  uint16_t port = 0;
  uint64_t incarnation = 0;  // 0: nobody was there
  uint64_t cuts = 0;
};

struct FakeNetwork::State {
  mutable std::mutex mu;  // guards everything below; never held while a handler runs
  std::map<uint16_t, FakeFabric*> live;
  std::map<uint16_t, uint64_t> cuts;  // drops so far, by port
  std::set<uint16_t> dropped, muted, stalled;
  std::map<uint16_t, std::vector<HeldGet>> held;
  std::map<uint64_t, Region> regions;  // by key id
  std::map<uint64_t, TaggedRange> tagged;  // by handle (from next_id: never reused)
  std::map<uint16_t, uint64_t> served;
  std::set<uint16_t> recording;
  std::vector<FakeNetwork::Sent> sent;
  uint64_t next_id = 1;

  void note(uint16_t from, uint16_t to, const std::string& bytes, bool reply) {  // under mu
    if (recording.count(from)) sent.push_back({from, to, bytes, reply});
  }

  End end_of(uint16_t port) const;                    // under mu
  bool alive(const End& e) const;                      // under mu
  bool post(const End& to, std::function<void(FakeFabric&)> task);  // under mu; false: unreachable
  void serve_get(uint16_t port, HeldGet get);          // takes mu
  Status copy_registered(uint16_t port, const HeldGet& get) const;  // under mu
  Status copy_tagged(uint16_t port, const HeldGet& get) const;      // under mu
};

class FakeFabric final : public Fabric {
 public:
  FakeFabric(std::shared_ptr<FakeNetwork::State> net, uint16_t port, uint64_t incarnation, Handler handler)
      : net_(std::move(net)), port_(port), incarnation_(incarnation), handler_(std::move(handler)) {}
  ~FakeFabric() override {
    {
      std::lock_guard lk(net_->mu);
      auto it = net_->live.find(port_);
      if (it != net_->live.end() && it->second == this) net_->live.erase(it);
      std::erase_if(net_->tagged, [&](const auto& r) { return r.second.port == port_; });  // its memory may go now
    }
    thread_.stop();
  }

  uint16_t port() const override { return port_; }
  uint64_t incarnation() const { return incarnation_; }
  std::string transports() const override { return "fake in-process network"; }
  Result<std::unique_ptr<Endpoint>> connect(const std::string& host, uint16_t port,
                                            std::function<void(const std::string& why)>) override;
  std::string worker_address() const override {
    return "fake:" + std::to_string(port_) + ":" + std::to_string(incarnation_);
  }
  Result<std::unique_ptr<Endpoint>> connect_worker(const std::string& address, const std::string& peer,
                                                   std::function<void(const std::string& why)>) override;
  Result<std::unique_ptr<Registration>> register_memory(void* address, size_t length) override;
  Result<uint64_t> serve_tagged(const void* address, size_t length, uint64_t tag) override;
  uint64_t served_bytes(uint64_t handle) const override;
  void unserve(uint64_t handle) override;

  void run(std::function<void(FakeFabric&)> task) {
    thread_.post([this, t = std::move(task)] { t(*this); });
  }
  void handle(Message& m) { handler_(m); }

 private:
  std::unique_ptr<Endpoint> endpoint_to(std::string peer, uint16_t port, uint64_t incarnation);
  std::shared_ptr<FakeNetwork::State> net_;
  const uint16_t port_;
  const uint64_t incarnation_;
  Handler handler_;
  TaskThread thread_;  // last: stopped (explicitly) before the rest goes
};

End FakeNetwork::State::end_of(uint16_t port) const {
  auto it = live.find(port);
  auto c = cuts.find(port);
  return {port, it == live.end() ? 0 : it->second->incarnation(), c == cuts.end() ? 0 : c->second};
}

bool FakeNetwork::State::alive(const End& e) const {
  const End now = end_of(e.port);
  return e.incarnation != 0 && now.incarnation == e.incarnation && now.cuts == e.cuts && !dropped.count(e.port);
}

bool FakeNetwork::State::post(const End& to, std::function<void(FakeFabric&)> task) {
  if (!alive(to)) return false;
  live.at(to.port)->run(std::move(task));
  return true;
}

void FakeNetwork::State::serve_get(uint16_t port, HeldGet get) {
  std::lock_guard lk(mu);
  if (stalled.count(port)) {
    held[port].push_back(std::move(get));
    return;
  }
  // The copy is made under mu, which unserve() takes: after it returned, no
  // get reads the range (as the UCX fabric's ServedMemory).
  Status s = get.tag != 0 ? copy_tagged(port, get) : copy_registered(port, get);
  if (s) ++served[port];
  get.op->complete(std::move(s));
}

Status FakeNetwork::State::copy_registered(uint16_t port, const HeldGet& get) const {
  auto r = regions.find(get.key);
  const size_t size = get.op->buffer.size();
  if (r == regions.end() || r->second.port != port)
    return Status(EFAULT, "get from " + node_name(port) + ": no such registered memory");
  const Region& region = r->second;
  const auto base = reinterpret_cast<uint64_t>(region.base);
  if (get.address < base || get.address + size > base + region.length)
    return Status(EFAULT, "get from " + node_name(port) + ": outside the registered memory");
  std::memcpy(get.op->buffer.data(), region.base + (get.address - base), size);
  return Status::ok();
}

Status FakeNetwork::State::copy_tagged(uint16_t port, const HeldGet& get) const {
  const size_t size = get.op->buffer.size();
  for (const auto& [handle, r] : tagged) {
    const auto base = reinterpret_cast<uint64_t>(r.base);
    if (r.port != port || r.tag != get.tag || get.address < base || get.address - base > r.length ||
        size > r.length - (get.address - base))
      continue;
    std::memcpy(get.op->buffer.data(), r.base + (get.address - base), size);
    r.bytes_read += size;
    return Status::ok();
  }
  return Status(ESTALE, "get from " + node_name(port) + ": no range served with tag " + std::to_string(get.tag) +
                            " holds those " + std::to_string(size) + " bytes (not this round)");
}

namespace {

class FakeRemoteKey final : public Endpoint::RemoteKey {
 public:
  explicit FakeRemoteKey(uint64_t id) : id(id) {}
  const uint64_t id;
};

class FakeRegistration final : public Registration {
 public:
  FakeRegistration(std::shared_ptr<FakeNetwork::State> net, uint64_t id, uint64_t address)
      : net_(std::move(net)), id_(id), key_("fake-key:" + std::to_string(id)), address_(address) {}
  ~FakeRegistration() override {
    std::lock_guard lk(net_->mu);
    net_->regions.erase(id_);
  }
  const std::string& packed_rkey() const override { return key_; }
  uint64_t address() const override { return address_; }

 private:
  std::shared_ptr<FakeNetwork::State> net_;
  const uint64_t id_;
  const std::string key_;
  const uint64_t address_;
};

class FakeEndpoint final : public Endpoint {
 public:
  FakeEndpoint(std::shared_ptr<FakeNetwork::State> net, End from, End to, std::string peer)
      : net_(std::move(net)), from_(from), to_(to), peer_(std::move(peer)) {}

  bool failed() const override {
    std::lock_guard lk(net_->mu);
    return !net_->alive(from_) || !net_->alive(to_);
  }
  const std::string& peer() const override { return peer_; }
  std::string describe() const override { return "fake endpoint to " + node_name(to_.port); }

  Status send(const std::string& bytes, bool want_reply) override {
    std::lock_guard lk(net_->mu);
    if (!net_->alive(from_) || !net_->alive(to_)) return Status(ECONNRESET, "connection to " + peer_ + " is broken");
    net_->note(from_.port, to_.port, bytes, false);
    if (net_->muted.count(to_.port)) return Status::ok();  // it vanishes
    std::function<Status(const std::string&)> reply;
    if (want_reply) reply = replier();
    (void)net_->post(to_, [bytes, reply, from = node_name(from_.port)](FakeFabric& f) {
      Message m{bytes, reply, from};
      f.handle(m);
    });
    return Status::ok();
  }

  Result<std::unique_ptr<RemoteKey>> unpack(const std::string& packed) override {
    std::lock_guard lk(net_->mu);
    uint64_t id = 0;
    if (std::sscanf(packed.c_str(), "fake-key:%" SCNu64, &id) != 1)
      return Status(EINVAL, "remote key of " + peer_ + ": not a fake key");
    auto r = net_->regions.find(id);
    if (r == net_->regions.end() || r->second.port != to_.port || r->second.incarnation != to_.incarnation)
      return Status(EINVAL, "remote key of " + peer_ + ": not registered there");
    return std::unique_ptr<RemoteKey>(std::make_unique<FakeRemoteKey>(id));
  }

  PendingGet start_get(const RemoteKey& key, uint64_t remote_address, size_t size) override {
    return post_get(static_cast<const FakeRemoteKey&>(key).id, remote_address, size, 0);
  }

  PendingGet start_get_tagged(uint64_t remote_address, size_t size, uint64_t tag) override {
    if (tag == 0) return PendingGet(Status(EINVAL, "a tagged get from " + peer_ + " needs a tag other than 0"), size);
    return post_get(0, remote_address, size, tag);
  }

  Status finish_get(PendingGet& g, std::span<std::byte> dst, std::chrono::steady_clock::time_point deadline) override {
    if (!g.posted()) return g.posted();
    auto op = std::static_pointer_cast<FakeGetOp>(g.take());
    if (!op || dst.size() != g.size()) return Status(EINVAL, "get from " + peer_ + ": finished twice or resized");
    std::unique_lock lk(op->mu);
    if (!op->cv.wait_until(lk, deadline, [&] { return op->done; }))
      return Status(ETIMEDOUT, "get of " + std::to_string(dst.size()) + " bytes from " + peer_ + " missed its deadline");
    if (!op->status) return op->status;
    std::memcpy(dst.data(), op->buffer.data(), dst.size());
    return Status::ok();
  }

 private:
  // A get into a private buffer, served on the owner's thread: by key, or by tag.
  PendingGet post_get(uint64_t key, uint64_t remote_address, size_t size, uint64_t tag) {
    auto op = std::make_shared<FakeGetOp>();
    op->buffer.resize(size);
    HeldGet get{key, remote_address, op, tag};
    std::lock_guard lk(net_->mu);
    if (!net_->alive(from_)) return PendingGet(Status(ECONNRESET, "connection to " + peer_ + " is broken"), size);
    const bool posted = net_->post(to_, [net = net_, port = to_.port, get](FakeFabric&) { net->serve_get(port, get); });
    if (!posted) op->complete(Status(ECONNRESET, "get from " + peer_ + ": connection broken"));
    return PendingGet(std::move(op), size);
  }

  // Answers go back to this endpoint's node, on its thread, without a reply of their own.
  std::function<Status(const std::string&)> replier() const {
    return [net = net_, from = from_, to = to_.port](const std::string& bytes) -> Status {
      std::lock_guard lk(net->mu);
      net->note(to, from.port, bytes, true);
      if (net->muted.count(from.port)) return Status::ok();
      const bool posted = net->post(from, [bytes, name = node_name(to)](FakeFabric& f) {
        Message m{bytes, {}, name};
        f.handle(m);
      });
      return posted ? Status::ok() : Status(ECONNRESET, "reply to " + node_name(from.port) + ": connection broken");
    };
  }

  std::shared_ptr<FakeNetwork::State> net_;
  const End from_, to_;
  const std::string peer_;
};

}  // namespace

std::unique_ptr<Endpoint> FakeFabric::endpoint_to(std::string peer, uint16_t port, uint64_t incarnation) {
  std::lock_guard lk(net_->mu);
  End to = net_->end_of(port);
  if (to.incarnation != incarnation || net_->dropped.count(port)) to.incarnation = 0;  // born broken
  return std::make_unique<FakeEndpoint>(net_, net_->end_of(port_), to, std::move(peer));
}

Result<std::unique_ptr<Endpoint>> FakeFabric::connect(const std::string& host, uint16_t port,
                                                      std::function<void(const std::string& why)>) {
  uint64_t incarnation = 0;
  {
    std::lock_guard lk(net_->mu);
    incarnation = net_->end_of(port).incarnation;
  }
  return endpoint_to(host + ":" + std::to_string(port), port, incarnation);
}

Result<std::unique_ptr<Endpoint>> FakeFabric::connect_worker(const std::string& address, const std::string& peer,
                                                             std::function<void(const std::string& why)>) {
  unsigned port = 0;
  uint64_t incarnation = 0;
  if (std::sscanf(address.c_str(), "fake:%u:%" SCNu64, &port, &incarnation) != 2)
    return Status(EINVAL, "worker address from " + peer + ": not a fake one");
  return endpoint_to(peer, static_cast<uint16_t>(port), incarnation);
}

Result<std::unique_ptr<Registration>> FakeFabric::register_memory(void* address, size_t length) {
  std::lock_guard lk(net_->mu);
  const uint64_t id = net_->next_id++;
  net_->regions[id] = Region{port_, incarnation_, static_cast<const std::byte*>(address), length};
  return std::unique_ptr<Registration>(
      std::make_unique<FakeRegistration>(net_, id, reinterpret_cast<uint64_t>(address)));
}

Result<uint64_t> FakeFabric::serve_tagged(const void* address, size_t length, uint64_t tag) {
  if (tag == 0)
    return Status(EINVAL, "serving " + std::to_string(length) + " bytes for tagged gets: tag 0 is an untagged get's");
  std::lock_guard lk(net_->mu);
  const uint64_t handle = net_->next_id++;
  net_->tagged[handle] = TaggedRange{port_, static_cast<const std::byte*>(address), length, tag};
  return handle;
}

void FakeFabric::unserve(uint64_t handle) {
  std::lock_guard lk(net_->mu);  // gets copy under it: none copies from the range after this
  auto it = net_->tagged.find(handle);
  if (it != net_->tagged.end() && it->second.port == port_) net_->tagged.erase(it);
}

uint64_t FakeFabric::served_bytes(uint64_t handle) const {
  std::lock_guard lk(net_->mu);
  auto it = net_->tagged.find(handle);
  return it != net_->tagged.end() && it->second.port == port_ ? it->second.bytes_read : 0;
}

FakeNetwork::FakeNetwork() : state_(std::make_shared<State>()) {}
FakeNetwork::~FakeNetwork() = default;

FabricFactory FakeNetwork::factory() {
  return [net = state_](const FabricOptions& o, Fabric::Handler handler) -> Result<std::unique_ptr<Fabric>> {
    std::lock_guard lk(net->mu);
    if (net->live.count(o.port)) return Status(EADDRINUSE, "fake network: port " + std::to_string(o.port) + " is taken");
    auto f = std::make_unique<FakeFabric>(net, o.port, net->next_id++, std::move(handler));
    net->live[o.port] = f.get();
    return std::unique_ptr<Fabric>(std::move(f));
  };
}

void FakeNetwork::drop(uint16_t port, bool dropped) {
  std::lock_guard lk(state_->mu);
  if (dropped) {
    state_->dropped.insert(port);
    ++state_->cuts[port];
  } else {
    state_->dropped.erase(port);
  }
}

void FakeNetwork::mute(uint16_t port, bool muted) {
  std::lock_guard lk(state_->mu);
  if (muted) state_->muted.insert(port);
  else state_->muted.erase(port);
}

void FakeNetwork::stall_gets(uint16_t port, bool stalled) {
  std::vector<HeldGet> release;
  {
    std::lock_guard lk(state_->mu);
    if (stalled) {
      state_->stalled.insert(port);
      return;
    }
    state_->stalled.erase(port);
    release = std::move(state_->held[port]);
    state_->held.erase(port);
  }
  for (auto& g : release) state_->serve_get(port, std::move(g));
}

uint64_t FakeNetwork::gets_served(uint16_t port) const {
  std::lock_guard lk(state_->mu);
  auto it = state_->served.find(port);
  return it == state_->served.end() ? 0 : it->second;
}

uint64_t FakeNetwork::gets_stalled(uint16_t port) const {
  std::lock_guard lk(state_->mu);
  auto it = state_->held.find(port);
  return it == state_->held.end() ? 0 : it->second.size();
}

void FakeNetwork::record(uint16_t port, bool on) {
  std::lock_guard lk(state_->mu);
  if (on) state_->recording.insert(port);
  else state_->recording.erase(port);
}

std::vector<FakeNetwork::Sent> FakeNetwork::sent(uint16_t from) const {
  std::lock_guard lk(state_->mu);
  std::vector<Sent> out;
  for (const auto& s : state_->sent)
    if (s.from == from) out.push_back(s);
  return out;
}

RawNode::RawNode(FakeNetwork& net, uint16_t port) : inbox_(std::make_shared<Inbox>()) {
  auto f = net.factory()({.listen_host = "", .port = port, .listen = true}, [inbox = inbox_](Message& m) {
    {
      std::lock_guard lk(inbox->mu);
      inbox->messages.push_back(m.bytes);
    }
    inbox->cv.notify_all();
  });
  if (f) fabric_ = std::move(f).value();
}

RawNode::~RawNode() {
  endpoints_.clear();
  fabric_.reset();
}

Status RawNode::send(uint16_t to, const std::string& bytes) {
  if (!fabric_) return Status(EADDRINUSE, "raw node: its port is taken");
  auto& ep = endpoints_[to];
  if (!ep) {
    auto e = fabric_->connect("raw", to, nullptr);
    if (!e) return e.status();
    ep = std::move(e).value();
  }
  return ep->send(bytes, true);
}

std::vector<std::string> RawNode::received() const {
  std::lock_guard lk(inbox_->mu);
  return inbox_->messages;
}

bool RawNode::wait_received(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lk(inbox_->mu);
  return inbox_->cv.wait_for(lk, timeout, [&] { return inbox_->messages.size() >= n; });
}

}  // namespace dlfs::transport::test
