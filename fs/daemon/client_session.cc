#include "fs/daemon/client_session.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/units.h"
#include "common/user_db.h"
#include "fs/dataset/audience.h"
#include "fs/dataset/dataset.h"
#include "fs/views/view_locate.h"

namespace dlfs::fs {
namespace {

using nlohmann::json;

const char* errno_name(int err) {
  switch (err) {
    case EACCES: return "EACCES";
    case EINVAL: return "EINVAL";
    case ENOENT: return "ENOENT";
    case EPROTO: return "EPROTO";
    case EBUSY: return "EBUSY";
    case ENOBUFS: return "ENOBUFS";
    case EFBIG: return "EFBIG";
    case EMSGSIZE: return "EMSGSIZE";
    case EAGAIN: return "EAGAIN";
    default: return "EIO";
  }
}

ClientReply client_error(int err, const std::string& message) {
  ClientReply r;
  r.header = {{"ok", false}, {"code", errno_name(err)}, {"error", message}};
  return r;
}

// r[key] as an unsigned integer <= max; the error names the field.
Result<uint64_t> field(const json& r, const char* key, uint64_t max) {
  auto it = r.find(key);
  if (it == r.end()) return Status(EINVAL, std::string("missing field \"") + key + "\"");
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0))
    return Status(EINVAL, std::string("field \"") + key + "\" must be a non-negative integer, not " + it->dump());
  const uint64_t v = it->get<uint64_t>();
  if (v > max) return Status(EINVAL, std::string("field \"") + key + "\" is " + std::to_string(v) + ", at most " +
                                         std::to_string(max));
  return v;
}

void put_u16(std::string& out, uint16_t v) { out.append(reinterpret_cast<const char*>(&v), 2); }
void put_u32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }
void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }

uint64_t page_round(uint64_t n) { return (n + 4095) / 4096 * 4096; }

}  // namespace

ClientSession::ClientSession(PeerCredentials peer, ClientPolicy policy, DatasetLookup lookup,
                             ClientCounters& counters)
    : peer_(std::move(peer)), policy_(policy), lookup_(std::move(lookup)), counters_(counters) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the protocol's integers are little-endian");
}

ClientReply ClientSession::bad(int err, const std::string& message) {
  counters_.bad_requests.fetch_add(1, std::memory_order_relaxed);
  ClientReply r = client_error(err, message);
  if (++bad_in_a_row_ >= kMaxBadInARow) {
    r.header["error"] = message + " (" + std::to_string(kMaxBadInARow) + " bad requests in a row: closing)";
    r.close = true;
  }
  return r;
}

ClientReply ClientSession::too_large() {
  return bad(EMSGSIZE, "request larger than " + std::to_string(kMaxRequest) + " bytes");
}

ClientReply ClientSession::handle(std::string_view text) {
  try {
    json r = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (r.is_discarded() || !r.is_object()) return bad(EINVAL, "a request is one JSON object");
    auto op = r.find("op");
    if (op == r.end() || !op->is_string()) return bad(EINVAL, "a request needs an \"op\" string (open, view, batch)");
    ClientReply reply;
    const std::string name = *op;
    if (name == "open") reply = open(r);
    else if (name == "view") reply = view(r);
    else if (name == "batch") reply = batch(r);
    else return bad(EINVAL, "unknown op \"" + name + "\" (open, view, batch)");
    if (reply.header.value("ok", false)) bad_in_a_row_ = 0;
    return reply;
  } catch (const std::exception& e) {  // a bug, never a client's doing: say so, keep serving
    return client_error(EIO, std::string("internal error: ") + e.what());
  }
}

std::string ClientSession::refusal(const Dataset& ds) const {
  const std::string name = user_name(peer_.uid);
  const std::string who = name == std::to_string(peer_.uid) ? "uid " + name : "user " + name + " (uid " + std::to_string(peer_.uid) + ")";
  if (peer_.uid == 0 || peer_.uid == policy_.daemon_uid) return "";
  if (!policy_.others_allowed)
    return who + " may not read this mount: dlfsd serves only its own user (allow_other is off, or dlfsd is not root)";
  Reader reader{peer_.uid, peer_.gid, peer_.groups};
  if (ds.audience().may_read(reader)) return "";
  return who + " may not read dataset '" + ds.name() + "': its views are readable by " + ds.audience().readers +
         " (" + ds.audience().why + ")";
}

ClientReply ClientSession::open(const json& r) {
  if (ds_ != nullptr) return bad(EBUSY, "this connection has opened dataset '" + ds_->name() + "' already");
  auto version = field(r, "version", UINT32_MAX);
  if (!version) return bad(EINVAL, version.status().message());
  if (*version != kVersion)
    return bad(EPROTO, "protocol version " + std::to_string(*version) + " is not served (this dlfsd speaks " +
                           std::to_string(kVersion) + ")");
  auto name = r.find("dataset");
  if (name == r.end() || !name->is_string()) return bad(EINVAL, "open needs a \"dataset\" string");
  auto ds = lookup_(*name);
  if (!ds) return client_error(ds.status().err(), ds.status().message());
  if (std::string why = refusal(**ds); !why.empty()) {
    counters_.refused.fetch_add(1, std::memory_order_relaxed);
    return client_error(EACCES, why);
  }
  const Dataset& d = **ds;
  slot_bytes_ = page_round(std::max(policy_.min_slot_bytes, d.largest_sample()));
  auto staging = cache::SharedMemory::create("dlfs-client-staging", slot_bytes_ * policy_.slots, false);
  if (!staging) return client_error(staging.status().err(), staging.status().message());
  staging_ = std::move(staging).value();
  // Region 0 without shared memory (anonymous): an empty memfd stands in,
  // and every sample is staged.
  if (d.buffer().memory_fd() < 0) {
    auto empty = cache::SharedMemory::create("dlfs-client-empty", 0, false);
    if (!empty) return client_error(empty.status().err(), empty.status().message());
    empty_ = std::move(empty).value();
  }
  ds_ = &d;
  counters_.opens.fetch_add(1, std::memory_order_relaxed);

  const cache::StorageBuffer& b = d.buffer();
  const bool shared = b.memory_fd() >= 0;
  ClientReply reply;
  reply.header = {{"ok", true},
                  {"version", kVersion},
                  {"dataset", d.name()},
                  {"format", d.config().format.format},
                  {"samples", d.manifest().sample_count()},
                  {"grouped", d.manifest().samples_grouped()},
                  {"fixed_size", d.manifest().fixed_record_size()},
                  {"regions", json::array({json{{"region", 0}, {"bytes", shared ? b.capacity_bytes() : 0}},
                                           json{{"region", 1},
                                                {"bytes", staging_->bytes()},
                                                {"slots", policy_.slots},
                                                {"slot_bytes", slot_bytes_}}})}};
  reply.fds = {shared ? b.memory_fd() : empty_->fd(), staging_->fd()};
  return reply;
}

// The optional "seed" and "resume" fields of a view request: the view the
// mount serves under seeds/<seed>/ and .../resume/<consumed>/<W'>/ (null: neither).
Result<std::shared_ptr<const ViewContext>> ClientSession::view_context(const json& r) const {
  const bool seeded = r.contains("seed");
  const auto resume = r.find("resume");
  if (!seeded && resume == r.end()) return std::shared_ptr<const ViewContext>();
  uint64_t seed = ds_->planner().seed();
  if (seeded) {
    DLFS_ASSIGN_OR_RETURN(seed, field(r, "seed", UINT64_MAX));
  }
  if (resume == r.end()) return std::shared_ptr<const ViewContext>(std::make_shared<ViewContext>(seed, true));
  if (!resume->is_object())
    return Status(EINVAL, "field \"resume\" must be {\"world_size\": W, \"consumed\": [counts]}, not " + resume->dump());
  DLFS_ASSIGN_OR_RETURN(const uint64_t world, field(*resume, "world_size", 65535));
  if (world == 0) return Status(EINVAL, "field \"resume\".\"world_size\" is 0");
  const auto consumed = resume->find("consumed");
  if (consumed == resume->end() || !consumed->is_array() || (consumed->size() != 1 && consumed->size() != world))
    return Status(EINVAL, "field \"resume\".\"consumed\" must be a list of 1 or " + std::to_string(world) +
                              " counts (one for every rank, or one per rank)");
  std::vector<uint64_t> counts;
  for (const json& c : *consumed) {
    if (!c.is_number_unsigned() && !(c.is_number_integer() && c.get<int64_t>() >= 0))
      return Status(EINVAL, "field \"resume\".\"consumed\" holds " + c.dump() + ", not a count");
    counts.push_back(c.get<uint64_t>());
  }
  if (counts.size() == 1) counts.assign(world, counts[0]);
  DLFS_RETURN_IF_ERROR(check_consumed(ds_->planner().shape().samples, static_cast<uint32_t>(world), counts,
                                      ds_->planner().remainder()));
  std::string name = consumed_name(counts);
  return std::shared_ptr<const ViewContext>(
      std::make_shared<ViewContext>(seed, seeded, static_cast<uint32_t>(world), std::move(counts), std::move(name)));
}

ClientReply ClientSession::view(const json& r) {
  if (ds_ == nullptr) return bad(EINVAL, "open a dataset first");
  auto epoch = field(r, "epoch", UINT32_MAX);
  auto world = field(r, "world_size", UINT32_MAX);
  auto rank = field(r, "rank", UINT32_MAX);
  for (const auto* f : {&epoch, &world, &rank})
    if (!*f) return bad(EINVAL, f->status().message());
  if (ds_->planner().opportunistic())
    return bad(EINVAL, "dataset '" + ds_->name() + "' has an opportunistic order, decided as a view is read "
                       "(docs/views.md): read its views through the mount");
  if (views_.size() >= kMaxViews)
    return bad(EBUSY, "this connection has made " + std::to_string(kMaxViews) + " views; open another connection");
  auto context = view_context(r);
  if (!context) return bad(context.status().err(), context.status().message());
  auto v = EpochView::build(*ds_, ViewKey{static_cast<uint32_t>(*epoch), static_cast<uint32_t>(*world),
                                          static_cast<uint32_t>(*rank), *context});
  if (!v) return bad(v.status().err(), v.status().message());
  views_.push_back(*v);
  ClientReply reply;
  reply.header = {{"ok", true}, {"view", views_.size()}, {"samples", (*v)->count()}, {"rounds", (*v)->rounds()}};
  return reply;
}

ClientReply ClientSession::batch(const json& r) {
  if (ds_ == nullptr) return bad(EINVAL, "open a dataset first");
  auto id = field(r, "view", views_.size());
  auto start = field(r, "start", UINT64_MAX);
  auto count = field(r, "count", kMaxBatch);
  auto slot = field(r, "slot", policy_.slots - 1);
  for (const auto* f : {&id, &start, &count, &slot})
    if (!*f) return bad(EINVAL, f->status().message());
  if (*id == 0) return bad(EINVAL, "field \"view\" is 0; view ids start at 1");
  bool names = false;
  if (auto n = r.find("names"); n != r.end()) {
    if (!n->is_boolean()) return bad(EINVAL, "field \"names\" must be true or false");
    names = *n;
  }
  const EpochView& v = *views_[*id - 1];
  LocateTarget t;
  const cache::StorageBuffer& b = ds_->buffer();
  if (b.memory_fd() >= 0) {
    t.memory = b.memory_base();
    t.memory_bytes = b.capacity_bytes();
  }
  t.slot_offset = *slot * slot_bytes_;
  t.slot = staging_->data() + t.slot_offset;
  t.slot_bytes = slot_bytes_;
  // The records (24 bytes) and members (8 bytes; a few per sample) must fit the reply.
  const uint64_t fit = (kMaxReply - 4096) / (24 + (ds_->manifest().samples_grouped() ? 32 : 0));
  LocatedBatch out;
  if (Status st = locate_samples(v, *start, std::min(*count, fit), t, gather_, out); !st)
    return client_error(st.err(), st.message());

  // Names, cut where the reply would pass kMaxReply.
  json name_list = json::array();
  size_t n = out.samples.size();
  if (names) {
    const provenance::Manifest& m = ds_->manifest();
    size_t bytes = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t s = out.samples[i].sample;
      json entry;
      if (m.samples_grouped()) {
        entry = json::array();
        for (uint32_t j = 0; j < m.sample_member_count(s); ++j) entry.push_back(m.sample_member(s, j).name);
      } else {
        entry = m.member_name(s);
      }
      // Replacing bad UTF-8 (a backend name is bytes) as the reply itself will (json_text).
      bytes += entry.dump(-1, ' ', false, json::error_handler_t::replace).size() + 1;
      if (bytes + 24 * n + 8 * out.members.size() + 256 > kMaxReply && i > 0) {
        n = i;
        break;
      }
      name_list.push_back(std::move(entry));
    }
  }
  ClientReply reply;
  reply.payload.reserve(24 * n + 8 * out.members.size());
  uint64_t staged = 0, in_memory = 0;
  size_t members = 0;
  for (size_t i = 0; i < n; ++i) {
    const LocatedSample& s = out.samples[i];
    put_u64(reply.payload, s.offset);
    put_u64(reply.payload, s.sample);
    put_u32(reply.payload, s.length);
    put_u16(reply.payload, static_cast<uint16_t>(s.region));
    put_u16(reply.payload, s.members);
    members += s.members;
    if (s.region == ClientRegion::staging) staged += s.length;
    else ++in_memory;
  }
  if (ds_->manifest().samples_grouped())
    for (size_t i = 0; i < members; ++i) {
      put_u32(reply.payload, out.members[i].first);
      put_u32(reply.payload, out.members[i].second);
    }
  reply.header = {{"ok", true}, {"start", *start}, {"count", n}, {"staged_bytes", staged}};
  if (names) reply.header["names"] = std::move(name_list);
  counters_.batches.fetch_add(1, std::memory_order_relaxed);
  counters_.memory_samples.fetch_add(in_memory, std::memory_order_relaxed);
  counters_.staged_samples.fetch_add(n - in_memory, std::memory_order_relaxed);
  counters_.staged_bytes.fetch_add(staged, std::memory_order_relaxed);
  return reply;
}

}  // namespace dlfs::fs
