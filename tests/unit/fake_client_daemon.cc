#include "fake_client_daemon.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace dlfs::test {
namespace {

using nlohmann::json;

void put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void send_packet(int fd, const std::string& packet, const std::vector<int>& fds = {}) {
  iovec iov{const_cast<char*>(packet.data()), packet.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
  }
  ::sendmsg(fd, &msg, MSG_NOSIGNAL);  // a client gone is its business
}

void send_reply(int fd, const json& header, const std::string& payload = {}, const std::vector<int>& fds = {}) {
  std::string text = header.dump();
  std::string packet;
  put(packet, text.size(), 4);
  packet += text;
  packet += payload;
  send_packet(fd, packet, fds);
}

void send_error(int fd, const char* code, const std::string& message) {
  send_reply(fd, json{{"ok", false}, {"code", code}, {"error", message}});
}

int memfd_with(const std::string& name, uint64_t bytes) {
  int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0)
    throw std::runtime_error("FakeClientDaemon: memfd " + name + ": " + std::strerror(errno));
  return fd;
}

}  // namespace

std::vector<uint64_t> FakeClientDaemon::view_ids(uint64_t samples, uint32_t epoch, uint32_t world_size, uint32_t rank) {
  std::vector<uint64_t> ids;
  for (uint64_t i = rank; i < samples; i += world_size) ids.push_back(i);
  if (!ids.empty()) std::rotate(ids.begin(), ids.begin() + epoch % ids.size(), ids.end());
  return ids;
}

FakeClientDaemon::FakeClientDaemon(std::string socket_path, FakeDatasetConfig config)
    : path_(std::move(socket_path)), config_(std::move(config)) {
  std::string region0;
  for (const auto& s : config_.samples) {
    region0_offset_.push_back(s.resident ? region0.size() : UINT64_MAX);
    if (s.resident) region0 += s.bytes;
  }
  region0_bytes_ = region0.size();
  region0_fd_ = memfd_with("fake-region0", region0_bytes_);
  if (::pwrite(region0_fd_, region0.data(), region0.size(), 0) != static_cast<ssize_t>(region0.size()))
    throw std::runtime_error("FakeClientDaemon: cannot fill region 0");

  listen_fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
  ::unlink(path_.c_str());
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 8) != 0)
    throw std::runtime_error("FakeClientDaemon: cannot listen on " + path_ + ": " + std::strerror(errno));
  if (::pipe2(stop_pipe_, O_CLOEXEC) != 0) throw std::runtime_error("FakeClientDaemon: pipe");
  thread_ = std::thread([this] { serve(); });
}

FakeClientDaemon::~FakeClientDaemon() {
  (void)!::write(stop_pipe_[1], "x", 1);
  thread_.join();
  ::close(listen_fd_);
  ::unlink(path_.c_str());
  ::close(stop_pipe_[0]);
  ::close(stop_pipe_[1]);
  ::close(region0_fd_);
}

void FakeClientDaemon::serve() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) continue;
    if (p[1].revents) return;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    serve_connection(fd);
    ::close(fd);
    if (::poll(&p[1], 1, 0) > 0) return;
  }
}

void FakeClientDaemon::serve_connection(int fd) {
  bool opened = false;
  int staging_fd = -1;
  uint8_t* staging = nullptr;
  const uint64_t staging_bytes = uint64_t(config_.slots) * config_.slot_bytes;
  std::map<uint32_t, std::vector<uint64_t>> views;
  uint32_t next_view = 1;
  int batches_here = 0;
  std::vector<char> buf(70 * 1024);
  for (;;) {
    pollfd p[2] = {{fd, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) continue;
    if (p[1].revents) break;
    ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0) break;
    json req = json::parse(buf.data(), buf.data() + n, nullptr, false);
    if (!req.is_object()) {
      send_error(fd, "EINVAL", "request is not a JSON object");
      continue;
    }
    const std::string op = req.value("op", "");
    if (op == "open") {
      ++opens_;
      if (!config_.refuse_open_code.empty()) {
        send_error(fd, config_.refuse_open_code.c_str(), config_.refuse_open_message);
        continue;
      }
      if (req.value("dataset", "") != config_.name) {
        send_error(fd, "ENOENT", "no dataset named '" + req.value("dataset", "") + "'");
        continue;
      }
      opened = true;
      staging_fd = memfd_with("fake-staging", staging_bytes);
      staging = static_cast<uint8_t*>(::mmap(nullptr, staging_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, staging_fd, 0));
      json header = {{"ok", true}, {"version", 1}, {"dataset", config_.name}, {"format", config_.format},
                     {"samples", config_.samples.size()}, {"grouped", config_.grouped}, {"fixed_size", 0},
                     {"regions", json::array({json{{"region", 0}, {"bytes", region0_bytes_}},
                                              json{{"region", 1}, {"bytes", staging_bytes}, {"slots", config_.slots},
                                                   {"slot_bytes", config_.slot_bytes}}})}};
      send_reply(fd, header, {}, {region0_fd_, staging_fd});
    } else if (op == "view") {
      if (!opened) {
        send_error(fd, "EINVAL", "view before open");
        continue;
      }
      if (views.size() >= 64) {
        send_error(fd, "EINVAL", "this connection has 64 views already");
        continue;
      }
      ++views_;
      uint32_t world = req.value("world_size", 0u), rank = req.value("rank", 0u);
      if (world == 0 || rank >= world) {
        send_error(fd, "EINVAL", "rank " + std::to_string(rank) + " is not below world size " + std::to_string(world));
        continue;
      }
      auto ids = view_ids(config_.samples.size(), req.value("epoch", 0u), world, rank);
      uint32_t id = next_view++;
      send_reply(fd, json{{"ok", true}, {"view", id}, {"samples", ids.size()}, {"rounds", 1}});
      views[id] = std::move(ids);
    } else if (op == "batch") {
      ++batches_;
      auto v = views.find(req.value("view", 0u));
      uint32_t slot = req.value("slot", 0u);
      if (v == views.end() || slot >= config_.slots) {
        send_error(fd, "EINVAL", "no such view or slot");
        continue;
      }
      const auto& ids = v->second;
      const uint64_t start = req.value("start", uint64_t(0));
      uint64_t count = std::min<uint64_t>(req.value("count", 0u), config_.max_per_reply);
      count = std::min<uint64_t>(count, start < ids.size() ? ids.size() - start : 0);
      std::string records, lengths;
      uint64_t staged = 0, done = 0;
      for (; done < count; ++done) {
        const uint64_t id = ids[start + done];
        const FakeSample& s = config_.samples[id];
        uint64_t offset;
        int region = 0;
        if (s.resident) {
          offset = region0_offset_[id];
        } else {
          if (staged + s.bytes.size() > config_.slot_bytes) break;  // the slot is full
          offset = slot * config_.slot_bytes + staged;
          std::memcpy(staging + offset, s.bytes.data(), s.bytes.size());
          staged += s.bytes.size();
          region = 1;
        }
        put(records, offset, 8);
        put(records, id, 8);
        put(records, s.bytes.size(), 4);
        put(records, region, 2);
        put(records, config_.grouped ? s.members.size() : 1, 2);
        if (config_.grouped) {
          uint32_t at = 0;  // back to back here (a tar shard's have headers between them)
          for (uint32_t m : s.members) {
            put(lengths, at, 4);
            put(lengths, m, 4);
            at += m;
          }
        }
      }
      json header = {{"ok", true}, {"start", start}, {"count", done}, {"staged_bytes", staged}};
      switch (config_.garbage) {
        case Garbage::kNone: break;
        case Garbage::kNotJson: send_packet(fd, std::string("\x05\0\0\0{oops", 9)); continue;
        case Garbage::kTinyPacket: send_packet(fd, "ab"); continue;
        case Garbage::kHeaderTooLong: send_packet(fd, std::string("\xff\xff\0\0{}", 6)); continue;
        case Garbage::kOffsetPastRegion: records.replace(0, 8, std::string("\0\0\0\0\0\0\0\x10", 8)); break;
        case Garbage::kShortPayload: header["count"] = done + 2; break;
        case Garbage::kWrongStart: header["start"] = start + 1; break;
        case Garbage::kZeroCount: header["count"] = 0; records.clear(); lengths.clear(); break;
        case Garbage::kBadRegion: records[20] = 7; break;
        case Garbage::kMembersMismatch: lengths[4] = static_cast<char>(lengths[4] + 100); break;  // a member past its sample
      }
      send_reply(fd, header, records + lengths);
      if (++batches_here == config_.close_after_batches) break;
    } else {
      send_error(fd, "EINVAL", "unknown op '" + op + "'");
    }
  }
  if (staging != nullptr) ::munmap(staging, staging_bytes);
  if (staging_fd >= 0) ::close(staging_fd);
}

}  // namespace dlfs::test
