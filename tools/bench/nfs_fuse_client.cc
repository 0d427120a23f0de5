// dlfs-bench-nfsmount: a read-only NFSv4 client in user space (libnfs under a
// FUSE mount), for the benchmarks on kernels that have no NFS client.
//
// tools/bench/nfs_backend.py mounts an nfs-ganesha export with it when the kernel
// cannot mount NFS itself. It is meant to cost per file what the Linux NFS client
// costs with its default mount options, so it copies that client's caching rules:
//
//  - attributes: cached by the kernel's FUSE layer for --attr-timeout s (3, the NFS
//    client's acregmin), names for --entry-timeout s (30, acdirmin: NFS revalidates
//    a name with its directory's attributes), no negative caching; after expiry, or
//    after drop_caches, a lookup or stat goes to the server (nfs_stat64: the path
//    resolved and its attributes fetched there), as an NFS LOOKUP/GETATTR does;
//  - close-to-open: every open() is a real NFSv4 OPEN (nfs_open) followed by a
//    GETATTR of the opened file (nfs_fstat64), the last close of it a CLOSE
//    (nfs_close). The kernel's client sends OPEN and GETATTR in one compound:
//    here they are two round trips (libnfs's API offers no OPEN returning
//    attributes). An open of a file still open on the same connection (FUSE's
//    release comes late) shares its open state and revalidates it with a GETATTR,
//    as the kernel's client shares one open state per owner and file (op_open);
//  - page cache: kept across opens while the file's mtime and size, as the GETATTR
//    at open returned them, are those seen at its previous open (FUSE keep_cache),
//    dropped otherwise: NFS's close-to-open revalidation;
//  - reads: straight to nfs_pread (READ), up to the server's negotiated read size
//    per RPC; FUSE requests up to 1 MiB (max_read, NFS's rsize), kernel read-ahead
//    128 KiB (what recent Linux NFS clients default read_ahead_kb to);
//  - directories: READDIR through nfs_opendir, names and types only: the kernel
//    then looks each name up, one GETATTR each, like NFS without READDIRPLUS's
//    attribute priming. libnfs's own directory and page caches are turned off;
//  - inode numbers: the server's fileids (stable across the kernel's forgets, as
//    on NFS; dlfsd checks a backend file's st_ino between scan and load).
// What it does not model: the FUSE hop (every request crosses to this process and
// back, which the in-kernel client does not), the kernel client's nconnect and
// its parallel RPC slots (here one TCP connection per FUSE worker thread, one RPC
// in flight on each), NFSv4.1 sessions (libnfs 4.0 speaks NFSv4.0) and delegations,
// and lease renewal: libnfs 4.0 sends no RENEW, so a connection idle for longer than
// the server's lease loses its state and is replaced at its next OPEN (reopen_elsewhere).
//
// libnfs contexts are not thread-safe: each FUSE worker thread takes its own
// connection (context + mount) at its first request and returns it to a pool when
// the thread exits; an open file keeps the connection it was opened on, and reads
// and the release of that file, which may come on other threads, lock it.
//
// usage: dlfs-bench-nfsmount [options] nfs://SERVER/EXPORT?version=4&nfsport=N MOUNTPOINT
#include <fuse.h>
#include <nfsc/libnfs.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace {

constexpr unsigned kMiB = 1u << 20;

struct Options {
  std::string url, mountpoint;
  double attr_timeout = 3, entry_timeout = 30;
  int max_threads = 16;
  bool debug = false;
};
Options g_opt;

// One libnfs context with its mount of the export; used by one thread at a time.
// One NFSv4.0 client with one open-owner: a file it has open is opened once,
// shared by every open file handle on it (`open`, by path, with a count).
struct Connection {
  struct Shared {
    nfsfh* fh;
    unsigned refs;
  };
  std::mutex m;
  nfs_context* nfs = nullptr;
  uint64_t readmax = 0;
  std::unordered_map<std::string, Shared> open;
  bool retired = false;  // its NFSv4 state is lost: serves its open files' reads and releases only
  ~Connection() {
    if (nfs) nfs_destroy_context(nfs);
  }
};

// "nfs://server/export: what failed: libnfs's reason"
void report(const char* what, const std::string& path, nfs_context* nfs, int rc) {
  std::fprintf(stderr, "dlfs-bench-nfsmount: %s: %s %s failed: %s\n", g_opt.url.c_str(), what, path.c_str(),
               nfs ? nfs_get_error(nfs) : std::strerror(-rc));
}

// A new context mounted on the URL's export, or nullptr with the reason in *err.
std::unique_ptr<Connection> connect(std::string* err) {
  auto c = std::make_unique<Connection>();
  c->nfs = nfs_init_context();
  if (!c->nfs) {
    *err = "nfs_init_context failed (out of memory?)";
    return nullptr;
  }
  nfs_url* url = nfs_parse_url_dir(c->nfs, g_opt.url.c_str());  // also applies ?version= and ?nfsport=
  if (!url) {
    *err = std::string("bad URL: ") + nfs_get_error(c->nfs) + " (want nfs://SERVER/EXPORT?version=4&nfsport=N)";
    return nullptr;
  }
  // Each connection is its own NFSv4 client: one client id shared by several
  // connections would make every SETCLIENTID expire the state of the others.
  static std::atomic<unsigned> serial{0};
  std::string client_name = "dlfs-bench-nfsmount-" + std::to_string(getpid()) + "-" + std::to_string(serial++);
  nfs4_set_client_name(c->nfs, client_name.c_str());
  uint64_t boot = static_cast<uint64_t>(time(nullptr)) << 20 ^ serial.load();  // new at every start
  char verifier[8];
  std::memcpy(verifier, &boot, sizeof verifier);
  nfs4_set_verifier(c->nfs, verifier);
  nfs_set_dircache(c->nfs, 0);   // names and attributes: the kernel's FUSE caches, with NFS's timeouts
  nfs_set_pagecache(c->nfs, 0);  // data: the kernel's page cache
  nfs_set_readahead(c->nfs, 0);  // read-ahead: the kernel's
  int rc = nfs_mount(c->nfs, url->server, url->path);
  if (rc != 0) {
    *err = std::string("mount of server ") + url->server + " export " + url->path + " failed: " +
           nfs_get_error(c->nfs) + " (" + std::strerror(-rc) + "; is an NFSv4 server serving that export on " +
           "the URL's nfsport?)";
    nfs_destroy_url(url);
    return nullptr;
  }
  nfs_destroy_url(url);
  c->readmax = std::max<uint64_t>(nfs_get_readmax(c->nfs), 4096);
  return c;
}

// Connections not held by a thread; every connection ever made, for teardown.
std::mutex g_pool_m;
std::vector<Connection*> g_idle;
std::vector<std::unique_ptr<Connection>> g_all;

void give_back(Connection* c) {
  std::lock_guard lk(g_pool_m);
  if (!c->retired) g_idle.push_back(c);
}

// The calling thread's connection: taken from the pool or made at its first
// request, returned when the thread ends (libfuse ends idle worker threads).
struct ThreadConnection {
  Connection* c = nullptr;
  ~ThreadConnection() {
    if (c) give_back(c);
  }
};
thread_local ThreadConnection t_conn;

// fresh: a new connection, not one from the pool (whose state may have expired too).
Connection* my_connection(bool fresh = false) {
  if (t_conn.c) return t_conn.c;
  if (!fresh) {
    std::lock_guard lk(g_pool_m);
    if (!g_idle.empty()) {
      t_conn.c = g_idle.back();
      g_idle.pop_back();
      return t_conn.c;
    }
  }
  std::string err;
  auto c = connect(&err);
  if (!c) {
    std::fprintf(stderr, "dlfs-bench-nfsmount: %s: new connection: %s\n", g_opt.url.c_str(), err.c_str());
    return nullptr;
  }
  std::lock_guard lk(g_pool_m);
  g_all.push_back(std::move(c));
  t_conn.c = g_all.back().get();
  return t_conn.c;
}

// An open file: the connection it was opened on owns its NFSv4 open state.
struct OpenFile {
  Connection* conn;
  std::string path;
  nfsfh* fh;
};
OpenFile* open_file(fuse_file_info* fi) { return reinterpret_cast<OpenFile*>(fi->fh); }

// mtime (ns) and size of each file at its last open: keep_cache decides on them.
struct Version {
  uint64_t mtime_ns, size;
  bool operator==(const Version&) const = default;
};
std::mutex g_versions_m;
std::unordered_map<std::string, Version> g_versions;

void to_stat(const nfs_stat_64& n, struct stat* st) {
  std::memset(st, 0, sizeof *st);
  st->st_ino = n.nfs_ino;
  st->st_mode = static_cast<mode_t>(n.nfs_mode) & ~static_cast<mode_t>(0222);  // a read-only mount
  st->st_nlink = n.nfs_nlink;
  st->st_uid = n.nfs_uid;
  st->st_gid = n.nfs_gid;
  st->st_size = static_cast<off_t>(n.nfs_size);
  st->st_blksize = static_cast<blksize_t>(n.nfs_blksize);
  st->st_blocks = static_cast<blkcnt_t>(n.nfs_blocks);
  st->st_atim = {static_cast<time_t>(n.nfs_atime), static_cast<long>(n.nfs_atime_nsec)};
  st->st_mtim = {static_cast<time_t>(n.nfs_mtime), static_cast<long>(n.nfs_mtime_nsec)};
  st->st_ctim = {static_cast<time_t>(n.nfs_ctime), static_cast<long>(n.nfs_ctime_nsec)};
}

int op_getattr(const char* path, struct stat* st, fuse_file_info* fi) {
  nfs_stat_64 n{};
  int rc;
  if (fi && fi->fh) {
    OpenFile* f = open_file(fi);
    std::lock_guard lk(f->conn->m);
    rc = nfs_fstat64(f->conn->nfs, f->fh, &n);
    if (rc < 0) report("GETATTR (open file)", path, f->conn->nfs, rc);
  } else {
    Connection* c = my_connection();
    if (!c) return -EIO;
    std::lock_guard lk(c->m);
    rc = nfs_stat64(c->nfs, path, &n);
    if (rc < 0 && rc != -ENOENT) report("GETATTR", path, c->nfs, rc);
  }
  if (rc < 0) return rc;
  to_stat(n, st);
  return 0;
}

int op_readdir(const char* path, void* buf, fuse_fill_dir_t fill, off_t, fuse_file_info*, fuse_readdir_flags) {
  Connection* c = my_connection();
  if (!c) return -EIO;
  std::lock_guard lk(c->m);
  nfsdir* dir = nullptr;
  int rc = nfs_opendir(c->nfs, path, &dir);
  if (rc < 0) {
    report("READDIR", path, c->nfs, rc);
    return rc;
  }
  while (nfsdirent* e = nfs_readdir(c->nfs, dir)) {
    struct stat st {};
    st.st_mode = e->mode & S_IFMT;  // the type only: attributes come from GETATTR at lookup
    // libnfs's NFSv4 READDIR leaves the fileid 0, which readdir(3) would skip:
    // "unknown" (libfuse's FUSE_UNKNOWN_INO) instead; stat gives the real one.
    st.st_ino = e->inode ? e->inode : 0xffffffffu;
    if (fill(buf, e->name, &st, 0, static_cast<fuse_fill_dir_flags>(0)) != 0) break;
  }
  nfs_closedir(c->nfs, dir);
  return 0;
}

// Errors of the file itself (no such name, no permission, ...): the connection is fine.
bool is_file_error(int rc) {
  return rc == -ENOENT || rc == -EACCES || rc == -EPERM || rc == -EISDIR || rc == -ENOTDIR || rc == -ENAMETOOLONG;
}

// An OPEN failed for another reason, usually lost NFSv4.0 state: libnfs 4.0 does
// not RENEW its lease, so a connection idle for longer than the server's lease
// (ganesha: 60 s) finds its client id expired (NFS4ERR_EXPIRED, then BAD_SEQID).
// The connection is retired (its open files stay on it) and the open is retried
// once on a fresh connection, a new NFSv4 client, as the kernel's client recovers
// its state after a lease expiry.
int reopen_elsewhere(Connection* c, std::lock_guard<std::mutex>& /*held*/, const char* path, int rc) {
  if (c->retired || t_conn.c != c) {
    report("OPEN", path, c->nfs, rc);
    return rc;
  }
  std::fprintf(stderr, "dlfs-bench-nfsmount: %s: OPEN %s failed (%s): retrying on a new connection\n",
               g_opt.url.c_str(), path, nfs_get_error(c->nfs));
  c->retired = true;
  t_conn.c = nullptr;  // the next my_connection() takes another one
  return -EAGAIN;      // op_open retries (outside this connection's lock)
}

// A second OPEN of a file its open-owner has open already would make the server
// merge the two into one open state (a new stateid seqid), and libnfs 4.0 would
// then CLOSE with a stale stateid and lose its seqid (NFS4ERR_OLD_STATEID, then
// NFS4ERR_BAD_SEQID on every request). FUSE's RELEASE is asynchronous, so a file
// closed and opened again soon is such a case. Like the kernel's client, which
// keeps one open state per owner and file, the open state is shared: an open of
// a file open on this connection revalidates it with a GETATTR (still one round
// trip per open, close-to-open) and the last release CLOSEs it.
int open_once(const char* path, fuse_file_info* fi, bool fresh) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return -EROFS;
  Connection* c = my_connection(fresh);
  if (!c) return -EIO;
  nfsfh* fh = nullptr;
  nfs_stat_64 n{};
  {
    std::lock_guard lk(c->m);
    if (auto it = c->open.find(path); it != c->open.end()) {
      int rc = nfs_fstat64(c->nfs, it->second.fh, &n);
      if (rc < 0) {
        report("GETATTR at open", path, c->nfs, rc);
        return rc;
      }
      fh = it->second.fh;
      ++it->second.refs;
    } else {
      int rc = nfs_open(c->nfs, path, O_RDONLY, &fh);
      if (rc < 0 && !is_file_error(rc)) return reopen_elsewhere(c, lk, path, rc);
      if (rc < 0) return rc;
      rc = nfs_fstat64(c->nfs, fh, &n);
      if (rc < 0) {
        report("GETATTR after OPEN", path, c->nfs, rc);
        nfs_close(c->nfs, fh);
        return rc;
      }
      c->open.emplace(path, Connection::Shared{fh, 1});
    }
  }
  Version now{n.nfs_mtime * 1000000000ull + n.nfs_mtime_nsec, n.nfs_size};
  {
    std::lock_guard lk(g_versions_m);
    auto [it, first_open] = g_versions.try_emplace(path, now);
    fi->keep_cache = !first_open && it->second == now;  // unchanged since the last open: keep its pages
    it->second = now;
  }
  fi->fh = reinterpret_cast<uint64_t>(new OpenFile{c, path, fh});
  return 0;
}

int op_open(const char* path, fuse_file_info* fi) {
  int rc = open_once(path, fi, false);
  if (rc == -EAGAIN) rc = open_once(path, fi, true);  // once, on a new connection (reopen_elsewhere)
  return rc == -EAGAIN ? -EIO : rc;
}

int op_read(const char* path, char* buf, size_t size, off_t off, fuse_file_info* fi) {
  OpenFile* f = open_file(fi);
  std::lock_guard lk(f->conn->m);
  size_t got = 0;
  while (got < size) {
    uint64_t want = std::min<uint64_t>(size - got, f->conn->readmax);
    int rc = nfs_pread(f->conn->nfs, f->fh, static_cast<uint64_t>(off) + got, want, buf + got);
    if (rc < 0) {
      report("READ", path, f->conn->nfs, rc);
      return rc;
    }
    if (rc == 0) break;  // end of file
    got += static_cast<size_t>(rc);
  }
  return static_cast<int>(got);
}

int op_release(const char*, fuse_file_info* fi) {
  OpenFile* f = open_file(fi);
  {
    Connection* c = f->conn;
    std::lock_guard lk(c->m);
    auto it = c->open.find(f->path);
    if (it != c->open.end() && --it->second.refs == 0) {
      int rc = nfs_close(c->nfs, f->fh);
      if (rc < 0) report("CLOSE", f->path, c->nfs, rc);
      c->open.erase(it);
    }
  }
  delete f;
  return 0;
}

void* op_init(fuse_conn_info* conn, fuse_config* cfg) {
  conn->max_read = kMiB;
  conn->max_write = kMiB;  // libfuse sizes the kernel's max_pages (and so reads) from it
  conn->max_readahead = 128 << 10;
  // Plain READDIR: names and types; attributes come from a GETATTR per looked-up name.
  conn->want &= ~(FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO);
  cfg->attr_timeout = g_opt.attr_timeout;
  cfg->entry_timeout = g_opt.entry_timeout;
  cfg->negative_timeout = 0;
  // st_ino is the server's fileid, stable across forgets and drop_caches, as on
  // NFS (libfuse's own node ids are not: dlfsd would take a file for replaced).
  cfg->use_ino = 1;
  cfg->kernel_cache = 0;  // keep_cache is decided per open (op_open)
  cfg->auto_cache = 0;
  return nullptr;
}

void usage(FILE* to) {
  std::fprintf(to,
               "usage: dlfs-bench-nfsmount [options] URL MOUNTPOINT\n"
               "Mounts an NFSv4 export read-only at MOUNTPOINT through FUSE, with libnfs as the NFS\n"
               "client (for kernels without one); runs in the foreground until unmounted or\n"
               "SIGINT/SIGTERM. Caching as the Linux NFS client's defaults (see the source header).\n"
               "  URL                    nfs://SERVER/EXPORT?version=4&nfsport=PORT (libnfs URL syntax)\n"
               "  --attr-timeout S       attribute cache time (default 3, NFS acregmin)\n"
               "  --entry-timeout S      name cache time (default 30, NFS acdirmin)\n"
               "  --max-threads N        FUSE worker threads, one NFS connection each (default 16)\n"
               "  --debug                libfuse's request log on stderr\n"
               "  --help                 this text\n");
}

bool parse_double(const char* s, double* out) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s, &end);
  if (errno || end == s || *end || v < 0) return false;
  *out = v;
  return true;
}

// Returns 0 if parsed, else the exit code.
int parse(int argc, char** argv) {
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "dlfs-bench-nfsmount: %s needs a value\n", name);
        return nullptr;
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      usage(stdout);
      std::exit(0);
    } else if (a == "--debug") {
      g_opt.debug = true;
    } else if (a == "--attr-timeout" || a == "--entry-timeout") {
      const char* v = value(argv[i]);
      double* out = a == "--attr-timeout" ? &g_opt.attr_timeout : &g_opt.entry_timeout;
      if (!v || !parse_double(v, out)) {
        std::fprintf(stderr, "dlfs-bench-nfsmount: %s: want seconds >= 0, got '%s'\n", argv[i - 1], v ? v : "");
        return 2;
      }
    } else if (a == "--max-threads") {
      const char* v = value(argv[i]);
      double t = 0;
      if (!v || !parse_double(v, &t) || t < 1 || t > 256 || t != static_cast<int>(t)) {
        std::fprintf(stderr, "dlfs-bench-nfsmount: --max-threads: want an integer 1..256, got '%s'\n", v ? v : "");
        return 2;
      }
      g_opt.max_threads = static_cast<int>(t);
    } else if (a.starts_with("-")) {
      std::fprintf(stderr, "dlfs-bench-nfsmount: unknown option %s (see --help)\n", argv[i]);
      return 2;
    } else {
      pos.emplace_back(a);
    }
  }
  if (pos.size() != 2) {
    usage(stderr);
    return 2;
  }
  g_opt.url = pos[0];
  g_opt.mountpoint = pos[1];
  if (!g_opt.url.starts_with("nfs://")) {
    std::fprintf(stderr, "dlfs-bench-nfsmount: %s: not an nfs:// URL\n", g_opt.url.c_str());
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (int rc = parse(argc, argv)) return rc;
  // Mount the export once before the FUSE mount: a wrong server, port or export is
  // reported here, not as EIO on the first access. This connection serves first.
  std::string err;
  auto first = connect(&err);
  if (!first) {
    std::fprintf(stderr, "dlfs-bench-nfsmount: %s: %s\n", g_opt.url.c_str(), err.c_str());
    return 1;
  }
  g_idle.push_back(first.get());
  g_all.push_back(std::move(first));

  fuse_operations ops{};
  ops.getattr = op_getattr;
  ops.readdir = op_readdir;
  ops.open = op_open;
  ops.read = op_read;
  ops.release = op_release;
  ops.init = op_init;

  std::string fsname = "fsname=" + g_opt.url.substr(0, g_opt.url.find('?'));
  std::vector<std::string> args = {"dlfs-bench-nfsmount", "-o", "ro,max_read=1048576,subtype=dlfs-nfs," + fsname};
  if (g_opt.debug) args.push_back("-d");
  std::vector<char*> cargs;
  for (auto& s : args) cargs.push_back(s.data());
  fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(cargs.size()), cargs.data());
  fuse* f = fuse_new(&fargs, &ops, sizeof ops, nullptr);
  if (!f) {
    std::fprintf(stderr, "dlfs-bench-nfsmount: fuse_new failed\n");
    return 1;
  }
  if (fuse_mount(f, g_opt.mountpoint.c_str()) != 0) {
    std::fprintf(stderr, "dlfs-bench-nfsmount: cannot mount FUSE at %s (root? /dev/fuse?)\n",
                 g_opt.mountpoint.c_str());
    fuse_destroy(f);
    return 1;
  }
  fuse_set_signal_handlers(fuse_get_session(f));
  fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(cfg, static_cast<unsigned>(g_opt.max_threads));
  fuse_loop_cfg_set_idle_threads(cfg, static_cast<unsigned>(std::min(g_opt.max_threads, 8)));
  int rc = fuse_loop_mt(f, cfg);
  fuse_loop_cfg_destroy(cfg);
  fuse_remove_signal_handlers(fuse_get_session(f));
  fuse_unmount(f);
  fuse_destroy(f);
  return rc == 0 ? 0 : 1;
}
