#include "fs/kernel/fuse_ops.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "fs/kernel/session_state.h"
#include "fs/kernel/wire/fuse_wire.h"

namespace dlfs::fs {
namespace {

constexpr uint32_t kMiB = 1u << 20;

// libfuse hands back the userdata as it was given: a WireUser* (fuse_wire.h).
SessionState& state_of(void* userdata) { return static_cast<SessionState&>(*static_cast<WireUser*>(userdata)); }
SessionState& ctx(fuse_req_t req) { return state_of(fuse_req_userdata(req)); }

// A request as it arrives: counted at once; replied() records its latency
// (fs/kernel/fuse_counters.h). A parked request's replay calls it after its
// reply, so the wait for the dataset counts. Copied into replays: it holds
// the session state, never the request (gone once answered).
struct Arrival {
  SessionState& c;
  FuseOp op;
  std::chrono::steady_clock::time_point at;
  void replied() const { c.counters.observe(op, std::chrono::steady_clock::now() - at); }
};
Arrival arrive(fuse_req_t req, FuseOp op) {
  SessionState& c = ctx(req);
  c.counters.add(op);
  return Arrival{c, op, std::chrono::steady_clock::now()};
}

struct stat to_stat(const Attr& a) {
  struct stat st {};
  st.st_ino = a.ino;
  st.st_mode = a.mode;
  st.st_nlink = a.nlink;
  st.st_size = static_cast<off_t>(a.size);
  st.st_uid = a.uid;
  st.st_gid = a.gid;
  st.st_blksize = kMiB;  // hints readers (and cp, tar) to use 1 MiB reads
  st.st_blocks = static_cast<blkcnt_t>((a.size + 511) / 512);
  st.st_mtim.tv_sec = a.mtime_ns / 1000000000;
  st.st_mtim.tv_nsec = a.mtime_ns % 1000000000;
  st.st_ctim = st.st_mtim;
  st.st_atim = st.st_mtim;
  return st;
}

fuse_entry_param to_entry(const Attr& a, const FuseOptions& o) {
  fuse_entry_param e{};
  e.ino = a.ino;
  e.generation = 1;
  e.attr = to_stat(a);
  e.attr_timeout = o.attr_timeout_s;
  // A generated file's name must be looked up again at the next open.
  e.entry_timeout = a.fresh_each_lookup ? 0 : o.entry_timeout_s;
  return e;
}

// Failures other than "not found" are worth a line in the log, with the
// process that asked (a user's training job is easier to find by pid).
void reply_error(fuse_req_t req, const Status& s, const char* op) {
  if (s.err() != ENOENT) spdlog::debug("{} by pid {}: {}", op, fuse_req_ctx(req)->pid, s.message());
  fuse_reply_err(req, s.err());
}

// Catch-all guard: a C callback must never let an exception escape.
template <typename F>
void guarded(fuse_req_t req, const char* op, F&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    spdlog::error("{} by pid {}: unexpected exception: {}", op, fuse_req_ctx(req)->pid, e.what());
    fuse_reply_err(req, EIO);
  } catch (...) {
    spdlog::error("{} by pid {}: unexpected exception", op, fuse_req_ctx(req)->pid);
    fuse_reply_err(req, EIO);
  }
}

// A request inside a dataset whose scan (or cluster join) is not done is
// parked with its replay and the worker goes back to the queue: the replay
// runs, and answers, when the dataset is ready (or failed: EIO). Workers never
// block on a scan, so /.dlfs/stats and ready datasets answer meanwhile
// however many readers wait (fs/dataset/dataset_slot.h).
// answer() runs `body` (which replies) now, or parks a copy of it as the
// replay; either way the latency is recorded after the reply. The copy (and
// its std::function) is made only for a request that parks, never on the
// common path. Bodies capture by value: a replay runs after the op returned.
template <class Body>
void answer(fuse_req_t req, fuse_ino_t ino, bool attr_only, const Arrival& a, Body body) {
  if (const DatasetSlot* slot = ctx(req).ns.unsettled_slot(ino, attr_only)) {
    if (slot->park([a, replay = body]() mutable {
          replay();
          a.replied();
        }))
      return;
  }
  body();
  a.replied();
}

void op_init(void* userdata, fuse_conn_info* conn) {
  SessionState& c = state_of(userdata);
  // Nothing is kept per open (every file reads by inode, fs/namespace/namespace.h): a
  // kernel that can do without OPEN/RELEASE and OPENDIR/RELEASEDIR is told
  // so by the first ENOSYS answer (op_open, op_opendir) and stops sending
  // them: a reader's open/read/close of a cached file costs no round trip.
  // FLUSH goes the same way (op_flush). Both are capabilities only: there is
  // nothing to ask for in `want`.
  c.kernel_skips_open = (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) != 0;
  c.kernel_skips_opendir = (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) != 0;
  // 1 MiB requests: the largest libfuse 3.14 allows.
  conn->max_read = kMiB;  // must match the max_read mount option
  conn->max_readahead = kMiB;
  conn->max_write = kMiB;  // also sets the kernel's max_pages, which bounds read requests
  if (conn->capable & FUSE_CAP_READDIRPLUS) conn->want |= FUSE_CAP_READDIRPLUS;
  conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;  // always plus: find/ls -l get attrs in one go
  if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) {
    conn->want |= FUSE_CAP_PARALLEL_DIROPS;
    ask_parallel_dirops_in_init_reply();  // libfuse 3.14 leaves it out of the reply (fs/kernel/wire/fuse_wire.h)
  }
  // The data never changes: no need to invalidate on mtime changes.
  conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;  // also: the kernel takes no passthrough with it
  // Raw files not in memory yet are read by the kernel from the backend
  // while datasets load (fs/kernel/backing_files.h); the INIT reply, written
  // after this returns on this thread, asks for it.
  const WireState& w = c.wire;
  if (w.passthrough.wanted && w.passthrough.offered.load(std::memory_order_acquire)) ask_passthrough_in_init_reply();
  // Requests through one io_uring queue per CPU (fs/kernel/wire/fuse_uring.h).
  if (w.uring.wanted && w.uring.offered.load(std::memory_order_acquire)) ask_uring_in_init_reply();
  // max_background stays at the kernel's default: raising it to 64 made cold
  // sequential reads ~20% slower here (more readahead requests in flight than
  // two cores can serve), measured with tools/bench/run_bench.py.
}

// Who sent `req`: its uid and gid, and its supplementary groups (libfuse
// reads them from /proc; none if the process is gone).
Reader reader_of(fuse_req_t req) {
  const fuse_ctx* fc = fuse_req_ctx(req);
  Reader r{fc->uid, fc->gid, {}};
  std::vector<gid_t> groups(64);
  int n = fuse_req_getgroups(req, static_cast<int>(groups.size()), groups.data());
  if (n > static_cast<int>(groups.size())) {
    groups.resize(static_cast<size_t>(n));
    n = fuse_req_getgroups(req, static_cast<int>(groups.size()), groups.data());
  }
  for (int i = 0; i < n && i < static_cast<int>(groups.size()); ++i) r.groups.push_back(groups[static_cast<size_t>(i)]);
  return r;
}

void do_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  guarded(req, "lookup", [&] {
    SessionState& c = ctx(req);  // req is gone once answered
    // /.dlfs/stats shows each user only the datasets it may read.
    std::optional<Reader> reader;
    if (parent == kControlDirIno) reader = reader_of(req);
    auto a = c.ns.lookup(parent, name, reader ? &*reader : nullptr);
    if (!a) return reply_error(req, a.status(), "lookup");
    auto e = to_entry(*a, c.options);
    fuse_reply_entry(req, &e);
    // A name the kernel does not know yet is looked up by an open(path)
    // on its way to OPEN: while such a file would be passed through, start
    // its backend read now, so that the LOOKUP and OPEN round trips overlap
    // the device's work. Measured: docs/benchmark-notes.md, session 24.
    try {  // answered already: nothing may reach guarded()'s error reply
      c.passthrough.prefetch_at_lookup(a->ino);
    } catch (...) {
    }
  });
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  const Arrival a = arrive(req, FuseOp::lookup);
  answer(req, parent, false, a, [req, parent, n = std::string(name)] { do_lookup(req, parent, n.c_str()); });
}

// The kernel dropped the inode: the namespace's pins (epoch view ids) and
// the kernel side's state of it (a push may come again) go.
void forget_inode(SessionState& c, uint64_t ino, uint64_t nlookup) {
  c.ns.forget(ino, nlookup);
  c.inodes.forget(ino);
}

// FORGET has no reply; guarded() is for requests that need one.
void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  const Arrival a = arrive(req, FuseOp::forget);
  forget_inode(a.c, ino, nlookup);
  fuse_reply_none(req);
  a.replied();
}

// Each forget of the batch counts as one request, each taking the batch's time.
void op_forget_multi(fuse_req_t req, size_t n, fuse_forget_data* forgets) {
  SessionState& c = ctx(req);
  const auto at = std::chrono::steady_clock::now();
  for (size_t i = 0; i < n; ++i) {
    c.counters.add(FuseOp::forget);
    forget_inode(c, forgets[i].ino, forgets[i].nlookup);
  }
  fuse_reply_none(req);
  const auto took = std::chrono::steady_clock::now() - at;
  for (size_t i = 0; i < n; ++i) c.counters.observe(FuseOp::forget, took);
}

void do_getattr(fuse_req_t req, fuse_ino_t ino) {
  guarded(req, "getattr", [&] {
    auto a = ctx(req).ns.getattr(ino);
    if (!a) return reply_error(req, a.status(), "getattr");
    auto st = to_stat(*a);
    fuse_reply_attr(req, &st, ctx(req).options.attr_timeout_s);
  });
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  const Arrival a = arrive(req, FuseOp::getattr);
  answer(req, ino, true, a, [req, ino] { do_getattr(req, ino); });
}

void do_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  guarded(req, "opendir", [&] {
    Status s = ctx(req).ns.opendir(ino);
    if (!s) return reply_error(req, s, "opendir");
    // The kernel then opens every directory itself, with its listing cached
    // (FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE): as below, without this request.
    if (ctx(req).kernel_skips_opendir) return static_cast<void>(fuse_reply_err(req, ENOSYS));
    fi->cache_readdir = 1;  // listings never change
    fi->keep_cache = 1;
    fuse_reply_open(req, fi);
  });
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  const Arrival a = arrive(req, FuseOp::opendir);
  answer(req, ino, false, a, [req, ino, f = *fi]() mutable { do_opendir(req, ino, &f); });
}

// A listing reply's buffer, kept by each thread: a zeroed vector per request
// (the kernel asks for as much as the reader's getdents buffer, 32 KiB from
// glibc's readdir) cost page faults on every listing.
char* listing_buffer(size_t size) {
  thread_local std::unique_ptr<char[]> buf;
  thread_local size_t capacity = 0;
  if (capacity < size) {
    buf.reset(new char[size]);
    capacity = size;
  }
  return buf.get();
}

void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus) {
  char* const buf = listing_buffer(size);
  size_t used = 0;
  const auto& o = ctx(req).options;
  auto add = [&](std::string_view name, const Attr& a, uint64_t next) {
    std::string n(name);
    size_t need;
    if (plus) {
      auto e = to_entry(a, o);
      if (a.lookup_only) {  // the name only: the kernel looks it up when used
        e.ino = 0;
        e.entry_timeout = e.attr_timeout = 0;
      }
      need = fuse_add_direntry_plus(req, buf + used, size - used, n.c_str(), &e, static_cast<off_t>(next));
    } else {
      auto st = to_stat(a);
      need = fuse_add_direntry(req, buf + used, size - used, n.c_str(), &st, static_cast<off_t>(next));
    }
    if (need > size - used) return false;
    used += need;
    return true;
  };
  Status s = ctx(req).ns.readdir(ino, static_cast<uint64_t>(off), add, plus);
  if (!s) return reply_error(req, s, "readdir");
  fuse_reply_buf(req, buf, used);
}

void guarded_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus) {
  guarded(req, plus ? "readdirplus" : "readdir", [&] { do_readdir(req, ino, size, off, plus); });
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  const Arrival a = arrive(req, FuseOp::readdir);
  answer(req, ino, false, a, [=] { guarded_readdir(req, ino, size, off, false); });
}

void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  const Arrival a = arrive(req, FuseOp::readdirplus);
  answer(req, ino, false, a, [=] { guarded_readdir(req, ino, size, off, true); });
}

void op_releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info*) {
  const Arrival a = arrive(req, FuseOp::releasedir);
  fuse_reply_err(req, 0);
  a.replied();
}

// A raw file's open in the passthrough window (fs/kernel/passthrough_window.h).
void reply_open_in_window(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  bool read_ahead = false;  // a LOOKUP started reading this file already
  BackingFiles::Open o = ctx(req).passthrough.open_raw(ino, &read_ahead);
  fi->fh = static_cast<uint64_t>(o.mode);
  if (o.mode != OpenMode::passthrough) return static_cast<void>(fuse_reply_open(req, fi));
  fi->keep_cache = 0;  // the FUSE page cache plays no part
  reply_open_passthrough(req, fi, o.backing_id);
  // The reader reads the file next: start the backend's read of its first
  // MiB (what one read request asks for at most) now, on this thread, while
  // the reader wakes up, instead of when its read arrives. After the reply,
  // so that it does not delay it. Not again when its LOOKUP did (do_lookup).
  if (o.backend.valid() && !read_ahead)
    (void)::posix_fadvise(o.backend.get(), 0, PassthroughWindow::kPrefetchBytes, POSIX_FADV_WILLNEED);
}

// Nothing to keep per open. Where the kernel can skip OPEN, the first one
// is answered ENOSYS (after the checks: it is still a real open) and the
// kernel sends no OPEN, FLUSH or RELEASE again; the open files then keep the
// page cache, as below (immutable files, and generated ones have a number per
// lookup). While datasets load with passthrough, opens are answered instead
// (reply_open_in_window) and the ENOSYS waits for the load to end.
void do_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  guarded(req, "open", [&] {
    Status s = ctx(req).ns.open(ino, fi->flags);
    if (!s) return reply_error(req, s, "open");
    const bool window = ctx(req).passthrough.open();
    if (ctx(req).kernel_skips_open && !window) return static_cast<void>(fuse_reply_err(req, ENOSYS));
    fi->keep_cache = 1;
    fi->noflush = 1;
    fi->fh = static_cast<uint64_t>(OpenMode::plain);
    const auto n = decode_ino(ino);
    if (window && n && n->kind == NodeKind::raw_file) return reply_open_in_window(req, ino, fi);
    fuse_reply_open(req, fi);
  });
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  const Arrival a = arrive(req, FuseOp::open);
  answer(req, ino, false, a, [req, ino, f = *fi]() mutable { do_open(req, ino, &f); });
}

// ENOSYS, as libfuse answers when there is no handler: the kernel then stops
// sending FLUSH on this connection. Handled only to be counted.
void op_flush(fuse_req_t req, fuse_ino_t, fuse_file_info*) {
  const Arrival a = arrive(req, FuseOp::flush);
  fuse_reply_err(req, ENOSYS);
  a.replied();
}

// No file here is a terminal or has flags to set: ENOTTY, what a disk
// filesystem answers. Handled to be counted, because the kernel forwards
// every ioctl on a FUSE file (there is no "no ioctl" capability to cache, as
// there is for OPEN): Python before 3.14 calls isatty() (TCGETS) in every
// open() with default buffering, so each open of a raw file costs this one
// round trip (docs/benchmark-notes.md, "Python's open()"). The round trip is
// used: the file's read follows, and its bytes are pushed first.
void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void*, fuse_file_info*, unsigned, const void*, size_t,
              size_t) {
  const Arrival a = arrive(req, FuseOp::ioctl);
  if (cmd == TCGETS) a.c.push.push(ino);  // the read follows: its bytes go first (fs/kernel/raw_push.h)
  fuse_reply_err(req, ENOTTY);
  a.replied();
}

void op_release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  const Arrival a = arrive(req, FuseOp::release);
  // fh is the OpenMode do_open chose (plain for every open outside the window).
  if (fi->fh <= static_cast<uint64_t>(OpenMode::passthrough))
    a.c.passthrough.release(ino, static_cast<OpenMode>(fi->fh));
  fuse_reply_err(req, 0);
  a.replied();
}

// Sends what the gather holds: one contiguous run (the common case: a piece
// of resident memory) goes with fuse_reply_buf, without the iovec array
// fuse_reply_iov allocates and copies for every reply.
void reply_gather(fuse_req_t req, const cache::Gather& gather) {
  if (gather.count() == 0) fuse_reply_buf(req, nullptr, 0);
  else if (gather.count() == 1)
    fuse_reply_buf(req, static_cast<const char*>(gather.iov()[0].iov_base), gather.iov()[0].iov_len);
  else fuse_reply_iov(req, gather.iov(), gather.count());
}

void do_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off) {
  guarded(req, "read", [&] {
    // One Gather per worker thread: no allocation per request once warm.
    // Round buffers it points into stay pinned until the reply is sent.
    thread_local cache::Gather gather;
    SessionState& c = ctx(req);  // req is gone once answered
    ViewDropBehind* drop_behind = c.drop_behind.load(std::memory_order_acquire);
    const auto reader = static_cast<uint32_t>(fuse_req_ctx(req)->pid);
    Status s = ctx(req).ns.read(ino, static_cast<uint64_t>(off), size, gather);
    if (!s) {
      gather.release();
      spdlog::warn("read of inode {} at {} (+{}) by pid {}: {}", ino, off, size, fuse_req_ctx(req)->pid, s.message());
      return static_cast<void>(fuse_reply_err(req, s.err()));
    }
    reply_gather(req, gather);
    const size_t served = gather.bytes();
    gather.release();
    // After the reply: the reader is not kept waiting for this bookkeeping.
    const auto n = decode_ino(ino);
    if (n && n->kind == NodeKind::raw_file) c.readers.note(reader);
    if (drop_behind && n && n->kind == NodeKind::view) drop_behind->served(ino, static_cast<uint64_t>(off), served);
  });
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  const Arrival a = arrive(req, FuseOp::read);
  answer(req, ino, false, a, [=] { do_read(req, ino, size, off); });
}

void op_statfs(fuse_req_t req, fuse_ino_t) {
  const Arrival a = arrive(req, FuseOp::statfs);
  guarded(req, "statfs", [&] {
    auto t = ctx(req).ns.totals();
    struct statvfs sv {};
    sv.f_bsize = kMiB;
    sv.f_frsize = 4096;
    sv.f_blocks = (t.bytes + 4095) / 4096;
    sv.f_files = t.files;
    sv.f_namemax = 255;
    sv.f_flag = ST_RDONLY;
    fuse_reply_statfs(req, &sv);
  });
  a.replied();
}

// size 0 asks for the length; a buffer too small is ERANGE (getxattr(2)).
void reply_xattr_value(fuse_req_t req, const std::string& value, size_t size) {
  if (size == 0) fuse_reply_xattr(req, value.size());
  else if (size < value.size()) fuse_reply_err(req, ERANGE);
  else fuse_reply_buf(req, value.data(), value.size());
}

void do_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  guarded(req, "getxattr", [&] {
    auto v = ctx(req).ns.getxattr(ino, name);
    if (!v) return static_cast<void>(fuse_reply_err(req, v.status().err()));
    reply_xattr_value(req, *v, size);
  });
}

// The overlay over raw/ (fs/kernel/raw_overlay.h) asks each raw file it looks up for
// its "trusted.overlay.metacopy" before the reader opens it: as the isatty()
// ioctl without the overlay, that round trip is used to push the file's bytes,
// once per kernel inode (a FORGET allows the next push). A stat() through the
// overlay looks the file up too: only threads that read raw files are pushed
// to (fs/kernel/raw_readers.h), so that a metadata walk moves no file data.
bool is_overlay_probe(const char* name) { return std::string_view(name) == "trusted.overlay.metacopy"; }

// TEST ONLY: DLFS_TEST_ONLY_HOLD_OVERLAY_XATTRS leaves overlayfs's getxattrs
// ("trusted.overlay.*") unanswered, as a daemon whose FUSE loop has ended
// does: the raw overlay's mount then waits on the mount until the stop aborts
// the connection (tests/integration/58_stop_while_overlay_mounts.sh).
bool hold_overlay_xattrs(const char* name) {
  static const bool hold = std::getenv("DLFS_TEST_ONLY_HOLD_OVERLAY_XATTRS") != nullptr;
  return hold && std::string_view(name).starts_with("trusted.overlay.");
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  if (hold_overlay_xattrs(name)) return;  // never answered (a test hook, above)
  const Arrival a = arrive(req, FuseOp::getxattr);
  if (is_overlay_probe(name) && a.c.readers.contains(static_cast<uint32_t>(fuse_req_ctx(req)->pid)))
    a.c.push.push(ino);  // nothing for other than raw files
  answer(req, ino, false, a, [req, ino, n = std::string(name), size] { do_getxattr(req, ino, n.c_str(), size); });
}

void do_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  guarded(req, "listxattr", [&] {
    auto names = ctx(req).ns.listxattr(ino);
    if (!names) return static_cast<void>(fuse_reply_err(req, names.status().err()));
    std::string list;
    for (const auto& n : *names) list += n + '\0';
    reply_xattr_value(req, list, size);
  });
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  const Arrival a = arrive(req, FuseOp::listxattr);
  answer(req, ino, false, a, [=] { do_listxattr(req, ino, size); });
}

// Every write-like operation: EROFS (the mount is also "ro", so the kernel
// usually refuses first; these are the belt to its braces).
void erofs(fuse_req_t req) {
  const Arrival a = arrive(req, FuseOp::write);
  fuse_reply_err(req, EROFS);
  a.replied();
}
void op_setattr(fuse_req_t req, fuse_ino_t, struct stat*, int, fuse_file_info*) { erofs(req); }
void op_mknod(fuse_req_t req, fuse_ino_t, const char*, mode_t, dev_t) { erofs(req); }
void op_mkdir(fuse_req_t req, fuse_ino_t, const char*, mode_t) { erofs(req); }
void op_unlink(fuse_req_t req, fuse_ino_t, const char*) { erofs(req); }
void op_rmdir(fuse_req_t req, fuse_ino_t, const char*) { erofs(req); }
void op_symlink(fuse_req_t req, const char*, fuse_ino_t, const char*) { erofs(req); }
void op_rename(fuse_req_t req, fuse_ino_t, const char*, fuse_ino_t, const char*, unsigned) { erofs(req); }
void op_link(fuse_req_t req, fuse_ino_t, fuse_ino_t, const char*) { erofs(req); }
void op_write(fuse_req_t req, fuse_ino_t, const char*, size_t, off_t, fuse_file_info*) { erofs(req); }
void op_create(fuse_req_t req, fuse_ino_t, const char*, mode_t, fuse_file_info*) { erofs(req); }
void op_setxattr(fuse_req_t req, fuse_ino_t, const char*, const char*, size_t, int) { erofs(req); }
void op_removexattr(fuse_req_t req, fuse_ino_t, const char*) { erofs(req); }
void op_fallocate(fuse_req_t req, fuse_ino_t, int, off_t, off_t, fuse_file_info*) { erofs(req); }

fuse_lowlevel_ops make_ops() {
  fuse_lowlevel_ops ops{};
  ops.init = op_init;
  ops.lookup = op_lookup;
  ops.getattr = op_getattr;
  ops.opendir = op_opendir;
  ops.readdir = op_readdir;
  ops.readdirplus = op_readdirplus;
  ops.releasedir = op_releasedir;
  ops.open = op_open;
  ops.flush = op_flush;
  ops.release = op_release;
  ops.ioctl = op_ioctl;
  ops.read = op_read;
  ops.statfs = op_statfs;
  ops.getxattr = op_getxattr;
  ops.listxattr = op_listxattr;
  ops.setattr = op_setattr;
  ops.mknod = op_mknod;
  ops.mkdir = op_mkdir;
  ops.unlink = op_unlink;
  ops.rmdir = op_rmdir;
  ops.symlink = op_symlink;
  ops.rename = op_rename;
  ops.link = op_link;
  ops.write = op_write;
  ops.create = op_create;
  ops.setxattr = op_setxattr;
  ops.removexattr = op_removexattr;
  ops.fallocate = op_fallocate;
  // No inode table: forgets matter only to epoch view numbers (fs/views/view_registry.h).
  ops.forget = op_forget;
  ops.forget_multi = op_forget_multi;
  return ops;
}

}  // namespace

const fuse_lowlevel_ops& fuse_operations() {
  static const fuse_lowlevel_ops ops = make_ops();
  return ops;
}

}  // namespace dlfs::fs
