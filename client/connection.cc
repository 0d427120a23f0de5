#include "client/connection.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <cstring>
#include <limits>

namespace dlfs::client {
namespace {

using nlohmann::json;

const json& field(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) fail(EPROTO, where + " has no \"" + key + "\"");
  return *it;
}

uint64_t get_u64(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  if (!v.is_number_unsigned()) fail(EPROTO, where + ": \"" + key + "\" is not an unsigned integer: " + v.dump());
  return v.get<uint64_t>();
}

uint32_t get_u32(const json& j, const char* key, const std::string& where) {
  uint64_t v = get_u64(j, key, where);
  if (v > std::numeric_limits<uint32_t>::max())
    fail(EPROTO, where + ": \"" + key + "\" is " + std::to_string(v) + ", over 32 bits");
  return static_cast<uint32_t>(v);
}

std::string get_string(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  if (!v.is_string()) fail(EPROTO, where + ": \"" + key + "\" is not a string: " + v.dump());
  return v.get<std::string>();
}

bool get_bool(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  if (!v.is_boolean()) fail(EPROTO, where + ": \"" + key + "\" is not a boolean: " + v.dump());
  return v.get<bool>();
}

constexpr size_t kRecordBytes = 24;

}  // namespace

Mapping Mapping::map(int fd, uint64_t bytes, const std::string& what) {
  Mapping m;
  if (bytes == 0) return m;  // the protocol: a 0-byte region is not mapped
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(errno, "cannot stat " + what + "'s descriptor: " + std::strerror(errno));
  if (static_cast<uint64_t>(st.st_size) < bytes)
    fail(EPROTO, what + "'s descriptor holds " + std::to_string(st.st_size) + " bytes, dlfsd said " +
                     std::to_string(bytes));
  void* addr = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED)
    fail(errno, "cannot map " + what + " (" + std::to_string(bytes) + " bytes): " + std::strerror(errno));
  m.addr_ = addr;
  m.bytes_ = bytes;
  return m;
}

Mapping::Mapping(Mapping&& o) noexcept : addr_(std::exchange(o.addr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    reset();
    addr_ = std::exchange(o.addr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void Mapping::reset() {
  if (addr_ != nullptr) ::munmap(addr_, bytes_);
  addr_ = nullptr;
  bytes_ = 0;
}

Connection::Connection(const std::string& socket_path, const std::string& dataset) {
  fd_ = connect_socket(socket_path);
  send_request(fd_.get(), json{{"op", "open"}, {"version", 1}, {"dataset", dataset}});
  Reply reply = receive_reply(fd_.get(), buffer_, "open");
  parse_open(reply, dataset);
}

void Connection::parse_open(const Reply& reply, const std::string& dataset) {
  const std::string where = "dlfsd's open reply for dataset '" + dataset + "'";
  const json& h = reply.header;
  if (uint64_t version = get_u64(h, "version", where); version != 1)
    fail(EPROTO, where + " speaks protocol version " + std::to_string(version) + ", this library version 1");
  info_.name = get_string(h, "dataset", where);
  info_.format = get_string(h, "format", where);
  info_.samples = get_u64(h, "samples", where);
  info_.grouped = get_bool(h, "grouped", where);
  info_.fixed_size = get_u64(h, "fixed_size", where);
  const json& regions = field(h, "regions", where);
  if (!regions.is_array() || regions.size() != 2)
    fail(EPROTO, where + ": \"regions\" is not a list of 2: " + regions.dump());
  if (reply.fds.size() != 2)
    fail(EPROTO, where + " came with " + std::to_string(reply.fds.size()) + " descriptors, not 2");
  for (size_t i = 0; i < 2; ++i) {
    const json& r = regions[i];
    const std::string rwhere = where + ", region " + std::to_string(i);
    if (!r.is_object()) fail(EPROTO, rwhere + " is not an object: " + r.dump());
    if (get_u64(r, "region", rwhere) != i) fail(EPROTO, where + ": the regions are not in order 0, 1: " + regions.dump());
    uint64_t bytes = get_u64(r, "bytes", rwhere);
    if (i == 0) {
      region0_ = Mapping::map(reply.fds[0].get(), bytes, "region 0 (the dataset memory)");
      continue;
    }
    info_.slots = get_u32(r, "slots", rwhere);
    info_.slot_bytes = get_u64(r, "slot_bytes", rwhere);
    if (info_.slot_bytes != 0 && info_.slots > bytes / info_.slot_bytes)
      fail(EPROTO, rwhere + " has " + std::to_string(bytes) + " bytes, less than its " + std::to_string(info_.slots) +
                       " slots of " + std::to_string(info_.slot_bytes));
    region1_ = Mapping::map(reply.fds[1].get(), bytes, "region 1 (the staging memory)");
  }
  // The descriptors close with `reply`: the mappings keep the memory.
}

bool Connection::views_full(uint32_t epoch, uint32_t world_size, uint32_t rank) const {
  return views_.size() >= kMaxViewsPerConnection && !views_.contains({epoch, world_size, rank});
}

Connection::View Connection::view(uint32_t epoch, uint32_t world_size, uint32_t rank) {
  if (auto it = views_.find({epoch, world_size, rank}); it != views_.end()) return it->second;
  if (!fd_) lost(ECONNRESET, "the connection to dlfsd is closed");
  send_request(fd_.get(), json{{"op", "view"}, {"epoch", epoch}, {"world_size", world_size}, {"rank", rank}});
  Reply reply = receive_reply(fd_.get(), buffer_, "view");
  const std::string where = "dlfsd's view reply for epochs/" + std::to_string(epoch) + "/" +
                            std::to_string(world_size) + "/" + std::to_string(rank);
  View v{get_u32(reply.header, "view", where), get_u64(reply.header, "samples", where)};
  views_[{epoch, world_size, rank}] = v;
  return v;
}

BatchResult Connection::batch(uint32_t view, uint64_t start, uint32_t count, uint32_t slot, std::vector<Located>& out,
                              std::vector<dlfs_member>& member_spans) {
  if (!fd_) lost(ECONNRESET, "the connection to dlfsd is closed");
  send_request(fd_.get(), json{{"op", "batch"}, {"view", view}, {"start", start}, {"count", count},
                               {"slot", slot}, {"names", false}});
  Reply reply = receive_reply(fd_.get(), buffer_, "batch");
  const std::string where = "dlfsd's batch reply for positions " + std::to_string(start) + "+" + std::to_string(count);
  if (uint64_t s = get_u64(reply.header, "start", where); s != start)
    fail(EPROTO, where + " starts at " + std::to_string(s));
  uint32_t n = get_u32(reply.header, "count", where);
  if (n > count) fail(EPROTO, where + " has " + std::to_string(n) + " samples, more than asked");
  const auto payload = reply.payload;
  if (payload.size() < n * kRecordBytes)
    fail(EPROTO, where + ": its payload of " + std::to_string(payload.size()) + " bytes is short of " +
                     std::to_string(n) + " records of 24 bytes");

  // The members (offset, length) follow the records: count them first, so
  // that the payload's size is checked before any is read.
  uint64_t total_members = 0;
  for (uint32_t i = 0; i < n; ++i) total_members += le16(payload.data() + i * kRecordBytes + 22);
  const uint64_t expected = n * kRecordBytes + (info_.grouped ? total_members * 8 : 0);
  if (payload.size() != expected)
    fail(EPROTO, where + ": its payload has " + std::to_string(payload.size()) + " bytes, " + std::to_string(n) +
                     " records" + (info_.grouped ? " and " + std::to_string(total_members) + " members" : "") +
                     " make " + std::to_string(expected));

  // The slot asked for: a staged sample must lie inside it, anything else
  // would point at another batch's samples (or past the mapping).
  const uint64_t slot_begin = uint64_t(slot) * info_.slot_bytes;
  const uint64_t slot_end = slot < info_.slots ? slot_begin + info_.slot_bytes : slot_begin;
  const uint8_t* spans = payload.data() + n * kRecordBytes;
  BatchResult result;
  const size_t first = out.size();
  // A reply found bad halfway leaves nothing behind: the caller's vectors
  // are as they were.
  struct Undo {
    std::vector<Located>& out;
    std::vector<dlfs_member>& spans;
    size_t out_size, spans_size;
    bool armed = true;
    ~Undo() {
      if (!armed) return;
      out.resize(out_size);
      spans.resize(spans_size);
    }
  } undo{out, member_spans, first, member_spans.size()};
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t* r = payload.data() + i * kRecordBytes;
    const uint64_t offset = le64(r), sample = le64(r + 8);
    const uint32_t length = le32(r + 16);
    const uint16_t region = le16(r + 20), members = le16(r + 22);
    const std::string what = where + ": sample " + std::to_string(sample) + " (position " + std::to_string(start + i) + ")";
    if (sample >= info_.samples)
      fail(EPROTO, what + " is not below the dataset's " + std::to_string(info_.samples) + " samples");
    const uint8_t* data;
    if (region == 0) {
      if (offset > region0_.bytes() || length > region0_.bytes() - offset)
        fail(EPROTO, what + " at " + std::to_string(offset) + "+" + std::to_string(length) +
                         " is past region 0's " + std::to_string(region0_.bytes()) + " bytes");
      data = region0_.data() != nullptr ? region0_.data() + offset : nullptr;
    } else if (region == 1) {
      if (offset < slot_begin || offset > slot_end || length > slot_end - offset)
        fail(EPROTO, what + " at " + std::to_string(offset) + "+" + std::to_string(length) + " is outside slot " +
                         std::to_string(slot) + " [" + std::to_string(slot_begin) + ", " + std::to_string(slot_end) +
                         ") of region 1");
      data = region1_.data() != nullptr ? region1_.data() + offset : nullptr;
      result.staged = true;
    } else {
      fail(EPROTO, what + " is in region " + std::to_string(region) + "; there are regions 0 and 1");
    }
    if (members == 0) fail(EPROTO, what + " has 0 members");
    if (!info_.grouped && members != 1)
      fail(EPROTO, what + " has " + std::to_string(members) + " members in a dataset that is not grouped");
    const size_t index = member_spans.size();
    if (info_.grouped) {
      for (uint16_t m = 0; m < members; ++m, spans += 8) {
        const dlfs_member span{le32(spans), le32(spans + 4)};
        if (span.offset > length || span.length > length - span.offset)
          fail(EPROTO, what + ": its member " + std::to_string(m) + " at " + std::to_string(span.offset) + "+" +
                           std::to_string(span.length) + " is outside its " + std::to_string(length) + " bytes");
        member_spans.push_back(span);
      }
    } else {
      member_spans.push_back(dlfs_member{0, length});
    }
    if (data == nullptr) data = reinterpret_cast<const uint8_t*>("");  // 0 bytes of an unmapped region
    out.push_back(Located{data, length, sample, members, index});
  }
  undo.armed = false;
  result.count = static_cast<uint32_t>(out.size() - first);
  return result;
}

}  // namespace dlfs::client
