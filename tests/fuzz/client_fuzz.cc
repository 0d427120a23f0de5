// Fuzz target: the daemon's client socket sessions (docs/client-protocol.md;
// fs/daemon/client_session.cc over fs/views/view_locate.cc; `tools/fuzz.sh
// client`). One input is one connection: its first byte says who the peer is
// and what the daemon's policy is, the rest is up to kMaxPackets request
// packets separated by '\n', handed to one ClientSession as ClientServer
// would (a packet starting with byte 0x01 stands for one larger than 64 KiB:
// too_large(); an empty one is the client's EOF, as recv() reads it). The session finds three small real datasets, made once:
//   files    files of 0 B to 24 KiB (a long name, a non-UTF-8 one), loaded
//            whole: every sample lies in region 0;
//   grouped  group_by = first-dot (1-3 members a sample), a memory budget of
//            a third of it, loaded: some samples in region 0, others staged;
//            its views readable by root's group only (view_mode 0440);
//   fixed    7-byte records under a 120-byte directory (6,100 samples, long
//            names), in rounds (shuffle_ratio 0.5): region 0 is empty and
//            every sample is staged.
// Peers are uid 0, dlfsd's user (kDaemonUid), 60001, or 60001 in group 0;
// slots are few and small, so batches come back short.
//
// Invariants, per reply: the header is a JSON object with a boolean "ok"; an
// error has a documented errno name as "code" and a non-empty "error", no
// descriptors and no payload, and is the error the protocol's rules give
// for the request (predicted here: malformed JSON, ops and fields, version,
// a second open, unknown dataset, the peer's permission); never an
// "internal error" (a C++ exception the session caught); the packet (4 +
// header + payload) is at most 256 KiB; `close` exactly when 16 bad
// requests came in a row. An ok open has exactly 2 descriptors, region 0 a
// sealed memfd of the bytes it says, region 1 `slots` slots of `slot_bytes`
// (at least the largest sample); an ok view has the mount's sample count.
// An ok batch: count <= asked, <= 4096, short only when the slot or the
// names cut it, never 0 before the view's end; payload of 24 bytes a record
// (+ 8 a member when grouped, the manifest's members); records in the
// view's order; region 0 records inside region 0 where the buffer holds the
// sample resident, region 1 records inside the slot asked for, not
// overlapping, and no resident sample staged; staged_bytes adds up; names
// are the manifest's; and the bytes at every record's location, read
// through the descriptors mapped read-only here, equal the backend file's.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "common/control_protocol.h"
#include "fs/daemon/client_session.h"
#include "fs/dataset/dataset.h"
#include "fs/views/epoch_view.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace dlfs::fs;
using nlohmann::json;
namespace stdfs = std::filesystem;

constexpr size_t kMaxPackets = 20;  // 16 bad ones after an open and a view still fit
constexpr uint32_t kDaemonUid = 4242;  // dlfsd's user, as if it ran unprivileged
constexpr uint32_t kOutsider = 60001;
constexpr size_t kMaxPacket = 256 << 10;  // the protocol's bound on a reply
constexpr char kTooLarge = '\x01';       // a packet so marked stands for one over 64 KiB

[[noreturn]] void fail(const std::string& what) { dlfs::fuzz::fail("client_fuzz", what); }

// ---- the datasets, made once ----

struct Data {
  std::unique_ptr<Dataset> ds;
  bool public_view = true;           // uid 60001 (not in group 0) may read its views
  bool all_resident = false;         // every sample lies in region 0
  std::vector<std::string> files;    // the backend files' bytes, by file id, read from disk
};

struct World {
  std::string root;
  std::map<std::string, Data> data;

  World() {
    spdlog::set_level(spdlog::level::off);  // every dataset open logs lines
    char tmpl[] = "/tmp/dlfs-fuzz-client-XXXXXX";
    if (!::mkdtemp(tmpl)) fail("mkdtemp failed");
    root = tmpl;
    ::umask(022);  // files 0644, directories 0755: readable by all on the backend
    ::chmod(root.c_str(), 0755);  // the derived audience lets others in only if they can reach the files
    std::mt19937_64 rng(17);
    const std::string long_name = std::string(150, 'l') + ".bin";
    for (const auto& [p, n] : std::vector<std::pair<std::string, size_t>>{
             {"a/b/c.bin", 1000}, {"a/empty", 0}, {"big.bin", 24 << 10}, {"sp ace.bin", 300}, {"\xff\xfe.bin", 77},
             {long_name, 5000}, {"m/one", 1}, {"m/two", 4096}, {"z/last", 12000}})
      write("files/" + p, n, rng);
    for (int i = 0; i < 40; ++i) {
      const std::string key = "grouped/s" + std::to_string(100 + i);
      write(key + ".jpg", 200 + rng() % 6000, rng);
      if (i % 3 != 0) write(key + ".cls", rng() % 40, rng);
      if (i % 5 == 1) write(key + ".meta.json", 1 + rng() % 300, rng);
    }
    const std::string deep = "fixed/" + std::string(60, 'd') + "/" + std::string(60, 'e');
    write(deep + "/part-0.rec", 16 + 7 * 6000, rng);
    write(deep + "/part-1.rec", 16 + 7 * 100, rng);

    DaemonConfig daemon;
    daemon.extent_size = 16 << 10;
    daemon.loader_threads = 1;
    {
      DatasetConfig dc = config("files");
      Data& d = open(dc, 64 << 20, daemon, true);
      d.all_resident = true;
    }
    {
      DatasetConfig dc = config("grouped");
      dc.format.group_by = dlfs::provenance::GroupRule::first_dot;
      dc.view_mode = "0440";
      dc.plan.shuffle_ratio = 1;  // no rounds: what does not fit the budget is read from the backend
      Data& d = open(dc, 0, daemon, false);  // the budget: below
      d.public_view = false;
    }
    {
      DatasetConfig dc = config("fixed");
      dc.format.format = "fixed";
      dc.format.record_size = 7;
      dc.format.header_bytes = 16;
      dc.plan.shuffle_ratio = 0.5;
      dc.plan.round_chunk = 4096;
      open(dc, 1 << 20, daemon, false);
    }
    check_setup();
  }
  ~World() {
    data.clear();
    std::error_code ec;
    stdfs::remove_all(root, ec);
  }

  void write(const std::string& rel, size_t size, std::mt19937_64& rng) {
    const std::string path = root + "/" + rel;
    stdfs::create_directories(stdfs::path(path).parent_path());
    std::string bytes(size, '\0');
    for (auto& c : bytes) c = static_cast<char>(rng());
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  DatasetConfig config(const std::string& name) const {
    DatasetConfig dc;
    dc.name = name;
    dc.backend = root + "/" + name;
    dc.plan.seed = 3;
    return dc;
  }

  Data& open(DatasetConfig dc, uint64_t budget, const DaemonConfig& daemon, bool load) {
    if (dc.name == "grouped") {  // a third of the dataset fits: the rest is read from the backend
      auto m = dlfs::provenance::Manifest::build(dc.backend, dc.format);
      if (!m) fail("cannot scan " + dc.backend + ": " + m.status().message());
      budget = m->total_bytes() / 3 / daemon.extent_size * daemon.extent_size;
      load = true;
    }
    auto ds = Dataset::open(dc, budget, daemon);
    if (!ds) fail("cannot open dataset " + dc.name + ": " + ds.status().message());
    Data& d = data[dc.name];
    d.ds = std::move(ds).value();
    if (load) {
      d.ds->start_loading();
      while (!d.ds->load_progress().done) ::usleep(1000);
    }
    const auto& m = d.ds->manifest();
    for (uint32_t f = 0; f < m.file_count(); ++f) {
      std::ifstream in(dc.backend + "/" + m.file_path(f), std::ios::binary);
      if (!in) fail("cannot read the backend file " + m.file_path(f));
      d.files.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return d;
  }

  // The datasets are what the header says, or the target checks nothing.
  void check_setup() const {
    const Reader outsider{kOutsider, kOutsider, {kOutsider}};
    for (const auto& [name, d] : data) {
      if (d.ds->audience().may_read(outsider) != d.public_view)
        fail("setup: dataset " + name + "'s audience is not as intended: " + d.ds->audience().readers);
      const auto& b = d.ds->buffer();
      uint64_t resident = 0;
      for (uint64_t i = 0; i < d.ds->manifest().sample_count(); ++i) {
        const auto s = d.ds->manifest().sample(i);
        if (s.length > 0 && b.resident_span(d.ds->manifest().sample_data_offset(i), s.length) != nullptr) ++resident;
      }
      const uint64_t nonempty = d.ds->manifest().sample_count() - (name == "files" ? 1 : 0);
      if (name == "files" && resident != nonempty) fail("setup: dataset files is not all resident");
      if (name == "grouped" && (resident == 0 || resident == nonempty))
        fail("setup: dataset grouped should be partly resident, has " + std::to_string(resident) + " of " +
             std::to_string(nonempty));
      if (name == "fixed" && (!d.ds->planner().rounds() || b.capacity_bytes() != 0))
        fail("setup: dataset fixed should run in rounds with no dataset memory");
      if (name == "grouped" && !d.ds->manifest().samples_grouped()) fail("setup: dataset grouped is not grouped");
    }
  }

  // The bytes of the byte-space range [offset, offset + length), from the backend files.
  std::string backend_bytes(const Data& d, uint64_t offset, uint64_t length) const {
    std::string out;
    d.ds->manifest().for_each_file_in(offset, offset + length, [&](uint32_t f, uint64_t b, uint64_t e) {
      const uint64_t at = b - d.ds->manifest().file_data_offset(f);
      out.append(d.files[f], at, e - b);
    });
    return out;
  }
};

World& world() {
  static World w;
  return w;
}

// ---- one connection ----

// The peer and the daemon's policy, from the input's first byte.
struct Setup {
  PeerCredentials peer;
  ClientPolicy policy;
};

Setup setup_of(uint8_t b) {
  Setup s;
  switch (b & 3) {
    case 0: s.peer = {0, 0, 1, {0}}; break;
    case 1: s.peer = {kDaemonUid, kDaemonUid, 1, {kDaemonUid}}; break;
    case 2: s.peer = {kOutsider, kOutsider, 1, {kOutsider}}; break;
    default: s.peer = {kOutsider, kOutsider, 1, {kOutsider, 0}}; break;  // in root's group
  }
  s.policy.others_allowed = (b & 4) == 0;
  s.policy.daemon_uid = kDaemonUid;
  static constexpr uint64_t kSlotBytes[] = {4096, 16 << 10, 64 << 10, 8 << 20};
  s.policy.min_slot_bytes = kSlotBytes[(b >> 3) & 3];
  static constexpr uint32_t kSlots[] = {2, 1, 3, 2};
  s.policy.slots = kSlots[(b >> 5) & 3];
  return s;
}

// A mapping of a region's descriptor, read-only, as a client makes it.
struct Mapping {
  const std::byte* base = nullptr;
  uint64_t bytes = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (base != nullptr) ::munmap(const_cast<std::byte*>(base), bytes);
  }
  void map(int fd, uint64_t n, const std::string& what) {
    bytes = n;
    if (n == 0) return;  // "a region of 0 bytes still comes with a descriptor; do not map it"
    void* p = ::mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) fail(what + ": cannot map its descriptor read-only: " + std::strerror(errno));
    base = static_cast<const std::byte*>(p);
  }
};

// A located sample a client may still read: region 0 records stay valid for
// good, region 1 records until the next request into their slot.
struct Held {
  uint16_t region = 0;
  uint64_t slot = 0, offset = 0, data_offset = 0, sample = 0;
  uint32_t length = 0;
};

// What the connection has made so far (the model the replies are checked against).
struct Connection {
  Setup setup;
  std::string dataset;  // "" until an open succeeded
  const Data* data = nullptr;
  Mapping region0, region1;
  uint64_t slot_bytes = 0;
  std::vector<std::shared_ptr<const EpochView>> views;
  int bad_in_a_row = 0;
  std::vector<Held> held;  // from earlier batches
};

constexpr size_t kMaxHeld = 8192;  // records re-checked after every request, at most

// What the protocol says a request gets: ok, or an error code; `bad`
// errors count toward the 16 in a row.
struct Expect {
  bool ok = false;
  std::string code;
  bool bad = false;
  std::string op;
  json request;
};

Expect error(const char* code, bool bad = true) { return {false, code, bad, "", {}}; }

bool is_count(const json& r, const char* key, uint64_t max, uint64_t* out = nullptr) {
  auto it = r.find(key);
  if (it == r.end()) return false;
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) return false;
  const uint64_t v = it->get<uint64_t>();
  if (out) *out = v;
  return v <= max;
}

bool may_open(const Connection& c, const Data& d) {
  const PeerCredentials& p = c.setup.peer;
  if (p.uid == 0 || p.uid == kDaemonUid) return true;
  if (!c.setup.policy.others_allowed) return false;
  // Views readable by all, or (grouped: view_mode 0440, root's) by root's group.
  return d.public_view || std::find(p.groups.begin(), p.groups.end(), 0u) != p.groups.end();
}

Expect expect(const Connection& c, std::string_view packet) {
  const json r = json::parse(packet, nullptr, false);
  if (r.is_discarded() || !r.is_object()) return error("EINVAL");
  auto op = r.find("op");
  if (op == r.end() || !op->is_string()) return error("EINVAL");
  Expect e;
  e.op = *op;
  e.request = r;
  e.ok = true;
  if (e.op == "open") {
    if (c.data != nullptr) return error("EBUSY");
    uint64_t version = 0;
    if (!is_count(r, "version", UINT32_MAX, &version)) return error("EINVAL");
    if (version != 1) return error("EPROTO");
    auto name = r.find("dataset");
    if (name == r.end() || !name->is_string()) return error("EINVAL");
    auto it = world().data.find(name->get<std::string>());
    if (it == world().data.end()) return error("ENOENT", false);
    if (!may_open(c, it->second)) return error("EACCES", false);
  } else if (e.op == "view") {
    if (c.data == nullptr) return error("EINVAL");
    uint64_t world_size = 0, rank = 0;
    if (!is_count(r, "epoch", UINT32_MAX) || !is_count(r, "world_size", UINT32_MAX, &world_size) ||
        !is_count(r, "rank", UINT32_MAX, &rank))
      return error("EINVAL");
    if (c.views.size() >= ClientSession::kMaxViews) return error("EBUSY");
    if (world_size == 0 || rank >= world_size) return error("EINVAL");
  } else if (e.op == "batch") {
    if (c.data == nullptr) return error("EINVAL");
    uint64_t view = 0;
    if (!is_count(r, "view", c.views.size(), &view) || !is_count(r, "start", UINT64_MAX) ||
        !is_count(r, "count", ClientSession::kMaxBatch) || !is_count(r, "slot", c.setup.policy.slots - 1))
      return error("EINVAL");
    if (view == 0) return error("EINVAL");
    if (auto n = r.find("names"); n != r.end() && !n->is_boolean()) return error("EINVAL");
  } else {
    return error("EINVAL");
  }
  return e;
}

std::string json_of(const json& j) { return dlfs::json_text(j); }

void check_error(const ClientReply& reply, const std::string& where, bool too_large) {
  const json& h = reply.header;
  auto code = h.find("code");
  auto message = h.find("error");
  if (code == h.end() || !code->is_string()) fail(where + ": an error without a string \"code\": " + json_of(h));
  static const std::set<std::string> documented = {"EACCES", "EINVAL", "ENOENT", "EPROTO", "EBUSY", "EIO"};
  // A request over 64 KiB is EMSGSIZE, a code docs/client-protocol.md does
  // not list (reported; accepted for that reply only).
  if (!documented.contains(code->get<std::string>()) && !(too_large && *code == "EMSGSIZE"))
    fail(where + ": error code " + code->get<std::string>() + " is not one docs/client-protocol.md lists: " +
         json_of(h));
  if (message == h.end() || !message->is_string() || message->get<std::string>().empty())
    fail(where + ": an error without an \"error\" sentence: " + json_of(h));
  if (message->get<std::string>().starts_with("internal error"))
    fail(where + ": the session caught an exception (a bug, its catch-all says): " + json_of(h));
  if (!reply.fds.empty()) fail(where + ": an error reply passes descriptors");
  if (!reply.payload.empty()) fail(where + ": an error reply has a payload");
}

uint64_t u64_at(const std::string& p, size_t at) {
  uint64_t v;
  std::memcpy(&v, p.data() + at, 8);
  return v;
}
uint32_t u32_at(const std::string& p, size_t at) {
  uint32_t v;
  std::memcpy(&v, p.data() + at, 4);
  return v;
}
uint16_t u16_at(const std::string& p, size_t at) {
  uint16_t v;
  std::memcpy(&v, p.data() + at, 2);
  return v;
}

uint64_t number_field(const json& h, const char* key, const std::string& where) {
  auto it = h.find(key);
  if (it == h.end() || !it->is_number_unsigned()) fail(where + ": no unsigned \"" + key + "\" in " + json_of(h));
  return it->get<uint64_t>();
}

void check_open(Connection& c, const Expect& e, const ClientReply& reply, const std::string& where) {
  const json& h = reply.header;
  const std::string name = e.request["dataset"];
  const Data& d = world().data.at(name);
  const Dataset& ds = *d.ds;
  if (reply.fds.size() != 2) fail(where + ": an ok open passes " + std::to_string(reply.fds.size()) + " descriptors, not 2");
  if (number_field(h, "version", where) != 1 || h.value("dataset", "") != name ||
      h.value("format", "") != ds.config().format.format || number_field(h, "samples", where) != ds.manifest().sample_count() ||
      !h.contains("grouped") || h["grouped"] != ds.manifest().samples_grouped() ||
      number_field(h, "fixed_size", where) != ds.manifest().fixed_record_size())
    fail(where + ": the open reply does not describe dataset " + name + ": " + json_of(h));
  const json regions = h.value("regions", json());
  if (!regions.is_array() || regions.size() != 2 || !regions[0].is_object() || !regions[1].is_object() ||
      regions[0].value("region", -1) != 0 || regions[1].value("region", -1) != 1)
    fail(where + ": regions are not [region 0, region 1]: " + json_of(h));
  const uint64_t bytes0 = number_field(regions[0], "bytes", where);
  const uint64_t bytes1 = number_field(regions[1], "bytes", where);
  const uint64_t slots = number_field(regions[1], "slots", where);
  c.slot_bytes = number_field(regions[1], "slot_bytes", where);
  if (bytes0 != ds.buffer().capacity_bytes())
    fail(where + ": region 0 has " + std::to_string(bytes0) + " bytes, the dataset memory " +
         std::to_string(ds.buffer().capacity_bytes()));
  if (slots != c.setup.policy.slots || c.slot_bytes < c.setup.policy.min_slot_bytes ||
      c.slot_bytes < ds.largest_sample() || c.slot_bytes % 4096 != 0 || bytes1 != slots * c.slot_bytes)
    fail(where + ": region 1 is not the policy's slots of at least the largest sample: " + json_of(regions[1]));
  for (int i = 0; i < 2; ++i) {
    struct stat st {};
    if (::fstat(reply.fds[i], &st) != 0) fail(where + ": descriptor of region " + std::to_string(i) + " is not open");
    if (static_cast<uint64_t>(st.st_size) < (i == 0 ? bytes0 : bytes1))
      fail(where + ": region " + std::to_string(i) + "'s file is smaller than the bytes the reply says");
  }
  const int seals = ::fcntl(reply.fds[0], F_GET_SEALS);
  const int want = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE;
  if (seals < 0 || (seals & want) != want) fail(where + ": region 0 is not a sealed memfd");
  c.region0.map(reply.fds[0], bytes0, where + ": region 0");
  c.region1.map(reply.fds[1], bytes1, where + ": region 1");
  c.dataset = name;
  c.data = &d;
}

void check_view(Connection& c, const Expect& e, const ClientReply& reply, const std::string& where) {
  const json& h = reply.header;
  const json& r = e.request;
  const ViewKey key{r["epoch"].get<uint32_t>(), r["world_size"].get<uint32_t>(), r["rank"].get<uint32_t>()};
  auto v = EpochView::build(*c.data->ds, key);
  if (!v) fail(where + ": the session made a view the target cannot: " + v.status().message());
  c.views.push_back(*v);
  if (number_field(h, "view", where) != c.views.size())
    fail(where + ": view id " + json_of(h["view"]) + ", expected " + std::to_string(c.views.size()));
  if (number_field(h, "samples", where) != (*v)->count() || number_field(h, "rounds", where) != (*v)->rounds())
    fail(where + ": the view's samples or rounds differ from the mount's: " + json_of(h));
}

void check_batch(Connection& c, const Expect& e, const ClientReply& reply, const std::string& where) {
  const json& h = reply.header;
  const json& r = e.request;
  const Data& d = *c.data;
  const Dataset& ds = *d.ds;
  const auto& m = ds.manifest();
  const bool grouped = m.samples_grouped();
  const EpochView& v = *c.views.at(r["view"].get<uint64_t>() - 1);
  const uint64_t start = r["start"], asked = r["count"], slot = r["slot"];
  const bool names = r.value("names", false);
  const uint64_t count = number_field(h, "count", where);
  if (number_field(h, "start", where) != start) fail(where + ": reply start differs from the request's");
  const uint64_t left = start < v.count() ? v.count() - start : 0;
  if (count > asked || count > ClientSession::kMaxBatch || count > left)
    fail(where + ": count " + std::to_string(count) + " for " + std::to_string(asked) + " asked, " +
         std::to_string(left) + " left in the view");
  if (count == 0 && asked > 0 && left > 0) fail(where + ": count 0 before the view's end");
  // Records, then members.
  const std::string& p = reply.payload;
  if (p.size() < 24 * count) fail(where + ": payload of " + std::to_string(p.size()) + " bytes for " +
                                  std::to_string(count) + " records");
  uint64_t members = 0;
  for (uint64_t i = 0; i < count; ++i) members += u16_at(p, 24 * i + 22);
  if (p.size() != 24 * count + (grouped ? 8 * members : 0))
    fail(where + ": payload of " + std::to_string(p.size()) + " bytes for " + std::to_string(count) + " records and " +
         std::to_string(members) + " members (grouped: " + (grouped ? "yes" : "no") + ")");
  const json name_list = h.value("names", json());
  if (names != h.contains("names") || (names && (!name_list.is_array() || name_list.size() != count)))
    fail(where + ": names asked " + (names ? "yes" : "no") + ", reply: " + json_of(h).substr(0, 300));
  const uint64_t slot_begin = slot * c.slot_bytes, slot_end = slot_begin + c.slot_bytes;
  std::vector<std::pair<uint64_t, uint64_t>> staged_spans;
  uint64_t staged = 0;
  size_t member_at = 24 * count;
  for (uint64_t i = 0; i < count; ++i) {
    const std::string at = where + ": record " + std::to_string(i);
    const uint64_t offset = u64_at(p, 24 * i), id = u64_at(p, 24 * i + 8);
    const uint32_t length = u32_at(p, 24 * i + 16);
    const uint16_t region = u16_at(p, 24 * i + 20), n_members = u16_at(p, 24 * i + 22);
    if (id != v.sample_at(start + i))
      fail(at + ": sample " + std::to_string(id) + ", the view has " + std::to_string(v.sample_at(start + i)));
    const auto loc = m.sample(id);
    if (length != loc.length) fail(at + ": length " + std::to_string(length) + ", the sample has " + std::to_string(loc.length));
    const uint64_t data_offset = m.sample_data_offset(id);
    const std::byte* resident = length == 0 ? nullptr : ds.buffer().resident_span(data_offset, length);
    const std::byte* bytes = nullptr;
    if (region == 0) {
      if (offset > c.region0.bytes || length > c.region0.bytes - offset)
        fail(at + ": [" + std::to_string(offset) + ", +" + std::to_string(length) + ") is outside region 0 of " +
             std::to_string(c.region0.bytes) + " bytes");
      if (length > 0 && resident != ds.buffer().memory_base() + offset)
        fail(at + ": located in region 0 at " + std::to_string(offset) + ", where the dataset memory does not hold it");
      bytes = c.region0.base + offset;
    } else if (region == 1) {
      if (offset < slot_begin || offset > slot_end || length > slot_end - offset)
        fail(at + ": [" + std::to_string(offset) + ", +" + std::to_string(length) + ") is outside slot " +
             std::to_string(slot) + " [" + std::to_string(slot_begin) + ", " + std::to_string(slot_end) + ")");
      if (resident != nullptr) fail(at + ": sample " + m.sample_name(id) + " is resident in region 0, but was staged");
      staged += length;
      if (length > 0) staged_spans.emplace_back(offset, offset + length);
      bytes = c.region1.base + offset;
    } else {
      fail(at + ": region " + std::to_string(region));
    }
    if (d.all_resident && length > 0 && region != 0) fail(at + ": a sample of a loaded dataset is not in region 0");
    const std::string want = world().backend_bytes(d, data_offset, length);
    if (want.size() != length) fail(at + ": the backend has " + std::to_string(want.size()) + " bytes of it");
    if (length > 0 && std::memcmp(bytes, want.data(), length) != 0)
      fail(at + ": sample " + m.sample_name(id) + "'s bytes in region " + std::to_string(region) + " at " +
           std::to_string(offset) + " differ from the backend's");
    if (length > 0 && c.held.size() < kMaxHeld) c.held.push_back({region, slot, offset, data_offset, id, length});
    if (!grouped) {
      if (n_members != 1) fail(at + ": " + std::to_string(n_members) + " members, not grouped");
      if (names && name_list[i] != m.member_name(id))
        fail(at + ": name " + json_of(name_list[i]) + ", the manifest's is " + json_of(m.member_name(id)));
      continue;
    }
    if (n_members != m.sample_member_count(id))
      fail(at + ": " + std::to_string(n_members) + " members, the manifest has " + std::to_string(m.sample_member_count(id)));
    if (names && (!name_list[i].is_array() || name_list[i].size() != n_members))
      fail(at + ": names " + json_of(name_list[i]) + " for " + std::to_string(n_members) + " members");
    for (uint32_t j = 0; j < n_members; ++j, member_at += 8) {
      const uint32_t mo = u32_at(p, member_at), ml = u32_at(p, member_at + 4);
      const auto member = m.sample_member(id, j);
      if (mo != member.offset || ml != member.length || mo > length || ml > length - mo)
        fail(at + ": member " + std::to_string(j) + " (" + std::to_string(mo) + ", " + std::to_string(ml) +
             ") in a sample of " + std::to_string(length) + " bytes; the manifest's is (" + std::to_string(member.offset) +
             ", " + std::to_string(member.length) + ")");
      if (names && name_list[i][j] != member.name)
        fail(at + ": member name " + json_of(name_list[i][j]) + ", the manifest's is " + json_of(member.name));
    }
  }
  if (number_field(h, "staged_bytes", where) != staged)
    fail(where + ": staged_bytes " + json_of(h["staged_bytes"]) + ", the records stage " + std::to_string(staged));
  std::sort(staged_spans.begin(), staged_spans.end());
  for (size_t i = 1; i < staged_spans.size(); ++i)
    if (staged_spans[i].first < staged_spans[i - 1].second) fail(where + ": staged samples overlap in the slot");
  // Short only where the slot is full (the next sample, not in region 0, would
  // not fit) or the names fill the reply.
  if (count < std::min(asked, left) && !names) {
    const uint64_t next_id = v.sample_at(start + count), next = m.sample(next_id).length;
    const bool next_resident = next > 0 && ds.buffer().resident_span(m.sample_data_offset(next_id), next) != nullptr;
    if (next_resident || staged + next <= c.slot_bytes)
      fail(where + ": a short batch (" + std::to_string(count) + " of " + std::to_string(std::min(asked, left)) +
           ") though the next sample (" + std::to_string(next) + " bytes" + (next_resident ? ", in region 0" : "") +
           ") fits the slot (" + std::to_string(staged) + " of " + std::to_string(c.slot_bytes) + " used)");
  }
}


// Samples located earlier still have their bytes where their records said.
void check_held(const Connection& c, const std::string& where) {
  for (const Held& h : c.held) {
    const std::byte* p = (h.region == 0 ? c.region0.base : c.region1.base) + h.offset;
    const std::string want = world().backend_bytes(*c.data, h.data_offset, h.length);
    if (std::memcmp(p, want.data(), h.length) != 0)
      fail(where + ": sample " + c.data->ds->manifest().sample_name(h.sample) + ", located earlier in region " +
           std::to_string(h.region) + (h.region == 1 ? " slot " + std::to_string(h.slot) : "") + " at " +
           std::to_string(h.offset) + ", changed before the client's next request into its slot");
  }
}

// A batch request into a slot ends what the slot held (whatever its reply).
void drop_slot(Connection& c, std::string_view packet) {
  const json r = json::parse(packet, nullptr, false);
  if (r.is_discarded() || !r.is_object() || r.value("op", json()) != "batch") return;
  auto slot = r.find("slot");
  if (slot == r.end() || !slot->is_number_integer()) return;
  std::erase_if(c.held, [&](const Held& h) { return h.region == 1 && json(h.slot) == *slot; });
}

void run_packet(ClientSession& session, Connection& c, std::string_view packet, size_t index, bool& closed) {
  const std::string where = "packet " + std::to_string(index) + " " + std::string(packet.substr(0, 200));
  const bool too_large = !packet.empty() && packet[0] == kTooLarge;
  const Expect e = too_large ? error("EMSGSIZE") : expect(c, packet);
  if (!too_large) drop_slot(c, packet);
  ClientReply reply;
  try {
    reply = too_large ? session.too_large() : session.handle(packet);
  } catch (const std::exception& ex) {
    fail(where + ": handle threw " + ex.what());
  }
  const json& h = reply.header;
  if (!h.is_object() || !h.contains("ok") || !h["ok"].is_boolean()) fail(where + ": reply header without a boolean ok");
  const std::string header = json_of(h);
  static const bool trace = std::getenv("DLFS_FUZZ_CLIENT_TRACE") != nullptr;  // to read a finding's exchange
  if (trace) {
    std::fprintf(stderr, "> %.*s\n< %s (+%zu bytes, %zu fds%s)\n", static_cast<int>(std::min<size_t>(packet.size(), 300)),
                 packet.data(), header.substr(0, 300).c_str(), reply.payload.size(), reply.fds.size(),
                 reply.close ? ", close" : "");
  }
  const size_t packet_bytes = 4 + header.size() + reply.payload.size();
  if (packet_bytes > kMaxPacket)
    fail(where + ": a reply packet of " + std::to_string(packet_bytes) + " bytes, over 256 KiB");
  const bool ok = h["ok"];
  if (!ok) check_error(reply, where, too_large);
  const std::string code = ok ? "" : h["code"].get<std::string>();
  if (ok != e.ok || (!ok && code != e.code))
    fail(where + ": expected " + (e.ok ? "ok" : e.code) + ", got " + header.substr(0, 400));
  if (ok) {
    if (e.op == "open") check_open(c, e, reply, where);
    else if (e.op == "view") check_view(c, e, reply, where);
    else check_batch(c, e, reply, where);
    if (e.op != "open" && !reply.fds.empty()) fail(where + ": a " + e.op + " reply passes descriptors");
    if (e.op != "batch" && !reply.payload.empty()) fail(where + ": a " + e.op + " reply has a payload");
  }
  check_held(c, where);
  if (ok) c.bad_in_a_row = 0;
  else if (e.bad) ++c.bad_in_a_row;
  const bool want_close = c.bad_in_a_row >= ClientSession::kMaxBadInARow;
  if (reply.close != want_close)
    fail(where + ": close is " + (reply.close ? "set" : "not set") + " after " + std::to_string(c.bad_in_a_row) +
         " bad requests in a row");
  closed = reply.close;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (size_t at = 0;;) {
    size_t end = s.find(sep, at);
    out.push_back(s.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
    if (end == std::string_view::npos) return out;
    at = end + 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  World& w = world();
  Connection c;
  c.setup = setup_of(data[0]);
  ClientCounters counters;
  ClientSession session(c.setup.peer, c.setup.policy, [&w](const std::string& name) -> dlfs::Result<const Dataset*> {
    auto it = w.data.find(name);
    if (it == w.data.end()) return dlfs::Status(ENOENT, "no dataset named '" + name + "'");
    return it->second.ds.get();
  }, counters);
  const auto packets = split(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1), '\n');
  bool closed = false;
  // An empty packet reads as the client's EOF (recv returns 0): the server drops the connection.
  for (size_t i = 0; i < packets.size() && i < kMaxPackets && !closed && !packets[i].empty(); ++i)
    run_packet(session, c, packets[i], i, closed);
  return 0;
}

std::vector<dlfs::fuzz::Seed> dlfs::fuzz::seeds() {
  auto packet = [](const json& j) { return j.dump() + "\n"; };
  auto open = [&](const std::string& ds) { return packet({{"op", "open"}, {"version", 1}, {"dataset", ds}}); };
  auto view = [&](uint64_t epoch, uint64_t w, uint64_t r) {
    return packet({{"op", "view"}, {"epoch", epoch}, {"world_size", w}, {"rank", r}});
  };
  auto batch = [&](uint64_t v, uint64_t start, uint64_t count, uint64_t slot, bool names) {
    return packet({{"op", "batch"}, {"view", v}, {"start", start}, {"count", count}, {"slot", slot}, {"names", names}});
  };
  // The first byte: bits 0-1 the peer (root, dlfsd's user, 60001, 60001 in group 0), bit 2 allow_other
  // off, bits 3-4 the smallest slot (4 KiB, 16 KiB, 64 KiB, 8 MiB), bits 5-6 the slots (2, 1, 3, 2).
  auto cfg = [](uint8_t b) { return std::string(1, static_cast<char>(b)); };
  std::vector<Seed> out;
  for (std::string ds : {"files", "grouped", "fixed"})
    for (bool names : {false, true})
      for (uint64_t slot : {0ull, 1ull}) {
        const std::string name = ds + (names ? "_names" : "") + "_slot" + std::to_string(slot);
        out.push_back({name, cfg(0) + open(ds) + view(0, 1, 0) + batch(1, 0, 4096, slot, names) +
                                 batch(1, 10, 100, slot, names) + view(3, 3, 2) + batch(2, 0, 7, 1 - slot, names) +
                                 batch(2, 5, 4096, slot, names) + batch(1, 4000, 4096, slot, names)});
      }
  const std::string bad16 = [&] {
    std::string s;
    for (int i = 0; i < 16; ++i) s += packet({{"op", "batch"}, {"view", 0}});
    return s;
  }();
  out.push_back({"daemon_user_grouped", cfg(1 | 4) + open("grouped") + view(1, 2, 1) + batch(1, 0, 50, 1, true)});
  out.push_back({"outsider_public", cfg(2 | (1 << 3)) + open("fixed") + view(2, 1, 0) + batch(1, 0, 4096, 0, false)});
  out.push_back({"outsider_refused", cfg(2) + open("grouped") + open("files") + view(0, 1, 0) + batch(1, 0, 9, 1, false)});
  out.push_back({"outsider_group0", cfg(3) + open("grouped") + view(0, 1, 0) + batch(1, 0, 9, 1, true)});
  out.push_back({"others_not_allowed", cfg(2 | 4) + open("files") + cfg(0) + open("files")});
  out.push_back({"big_slots", cfg(3 << 3 | 2 << 5) + open("fixed") + view(0, 1, 0) + batch(1, 0, 4096, 2, true)});
  out.push_back({"malformed", cfg(0) + "not json\n[1,2]\n{}\n{\"op\": 7}\n{\"op\": \"close\"}\n" +
                                  packet({{"op", "open"}, {"version", 2}, {"dataset", "files"}}) +
                                  packet({{"op", "open"}, {"version", -1}, {"dataset", "files"}}) +
                                  packet({{"op", "open"}, {"version", 1}}) + open("nope") + view(0, 1, 0) + open("files") +
                                  open("files") + view(0, 0, 0) + view(0, 2, 2) + batch(1, 0, 1, 0, false) +
                                  view(0, 1, 0) +
                                  packet({{"op", "batch"}, {"view", 1}, {"start", 0}, {"count", 4097}, {"slot", 0}}) +
                                  packet({{"op", "batch"}, {"view", 1}, {"start", 0}, {"count", 1}, {"slot", 9}}) +
                                  packet({{"op", "batch"}, {"view", 1}, {"start", 0}, {"count", 1}, {"slot", 0}, {"names", "yes"}}) +
                                  packet({{"op", "batch"}, {"view", 1}, {"start", 0}, {"count", 1.0}, {"slot", 0}})});
  out.push_back({"past_the_end", cfg(0) + open("grouped") + view(0, 1, 0) + batch(1, 1ull << 63, 10, 0, false) +
                                     batch(1, 39, 10, 1, true) + batch(1, 0, 0, 0, false) + view(4294967295u, 4294967295u, 0) +
                                     batch(2, 0, 5, 0, true)});
  out.push_back({"bad_in_a_row", cfg(0) + open("files") + view(0, 1, 0) + bad16});
  out.push_back({"too_large", cfg(0) + std::string(1, kTooLarge) + "\n" + open("files")});
  return out;
}
