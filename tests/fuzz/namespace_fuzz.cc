// Fuzz target: the namespace, i.e. every name and inode number the kernel can
// hand the daemon (fs/namespace/namespace.cc, fs/namespace/namespace_views.cc, fs/view_*.cc,
// fs/views/view_registry.cc, fs/namespace/inode.h; `tools/fuzz.sh namespace`): path lookups
// down to epoch, world-size and rank names with their extensions, directory
// listings, opens, reads at any offset and extended attributes.
//
// The input is text, one request per line (at most kMaxLines):
//   PATH[\tOFFSET[\tSIZE[\tXATTR]]]    resolve PATH ("ds/epochs/3/4/1.tar") from the
//                                      root by lookups, one component at a time;
//                                      "#INO/..." starts from inode number INO
// and the node reached is then listed from OFFSET (a directory) or opened and
// read at OFFSET for SIZE bytes (a file), and asked for attribute XATTR.
// Each input gets fresh datasets over the same small backend trees (made
// once), so view numbers never run out and every input replays alone.
//
// Invariants: errors carry an errno and a message; a name that resolves has
// the same attributes by getattr, and its inode number decodes and encodes
// back; every listed name is one a lookup can take (a single path component
// of at most NAME_MAX bytes) and resolves to the listed inode; opening for
// writing is EROFS; a read returns what the size says (nothing past the end),
// raw bytes equal the backend's, and a view read in two halves equals the
// same range read at once; attributes are values or ENODATA.
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>

#include "fs/dataset/dataset.h"
#include "fs/namespace/inode.h"
#include "fs/namespace/namespace.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace dlfs::fs;
namespace stdfs = std::filesystem;

constexpr size_t kMaxLines = 16;
constexpr size_t kMaxListed = 24;           // entries checked per listing
constexpr uint64_t kMaxRequest = 1 << 20;   // FUSE never asks for more (max_read)

[[noreturn]] void fail(const std::string& what) { dlfs::fuzz::fail("namespace_fuzz", what); }

// ---- the backend trees, written once ----

// Names a hostile backend may hold: non-UTF-8 bytes, '%', spaces, a newline,
// a path much longer than NAME_MAX (each component within it), an empty file.
std::vector<std::string> files_tree_paths() {
  const std::string deep = std::string(200, 'd') + "/" + std::string(200, 'e') + "/" + std::string(200, 'f');
  return {"a/b/c.bin", "a/empty", "100%real", "sp ace.bin", "\xff\xfe.bin", "nl\nname", "dir\xc3/x.bin",
          deep + "/" + std::string(120, 'n') + ".bin", "z/last"};
}

struct Trees {
  std::string root;
  Trees() {
    char tmpl[] = "/tmp/dlfs-fuzz-ns-XXXXXX";
    if (!::mkdtemp(tmpl)) fail("mkdtemp failed");
    root = tmpl;
    std::mt19937_64 rng(11);
    for (const auto& p : files_tree_paths()) write(root + "/files/" + p, p.ends_with("empty") ? 0 : 1 + rng() % 3000, rng);
    write(root + "/fixed/part-0.rec", 16 + 7 * 100, rng);  // a 16-byte header, 100-byte records
    write(root + "/fixed/part-1.rec", 16 + 5 * 100, rng);
  }
  ~Trees() {
    std::error_code ec;
    stdfs::remove_all(root, ec);
  }
  static void write(const std::string& path, size_t size, std::mt19937_64& rng) {
    stdfs::create_directories(stdfs::path(path).parent_path());
    std::string bytes(size, '\0');
    for (auto& c : bytes) c = static_cast<char>(rng());
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
};

const Trees& trees() {
  static const Trees t;
  return t;
}

// ---- a fresh namespace per input ----

struct World {
  std::vector<std::unique_ptr<Dataset>> datasets;
  std::unique_ptr<Namespace> ns;
};

void open_dataset(World& w, const std::string& name, const std::string& format) {
  DatasetConfig dc;
  dc.name = name;
  dc.backend = trees().root + "/" + name;
  dc.format.format = format;
  if (format == "fixed") {
    dc.format.record_size = 100;
    dc.format.header_bytes = 16;
  }
  dc.plan.seed = 7;
  dc.plan.world_size = 2;
  dc.plan.epochs_listed = 2;
  DaemonConfig daemon;
  daemon.extent_size = 64 << 10;
  daemon.loader_threads = 1;
  auto ds = Dataset::open(dc, 64 << 20, daemon);
  if (!ds) fail("cannot open dataset " + name + ": " + ds.status().message());
  w.datasets.push_back(std::move(ds).value());
}

std::unique_ptr<World> make_world() {
  auto w = std::make_unique<World>();
  open_dataset(*w, "files", "files");
  open_dataset(*w, "fixed", "fixed");
  w->ns = std::make_unique<Namespace>(w->datasets, [](const Reader*) { return std::string("{\"fuzz\": true}\n"); }, 1, 0, 0);
  return w;
}

// ---- checks ----

void check_error(const dlfs::Status& s, const std::string& what) {
  if (s.err() <= 0 || s.message().empty()) fail(what + ": an error without an errno or a message");
}

bool same_attr(const Attr& a, const Attr& b) {
  return a.ino == b.ino && a.mode == b.mode && a.size == b.size && a.nlink == b.nlink && a.mtime_ns == b.mtime_ns;
}

// What a node reached by a lookup (or given by number) must satisfy.
void check_node(const Namespace& ns, const Attr& a, const std::string& where) {
  auto again = ns.getattr(a.ino);
  if (!again) fail(where + ": resolves, but getattr fails: " + again.status().message());
  if (!same_attr(*again, a)) fail(where + ": lookup and getattr disagree");
  auto id = decode_ino(a.ino);
  if (!id) fail(where + ": inode number " + std::to_string(a.ino) + " does not decode");
  if (encode_ino(*id) != a.ino) fail(where + ": inode number does not encode back");
  if (!S_ISDIR(a.mode) && !S_ISREG(a.mode)) fail(where + ": neither a directory nor a file");
}

void check_listing(const Namespace& ns, const Attr& dir, uint64_t offset, const std::string& where) {
  struct Entry {
    std::string name;
    Attr attr;
    uint64_t next;
  };
  std::vector<Entry> entries;
  dlfs::Status s = ns.readdir(dir.ino, offset, [&](std::string_view name, const Attr& a, uint64_t next) {
    if (entries.size() >= kMaxListed) return false;
    entries.push_back({std::string(name), a, next});
    return true;
  });
  if (!s) return check_error(s, where + ": readdir");
  uint64_t last = offset;
  for (const Entry& e : entries) {
    const std::string at = where + "/" + e.name;
    if (e.next <= last) fail(at + ": listing offsets do not increase");
    last = e.next;
    if (e.name.empty() || e.name.find('/') != std::string::npos || e.name.find('\0') != std::string::npos)
      fail(at + ": listed a name that is not a path component");
    if (e.name.size() > NAME_MAX) fail(where + ": listed a name of " + std::to_string(e.name.size()) +
                                       " bytes, longer than NAME_MAX: no lookup can reach it");
    if (e.name == "." || e.name == "..") continue;
    auto found = ns.lookup(dir.ino, e.name);
    if (!found) fail(at + ": listed, but lookup fails: " + found.status().message());
    // A name listed without its inode (lookup_only: generated per lookup, or
    // a size that costs work) may look up as another number, never another type.
    if (found->mode != e.attr.mode || (!e.attr.lookup_only && found->ino != e.attr.ino))
      fail(at + ": listed and looked up as different nodes");
    if (found->fresh_each_lookup && !e.attr.lookup_only)
      fail(at + ": a generated file was listed with an inode the kernel would keep");
  }
}

std::string gathered(const dlfs::cache::Gather& g) {
  std::string out;
  for (int i = 0; i < g.count(); ++i) out.append(static_cast<const char*>(g.iov()[i].iov_base), g.iov()[i].iov_len);
  return out;
}

// Reads [offset, offset + size) of a file, by inode as the FUSE adapter does.
dlfs::Result<std::string> read_range(const Namespace& ns, const Attr& a, uint64_t offset, uint64_t size) {
  dlfs::cache::Gather g;
  dlfs::Status s = ns.read(a.ino, offset, size, g);
  std::string bytes = gathered(g);
  g.release();
  if (!s) return s;
  if (bytes.size() > size) fail("a read returned more than it was asked for");
  return bytes;
}

std::string backend_bytes(const std::string& path, uint64_t offset, uint64_t size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read the backend file " + path);
  in.seekg(static_cast<std::streamoff>(std::min<uint64_t>(offset, INT64_MAX)));
  std::string out(size, '\0');
  in.read(out.data(), static_cast<std::streamsize>(size));
  out.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return out;
}

struct Request {
  uint64_t offset = 0, size = 4096;
  std::string xattr = "user.dlfs.seed";
  std::string backend_path;  // the backend file behind a raw path, if any
};

void check_file(const Namespace& ns, const Attr& a, const Request& rq, const std::string& where) {
  auto w = ns.open(a.ino, O_WRONLY);
  if (w || w.err() != EROFS) fail(where + ": opening for writing is not EROFS");
  auto r = ns.open(a.ino, O_RDONLY);
  if (!r) return check_error(r, where + ": open");
  auto bytes = read_range(ns, a, rq.offset, rq.size);
  if (!bytes) return check_error(bytes.status(), where + ": read");
  // Every size is exact (generated files too, per lookup): reads are full up
  // to the end, empty past it.
  const uint64_t want = rq.offset < a.size ? std::min(rq.size, a.size - rq.offset) : 0;
  if (bytes->size() != want)
    fail(where + ": read of " + std::to_string(rq.size) + " at " + std::to_string(rq.offset) + " returned " +
         std::to_string(bytes->size()) + " bytes of a " + std::to_string(a.size) + "-byte file");
  if (!rq.backend_path.empty() && *bytes != backend_bytes(rq.backend_path, rq.offset, rq.size))
    fail(where + ": raw bytes differ from the backend's");
  if (bytes->size() > 1) {
    const uint64_t half = bytes->size() / 2;
    auto first = read_range(ns, a, rq.offset, half);
    auto second = read_range(ns, a, rq.offset + half, bytes->size() - half);
    if (!first || !second || *first + *second != *bytes) fail(where + ": a read in two halves differs");
  }
}

void check_xattrs(const Namespace& ns, const Attr& a, const std::string& name, const std::string& where) {
  auto v = ns.getxattr(a.ino, name);
  if (v && v->empty()) fail(where + ": an empty attribute value");
  if (!v && v.status().err() != ENODATA && v.status().err() != ENOENT)
    fail(where + ": getxattr error is not ENODATA: " + v.status().message());
  auto names = ns.listxattr(a.ino);
  if (!names) return check_error(names.status(), where + ": listxattr");
  for (const auto& n : *names)
    if (auto got = ns.getxattr(a.ino, n); !got || got->empty()) fail(where + ": listed attribute " + n + " has no value");
}

// ---- one line ----

std::optional<uint64_t> number(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
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

// Resolves the path of a line, from the root or from the inode number in its
// first component ("#INO/..."); nullopt (after checking the error) where a
// component does not resolve.
std::optional<Attr> resolve(const Namespace& ns, std::string_view path, Request& rq) {
  const auto parts = split(path, '/');
  uint64_t ino = kRootIno;
  size_t first = 0;
  if (parts[0].starts_with('#')) {
    auto n = number(parts[0].substr(1));
    if (!n) return std::nullopt;
    ino = *n;
    first = 1;
  }
  std::string where = first ? std::string(parts[0]) : "";
  auto cur = ns.getattr(ino);
  // A number nobody handed out fails cleanly, and so must every lookup below it.
  if (!cur) check_error(cur.status(), where + ": getattr");
  else check_node(ns, *cur, where);
  for (size_t i = first; i < parts.size(); ++i) {
    where += "/" + std::string(parts[i]);
    auto next = ns.lookup(ino, parts[i]);
    if (!next) {
      check_error(next.status(), where);
      return std::nullopt;
    }
    if (!cur || !S_ISDIR(cur->mode)) fail(where + ": found below something that is not a directory");
    check_node(ns, *next, where);
    cur = next;
    ino = next->ino;
  }
  if (!cur) return std::nullopt;
  if (first == 0 && parts.size() > 2 && (parts[0] == "files" || parts[0] == "fixed") && parts[1] == "raw") {
    rq.backend_path = trees().root + "/" + std::string(parts[0]);
    for (size_t i = 2; i < parts.size(); ++i) rq.backend_path += "/" + std::string(parts[i]);
  }
  return *cur;
}

void run_line(const Namespace& ns, std::string_view line) {
  const auto fields = split(line, '\t');
  Request rq;
  if (fields.size() > 1) rq.offset = std::min<uint64_t>(number(fields[1]).value_or(0), INT64_MAX);
  if (fields.size() > 2) rq.size = std::min<uint64_t>(number(fields[2]).value_or(4096), kMaxRequest);
  if (fields.size() > 3) rq.xattr = std::string(fields[3]);
  const std::string where(fields[0]);
  const std::optional<Attr> a = resolve(ns, fields[0], rq);
  if (!a) return;
  if (S_ISDIR(a->mode)) check_listing(ns, *a, rq.offset % 4096, where);
  else check_file(ns, *a, rq, where);
  check_xattrs(ns, *a, rq.xattr, where);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    spdlog::set_level(spdlog::level::off);  // every dataset open logs a line
    return true;
  }();
  (void)quiet;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  auto world = make_world();
  const auto lines = split(input, '\n');
  for (size_t i = 0; i < lines.size() && i < kMaxLines; ++i) run_line(*world->ns, lines[i]);
  return 0;
}

std::vector<dlfs::fuzz::Seed> dlfs::fuzz::seeds() {
  std::string raw_paths;
  for (const auto& p : files_tree_paths()) raw_paths += "files/raw/" + p + "\t1\t100\n";
  const std::string big = "18446744073709551615";  // 2^64 - 1
  return {
      {"root", "#1\n.dlfs\n.dlfs/stats\nfiles\nfixed\nfiles/raw\nfiles/epochs\n"},
      {"raw_files", raw_paths},
      {"views_files", "files/epochs/0/2\nfiles/epochs/0/2/0.tar\t0\t1048576\nfiles/epochs/1/2/1.tar\t1000\t5000\n"
                      "files/epochs/0/2/1.index\nfiles/epochs/0/2/0\nfiles/epochs/0/2/1\t3\n"},
      {"views_fixed", "fixed/epochs/0/2/0.bin\t50\t250\nfixed/epochs/3/5/4.bin\t0\t1000\nfixed/epochs/0/1/0.tar\t512\t512\n"
                      "fixed/epochs/0/1/0\t2\nfixed/epochs/0/2/1.index\n"},
      {"entries", "files/epochs/0/1/0/0-100%25real\t0\t10\nfixed/epochs/0/2/0/0-part-0.rec%2F00000000.bin\n"},
      {"huge_numbers", "files/epochs/" + big + "\nfiles/epochs/4294967296/2\nfiles/epochs/0/65536\nfiles/epochs/0/0\n"
                       "files/epochs/16777215/65535/65534.tar\t" + big + "\t" + big + "\nfiles/epochs/0/2/2.tar\n"
                       "files/epochs/0/2/" + big + ".tar\nfiles/epochs/00/2\nfiles/epochs/0/2/0.tar.tar\n"},
      {"dots", ".\n..\nfiles/./raw\nfiles/raw/..\nfiles/epochs/0/2/.tar\nfiles/epochs/0/2/0.\nfiles//raw\n/files\n"},
      {"inodes", "#1\n#2\t0\t10\n#3\n#" + big + "\n#" + std::to_string((1ull << 48) | (9ull << 40)) + "\n#" +
                     std::to_string((1ull << 48) | (47ull << 40)) + "/x\n#" + std::to_string((1ull << 48) | (79ull << 40)) +
                     "\n#" + std::to_string((2ull << 48) | (5ull << 40) | 3) + "\t0\t100\n"},
      {"xattrs", "files/epochs/0/2/0.tar\t0\t1\tuser.dlfs.rank\nfiles/epochs/0/2/0.tar\t0\t1\tuser.nope\n"
                 "files/raw/a/b/c.bin\t0\t1\tuser.dlfs.seed\n"},
  };
}
