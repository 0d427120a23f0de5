// dlfs-bench-ceiling: the smallest honest memory-backed FUSE server.
//
// The ceiling for the benchmarks: what any FUSE file system can reach on this
// machine. It serves D directories of files of one size whose bytes all come
// from one buffer in memory, with the same kernel-facing settings as dlfsd
// (libfuse3 low-level API, multi-threaded loop with clone_fd, 1 MiB requests
// and readahead window, keep_cache, long timeouts, readdirplus) and none of
// DLFS's work (no manifest, no residency checks, no counters).
//
// usage: dlfs-bench-ceiling --files N --file-size BYTES [--dirs D] MOUNTPOINT
#include <fuse_lowlevel.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <algorithm>
#include <vector>

namespace {

constexpr unsigned kMiB = 1u << 20;
constexpr double kTimeout = 3600;

// Inodes: 1 root, 2..D+1 directories, then files.
struct Tree {
  uint64_t files = 0, file_size = 0, dirs = 1;
  char* data = nullptr;  // file f is data[f * file_size, (f + 1) * file_size)
  uint64_t dir_ino(uint64_t d) const { return 2 + d; }
  uint64_t file_ino(uint64_t f) const { return 2 + dirs + f; }
  bool is_dir(uint64_t ino) const { return ino >= 2 && ino < 2 + dirs; }
  bool is_file(uint64_t ino) const { return ino >= 2 + dirs && ino < 2 + dirs + files; }
  // Files are dealt to directories round-robin: file f lives in dir f % dirs.
  uint64_t files_in(uint64_t d) const { return files / dirs + (d < files % dirs ? 1 : 0); }
};
Tree g_tree;

std::string dir_name(uint64_t d) {
  char b[32];
  std::snprintf(b, sizeof b, "d%04llu", static_cast<unsigned long long>(d));
  return b;
}
std::string file_name(uint64_t f) {
  char b[32];
  std::snprintf(b, sizeof b, "f%08llu", static_cast<unsigned long long>(f));
  return b;
}

struct stat attr_of(uint64_t ino) {
  struct stat st {};
  st.st_ino = ino;
  if (ino == 1 || g_tree.is_dir(ino)) {
    st.st_mode = S_IFDIR | 0555;
    st.st_nlink = ino == 1 ? 2 + g_tree.dirs : 2;
  } else {
    st.st_mode = S_IFREG | 0444;
    st.st_nlink = 1;
    st.st_size = static_cast<off_t>(g_tree.file_size);
  }
  st.st_blksize = kMiB;
  return st;
}

void reply_entry(fuse_req_t req, uint64_t ino) {
  fuse_entry_param e{};
  e.ino = ino;
  e.attr = attr_of(ino);
  e.attr_timeout = e.entry_timeout = kTimeout;
  fuse_reply_entry(req, &e);
}

void op_init(void*, fuse_conn_info* conn) {
  conn->max_read = kMiB;
  conn->max_write = kMiB;
  conn->max_readahead = kMiB;
  if (conn->capable & FUSE_CAP_READDIRPLUS) conn->want |= FUSE_CAP_READDIRPLUS;
  conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (parent == 1) {
    unsigned long long d;
    if (std::sscanf(name, "d%llu", &d) == 1 && d < g_tree.dirs && dir_name(d) == name) return reply_entry(req, g_tree.dir_ino(d));
  } else if (g_tree.is_dir(parent)) {
    unsigned long long f;
    uint64_t d = parent - 2;
    if (std::sscanf(name, "f%llu", &f) == 1 && f < g_tree.files && f % g_tree.dirs == d && file_name(f) == name)
      return reply_entry(req, g_tree.file_ino(f));
  }
  fuse_reply_err(req, ENOENT);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  struct stat st = attr_of(ino);
  fuse_reply_attr(req, &st, kTimeout);
}

void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus) {
  if (ino != 1 && !g_tree.is_dir(ino)) return static_cast<void>(fuse_reply_err(req, ENOTDIR));
  std::vector<char> buf(size);
  size_t used = 0;
  uint64_t n = ino == 1 ? g_tree.dirs : g_tree.files_in(ino - 2);
  for (uint64_t k = static_cast<uint64_t>(off); k < n; ++k) {
    uint64_t child = ino == 1 ? g_tree.dir_ino(k) : g_tree.file_ino(k * g_tree.dirs + (ino - 2));
    std::string name = ino == 1 ? dir_name(k) : file_name(k * g_tree.dirs + (ino - 2));
    size_t need;
    if (plus) {
      fuse_entry_param e{};
      e.ino = child;
      e.attr = attr_of(child);
      e.attr_timeout = e.entry_timeout = kTimeout;
      need = fuse_add_direntry_plus(req, buf.data() + used, size - used, name.c_str(), &e, static_cast<off_t>(k + 1));
    } else {
      struct stat st = attr_of(child);
      need = fuse_add_direntry(req, buf.data() + used, size - used, name.c_str(), &st, static_cast<off_t>(k + 1));
    }
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}
void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) { do_readdir(req, ino, size, off, false); }
void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) { do_readdir(req, ino, size, off, true); }

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (!g_tree.is_file(ino)) return static_cast<void>(fuse_reply_err(req, EISDIR));
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return static_cast<void>(fuse_reply_err(req, EROFS));
  fi->keep_cache = 1;
  fuse_reply_open(req, fi);
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  auto o = static_cast<uint64_t>(off);
  if (o >= g_tree.file_size) return static_cast<void>(fuse_reply_buf(req, nullptr, 0));
  const char* file = g_tree.data + (ino - g_tree.file_ino(0)) * g_tree.file_size;
  fuse_reply_buf(req, file + o, std::min<uint64_t>(size, g_tree.file_size - o));
}

void op_statfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs sv {};
  sv.f_bsize = kMiB;
  sv.f_frsize = 4096;
  sv.f_blocks = g_tree.files * g_tree.file_size / 4096;
  sv.f_files = g_tree.files + g_tree.dirs + 1;
  sv.f_namemax = 255;
  fuse_reply_statfs(req, &sv);
}

// Same as dlfsd: raise the readahead window after INIT so reads are 1 MiB.
void raise_readahead(const std::string& mnt) {
  struct stat st {};
  if (::stat(mnt.c_str(), &st) != 0) return;
  std::ofstream("/sys/class/bdi/" + std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev)) +
                "/read_ahead_kb")
      << "1024\n";
}

uint64_t parse_u64(const char* flag, const char* v) {
  char* end = nullptr;
  unsigned long long x = std::strtoull(v, &end, 10);
  uint64_t mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1024;
  else if (*end == 'M' || *end == 'm') mult = 1024 * 1024;
  else if (*end == 'G' || *end == 'g') mult = 1024ull * 1024 * 1024;
  else if (*end) {
    std::fprintf(stderr, "dlfs-bench-ceiling: %s: '%s' is not a number\n", flag, v);
    std::exit(2);
  }
  return x * mult;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mnt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::puts("usage: dlfs-bench-ceiling --files N --file-size BYTES[K|M|G] [--dirs D] MOUNTPOINT\n"
                "Serves N files of one size from memory: the FUSE ceiling for DLFS benchmarks.\n"
                "Runs in the foreground until SIGTERM/SIGINT, then unmounts.");
      return 0;
    }
    if (a == "--files" && i + 1 < argc) g_tree.files = parse_u64("--files", argv[++i]);
    else if (a == "--file-size" && i + 1 < argc) g_tree.file_size = parse_u64("--file-size", argv[++i]);
    else if (a == "--dirs" && i + 1 < argc) g_tree.dirs = std::max<uint64_t>(1, parse_u64("--dirs", argv[++i]));
    else if (mnt.empty() && a[0] != '-') mnt = a;
    else {
      std::fprintf(stderr, "dlfs-bench-ceiling: unexpected argument '%s' (see --help)\n", argv[i]);
      return 2;
    }
  }
  if (mnt.empty() || g_tree.files == 0) {
    std::fprintf(stderr, "dlfs-bench-ceiling: need --files N and a MOUNTPOINT (see --help)\n");
    return 2;
  }
  // Mapped like dlfsd's storage buffer (anonymous, transparent huge pages
  // advised), and every page touched before serving, as a loaded dataset is.
  const size_t bytes = std::max<uint64_t>(1, g_tree.files * g_tree.file_size);
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("dlfs-bench-ceiling: mmap");
    return 1;
  }
  ::madvise(mem, bytes, MADV_HUGEPAGE);
  g_tree.data = static_cast<char*>(mem);
  for (size_t i = 0; i < bytes; i += 64) g_tree.data[i] = static_cast<char>(i * 131 + 7);

  fuse_lowlevel_ops ops{};
  ops.init = op_init;
  ops.lookup = op_lookup;
  ops.getattr = op_getattr;
  ops.readdir = op_readdir;
  ops.readdirplus = op_readdirplus;
  ops.open = op_open;
  ops.read = op_read;
  ops.statfs = op_statfs;
  char prog[] = "dlfs-bench-ceiling", o[] = "-o", opts[] = "ro,max_read=1048576,fsname=ceiling,subtype=ceiling";
  char* fargv[] = {prog, o, opts};
  fuse_args args = FUSE_ARGS_INIT(3, fargv);
  fuse_session* se = fuse_session_new(&args, &ops, sizeof ops, nullptr);
  if (!se) return 1;
  ::signal(SIGINT, SIG_DFL);  // a shell's background job has SIGINT ignored
  ::signal(SIGTERM, SIG_DFL);
  if (fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, mnt.c_str()) != 0) {
    fuse_session_destroy(se);
    return 1;
  }
  std::thread tune([&] { raise_readahead(mnt); });
  fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_clone_fd(cfg, 1);
  fuse_loop_cfg_set_max_threads(cfg, 16);
  fuse_loop_cfg_set_idle_threads(cfg, 8);
  int rc = fuse_session_loop_mt(se, cfg);
  fuse_loop_cfg_destroy(cfg);
  tune.join();
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  return rc == 0 || rc == SIGTERM || rc == SIGINT ? 0 : 1;
}
