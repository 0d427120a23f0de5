// The C API (dlfs_client.h) over Connection: reconnects, the slot rotation
// and the validity of what batches return.
#include "client/dlfs_client.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <new>
#include <optional>
#include <thread>

#include "client/connection.h"
#include "client/discover.h"

using dlfs::client::Connection;
using dlfs::client::DatasetInfo;
using dlfs::client::Failure;
using dlfs::client::Located;
using Clock = std::chrono::steady_clock;

struct dlfs_client {
  std::string dataset_dir;  // set: the socket is found again from it at each reconnect
  std::string socket_path;
  std::string dataset;
  double reconnect_timeout = 30.0;

  std::unique_ptr<Connection> conn;  // null after a reconnect that failed
  DatasetInfo info;                  // the latest open's
  // Connections the daemon went away from (or that had their 64 views):
  // their mappings hold samples already returned. The staging memory is
  // released once its validity window has passed; the dataset memory stays
  // until close, as dlfs_client_batch promises.
  struct Retired {
    std::unique_ptr<Connection> conn;
    uint64_t at_call;
    uint32_t slots;
  };
  std::vector<Retired> retired;

  bool have_view = false;
  uint32_t epoch = 0, world_size = 0, rank = 0;
  uint64_t view_samples = 0;

  uint64_t calls = 0;  // dlfs_client_batch calls so far
  uint32_t next_slot = 0;
  std::vector<std::vector<dlfs_member>> slot_members;  // per slot: its call's members
  std::vector<Located> located;                     // scratch of one call

  std::string error;
};

namespace {

// The dataset must be the one the client opened first: positions of a view
// would otherwise name other samples.
void check_same_dataset(const dlfs_client* c, const DatasetInfo& now) {
  if (now.samples != c->info.samples || now.grouped != c->info.grouped)
    dlfs::client::fail(ESTALE, "dataset '" + c->dataset + "' changed while dlfsd was away: " +
                                   std::to_string(c->info.samples) + (c->info.grouped ? " grouped" : "") +
                                   " samples before, " + std::to_string(now.samples) +
                                   (now.grouped ? " grouped" : "") + " now");
}

// Replaces the connection (the old one's mappings are kept), opens the
// dataset and the selected view again; waits for a daemon that is away until
// `deadline`. `why` says why, for the message when it does not come back.
void reconnect(dlfs_client* c, const std::string& why, Clock::time_point deadline) {
  if (c->conn) {
    c->conn->close_socket();
    c->retired.push_back({std::move(c->conn), c->calls, c->info.slots});
  }
  auto pause = std::chrono::milliseconds(50);
  std::string last = why;
  for (;;) {
    try {
      std::string path = c->dataset_dir.empty() ? c->socket_path : dlfs::client::discover(c->dataset_dir).socket_path;
      auto conn = std::make_unique<Connection>(path, c->dataset);
      check_same_dataset(c, conn->info());
      if (c->have_view) {
        auto v = conn->view(c->epoch, c->world_size, c->rank);
        if (v.samples != c->view_samples)
          dlfs::client::fail(ESTALE, "view epochs/" + std::to_string(c->epoch) + "/" + std::to_string(c->world_size) +
                                         "/" + std::to_string(c->rank) + " of dataset '" + c->dataset +
                                         "' changed while dlfsd was away: " + std::to_string(c->view_samples) +
                                         " samples before, " + std::to_string(v.samples) + " now");
      }
      c->socket_path = path;
      c->info = conn->info();
      c->conn = std::move(conn);
      return;
    } catch (const Failure& f) {
      if (!f.lost) throw;
      last = f.message;
    }
    if (Clock::now() + pause > deadline) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", c->reconnect_timeout);
      dlfs::client::lost(ECONNRESET, "dlfsd went away (" + why + ") and did not come back within " + secs +
                                         " s: " + last);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
}

Clock::time_point deadline_of(const dlfs_client* c) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(c->reconnect_timeout));
}

// Runs one request, reconnecting and repeating it while the daemon is away.
template <class F>
auto retrying(dlfs_client* c, F&& request) -> decltype(request()) {
  std::optional<Clock::time_point> deadline;
  for (;;) {
    try {
      if (!c->conn) reconnect(c, "an earlier reconnect failed", *(deadline = deadline.value_or(deadline_of(c))));
      return request();
    } catch (const Failure& f) {
      if (!f.lost) throw;
      if (!deadline) deadline = deadline_of(c);
      reconnect(c, f.message, *deadline);
    }
  }
}

// Staging memory of retired connections whose samples are past their
// validity window (see dlfs_client_batch in the header).
void release_retired_staging(dlfs_client* c) {
  for (auto& r : c->retired)
    if (r.slots != UINT32_MAX && c->calls - r.at_call >= std::max<uint32_t>(r.slots, 1)) {
      r.conn->release_staging();
      r.slots = UINT32_MAX;  // released
    }
}

// Runs an API call's body: a Failure or any other exception becomes the
// error message and a negative errno; nothing escapes into C.
template <class F>
int guarded(std::string& error, F&& body) {
  try {
    body();
    return 0;
  } catch (const Failure& f) {
    error = f.message;
    return -(f.code > 0 ? f.code : EIO);
  } catch (const std::bad_alloc&) {
    error = "out of memory";
    return -ENOMEM;
  } catch (const std::exception& e) {
    error = std::string("unexpected error: ") + e.what();
    return -EIO;
  } catch (...) {
    error = "unexpected error";
    return -EIO;
  }
}

void copy_error(const std::string& message, char* err, size_t err_len) {
  if (err != nullptr && err_len > 0) std::snprintf(err, err_len, "%s", message.c_str());
}

dlfs_client* make_client(std::unique_ptr<dlfs_client> c, char* err, size_t err_len) {
  int rc = guarded(c->error, [&] {
    c->conn = std::make_unique<Connection>(c->socket_path, c->dataset);
    c->info = c->conn->info();
  });
  if (rc != 0) {
    copy_error(c->error, err, err_len);
    return nullptr;
  }
  copy_error("", err, err_len);
  return c.release();
}

}  // namespace

extern "C" {

dlfs_client* dlfs_client_open(const char* dataset_dir, char* err, size_t err_len) {
  std::string error;
  std::unique_ptr<dlfs_client> c;
  int rc = guarded(error, [&] {
    if (dataset_dir == nullptr || *dataset_dir == '\0') dlfs::client::fail(EINVAL, "no dataset directory given");
    auto endpoint = dlfs::client::discover(dataset_dir);
    c = std::make_unique<dlfs_client>();
    c->dataset_dir = dataset_dir;
    c->socket_path = endpoint.socket_path;
    c->dataset = endpoint.dataset;
  });
  if (rc != 0) {
    copy_error(error, err, err_len);
    return nullptr;
  }
  return make_client(std::move(c), err, err_len);
}

dlfs_client* dlfs_client_connect(const char* socket_path, const char* dataset, char* err, size_t err_len) {
  if (socket_path == nullptr || dataset == nullptr) {
    copy_error("dlfs_client_connect: no socket path or no dataset name given", err, err_len);
    return nullptr;
  }
  std::unique_ptr<dlfs_client> c;
  try {
    c = std::make_unique<dlfs_client>();
    c->socket_path = socket_path;
    c->dataset = dataset;
  } catch (...) {
    copy_error("out of memory", err, err_len);
    return nullptr;
  }
  return make_client(std::move(c), err, err_len);
}

int dlfs_client_view(dlfs_client* c, uint32_t epoch, uint32_t world_size, uint32_t rank, uint64_t* samples) {
  if (c == nullptr) return -EINVAL;
  c->error.clear();
  return guarded(c->error, [&] {
    c->have_view = false;  // until this one is
    if (c->conn && c->conn->views_full(epoch, world_size, rank))
      reconnect(c, "a fresh connection for more than 64 views", deadline_of(c));
    auto v = retrying(c, [&] { return c->conn->view(epoch, world_size, rank); });
    c->have_view = true;
    c->epoch = epoch;
    c->world_size = world_size;
    c->rank = rank;
    c->view_samples = v.samples;
    if (samples != nullptr) *samples = v.samples;
  });
}

int dlfs_client_batch(dlfs_client* c, uint64_t start, uint32_t count, dlfs_sample* out, uint32_t* got) {
  if (got != nullptr) *got = 0;
  if (c == nullptr) return -EINVAL;
  c->error.clear();
  c->located.clear();
  uint32_t slot = 0;
  int rc = guarded(c->error, [&] {
    if (!c->have_view) dlfs::client::fail(EINVAL, "no view selected: call dlfs_client_view first");
    if (out == nullptr && count > 0) dlfs::client::fail(EINVAL, "dlfs_client_batch: out is NULL");
    ++c->calls;
    release_retired_staging(c);
    const uint32_t slots = std::max<uint32_t>(c->info.slots, 1);
    slot = c->next_slot % slots;
    c->next_slot = (slot + 1) % slots;
    if (c->slot_members.size() < slots) c->slot_members.resize(slots);
    c->slot_members[slot].clear();
    uint64_t pos = start;
    while (c->located.size() < count && pos < c->view_samples) {
      const uint32_t ask = std::min<uint32_t>(count - static_cast<uint32_t>(c->located.size()),
                                              dlfs::client::kMaxBatchCount);
      auto r = retrying(c, [&] {
        uint32_t view = c->conn->view(c->epoch, c->world_size, c->rank).id;
        return c->conn->batch(view, pos, ask, slot, c->located, c->slot_members[slot]);
      });
      if (r.count == 0)
        dlfs::client::fail(EPROTO, "dlfsd's batch reply has 0 samples at position " + std::to_string(pos) +
                                       " of a view of " + std::to_string(c->view_samples));
      pos += r.count;
      // Asking again into this slot would overwrite what the daemon just
      // copied there; the next call takes the next slot.
      if (r.staged) break;
    }
  });
  // Samples located before an error are valid too: hand them over.
  for (size_t i = 0; i < c->located.size(); ++i) {
    const Located& l = c->located[i];
    out[i] = dlfs_sample{l.data, l.length, l.sample, l.members, c->slot_members[slot].data() + l.member_index};
  }
  if (got != nullptr) *got = static_cast<uint32_t>(c->located.size());
  return rc;
}

void dlfs_client_set_reconnect_timeout(dlfs_client* c, double seconds) {
  if (c != nullptr) c->reconnect_timeout = seconds > 0 ? std::min(seconds, 1e7) : 0.0;  // NaN and negatives: 0
}

uint64_t dlfs_client_samples(const dlfs_client* c) { return c ? c->info.samples : 0; }
const char* dlfs_client_dataset(const dlfs_client* c) { return c ? c->info.name.c_str() : ""; }
const char* dlfs_client_format(const dlfs_client* c) { return c ? c->info.format.c_str() : ""; }
int dlfs_client_grouped(const dlfs_client* c) { return c && c->info.grouped ? 1 : 0; }
uint64_t dlfs_client_fixed_size(const dlfs_client* c) { return c ? c->info.fixed_size : 0; }
uint32_t dlfs_client_slots(const dlfs_client* c) { return c ? c->info.slots : 0; }
uint64_t dlfs_client_slot_bytes(const dlfs_client* c) { return c ? c->info.slot_bytes : 0; }
const char* dlfs_client_error(const dlfs_client* c) { return c ? c->error.c_str() : "no client (NULL)"; }

void dlfs_client_close(dlfs_client* c) { delete c; }

}  // extern "C"
