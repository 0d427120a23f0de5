// Fuzz target: the LMDB meta-page reader (provenance/lmdb_meta.cc,
// read_meta_key; `tools/fuzz.sh lmdb_meta`), which reads the start of a
// data.mdb without liblmdb to tell whether a sidecar belongs to it. The input
// is the file: it goes into a memfd and is read through the real pread path.
//
// Invariants: an error names the file; a success means both meta pages are
// there with the magic, a plausible page size, and the newer txnid wins.
// The offsets below are LMDB's on-disk layout, written out independently of
// the reader (they are also what the seeds are built from).
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <lmdb.h>

#include "provenance/lmdb_meta.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using dlfs::provenance::lmdb::describe;
using dlfs::provenance::lmdb::MetaKey;
using dlfs::provenance::lmdb::read_meta_key;

const std::string kPath = "fuzz/data.mdb";
constexpr size_t kMagicAt = 16, kVersionAt = 20, kPageSizeAt = 16 + 24, kMainDbAt = 16 + 72, kLastPgAt = 16 + 120,
                 kTxnidAt = 16 + 128, kFlagsAt = 10;

[[noreturn]] void fail(const std::string& what) { dlfs::fuzz::fail("lmdb_meta_fuzz", what); }

template <typename T>
T load(const std::string& s, size_t at) {
  T v{};
  if (at + sizeof v <= s.size()) std::memcpy(&v, s.data() + at, sizeof v);
  return v;
}

template <typename T>
void store(std::string& s, size_t at, T v) {
  std::memcpy(s.data() + at, &v, sizeof v);
}

void check(const std::string& bytes, const dlfs::Result<MetaKey>& r) {
  if (!r) {
    if (r.status().err() <= 0) fail("an error without an errno");
    if (r.status().message().rfind(kPath + ": ", 0) != 0) fail("error does not name the file: " + r.status().message());
    return;
  }
  const MetaKey& k = *r;
  const uint32_t ps = k.page_size;
  if (ps < 512 || ps > 65536 || (ps & (ps - 1)) != 0) fail("accepted page size " + std::to_string(ps));
  if (bytes.size() < ps + kTxnidAt + 8) fail("accepted a file too short for meta page 1");
  for (size_t page : {size_t{0}, size_t{ps}}) {
    if (load<uint32_t>(bytes, page + kMagicAt) != dlfs::provenance::lmdb::kMagic) fail("accepted a page without the magic");
    if (load<uint32_t>(bytes, page + kPageSizeAt) != ps) fail("meta pages disagree on the page size");
  }
  const uint64_t t0 = load<uint64_t>(bytes, kTxnidAt), t1 = load<uint64_t>(bytes, ps + kTxnidAt);
  if (k.txnid != (t0 < t1 ? t1 : t0)) fail("did not pick the meta page with the higher txnid");
  const size_t chosen = t0 < t1 ? ps : 0;
  if (k.last_pgno != load<uint64_t>(bytes, chosen + kLastPgAt) || k.last_pgno < 1) fail("wrong or impossible last page");
  if (k.entries != load<uint64_t>(bytes, chosen + kMainDbAt + 32)) fail("entries from the wrong page");
  if (describe(k).empty()) fail("empty description");
}

// A synthetic data.mdb start: two meta pages (and `extra` pages after them).
std::string meta_pages(uint32_t ps, uint64_t txn0, uint64_t txn1, uint64_t entries, size_t extra = 0) {
  std::string s((2 + extra) * ps, '\0');
  for (uint32_t page = 0; page < 2; ++page) {
    const size_t at = size_t{page} * ps;
    store<uint64_t>(s, at, page);                 // pgno
    store<uint16_t>(s, at + kFlagsAt, 0x08);      // P_META
    store<uint32_t>(s, at + kMagicAt, dlfs::provenance::lmdb::kMagic);
    store<uint32_t>(s, at + kVersionAt, dlfs::provenance::lmdb::kDataVersion);
    store<uint32_t>(s, at + kPageSizeAt, ps);
    store<uint16_t>(s, at + kMainDbAt + 6, entries ? 1 : 0);  // depth
    store<uint64_t>(s, at + kMainDbAt + 16, entries ? 1 : 0);  // leaf pages
    store<uint64_t>(s, at + kMainDbAt + 32, entries);
    store<uint64_t>(s, at + kMainDbAt + 40, entries ? 2 : ~uint64_t{0});  // root
    store<uint64_t>(s, at + kLastPgAt, 1 + extra);
    store<uint64_t>(s, at + kTxnidAt, page == 0 ? txn0 : txn1);
  }
  return s;
}

// The first two pages of a real data.mdb written by liblmdb ("" if that fails).
std::string real_meta_pages() {
  char dir[] = "/tmp/dlfs-fuzz-lmdb-XXXXXX";
  if (!::mkdtemp(dir)) return "";
  MDB_env* env = nullptr;
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  std::string out;
  if (mdb_env_create(&env) == 0 && mdb_env_open(env, dir, MDB_NOSYNC, 0644) == 0 &&
      mdb_txn_begin(env, nullptr, 0, &txn) == 0 && mdb_dbi_open(txn, nullptr, 0, &dbi) == 0) {
    for (int i = 0; i < 20; ++i) {
      std::string key = "key-" + std::to_string(i), value(100 + 300 * i, static_cast<char>('a' + i));
      MDB_val k{key.size(), key.data()}, v{value.size(), value.data()};
      mdb_put(txn, dbi, &k, &v, 0);
    }
    mdb_txn_commit(txn);
  }
  if (env) mdb_env_close(env);
  const std::string file = std::string(dir) + "/data.mdb";
  if (FILE* f = std::fopen(file.c_str(), "rb")) {
    out.resize(8192);
    out.resize(std::fread(out.data(), 1, out.size(), f));
    std::fclose(f);
  }
  ::unlink(file.c_str());
  ::unlink((std::string(dir) + "/lock.mdb").c_str());
  ::rmdir(dir);
  return out;
}

// The input as a file, read by the reader under test.
dlfs::Result<MetaKey> read_as_file(const std::string& bytes) {
  int fd = ::memfd_create("lmdb_meta_fuzz", MFD_CLOEXEC);
  if (fd < 0) fail("memfd_create failed");
  if (!bytes.empty() && ::pwrite(fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    ::close(fd);
    fail("cannot write the input to the memfd");
  }
  auto r = read_meta_key(fd, kPath);
  ::close(fd);
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  check(bytes, read_as_file(bytes));
  return 0;
}

std::vector<dlfs::fuzz::Seed> dlfs::fuzz::seeds() {
  std::vector<Seed> out;
  for (uint32_t ps : {512u, 4096u, 65536u}) {
    const std::string p = std::to_string(ps);
    out.push_back({"meta_" + p + "_page0_newer", meta_pages(ps, 9, 8, 1000)});
    out.push_back({"meta_" + p + "_page1_newer", meta_pages(ps, 4, 5, 3, 2)});
    out.push_back({"meta_" + p + "_empty_db", meta_pages(ps, 1, 0, 0)});
  }
  std::string real = real_meta_pages();
  if (real.empty()) ::fail("liblmdb could not write a seed database");
  out.push_back({"liblmdb_20_records", real});
  // Every seed so far is a valid start of a data.mdb: the reader must accept
  // it, or the checks above would only ever see errors.
  for (const Seed& s : out)
    if (auto r = read_as_file(s.bytes); !r) ::fail("seed " + s.name + " refused: " + r.status().message());
  std::string truncated = meta_pages(4096, 2, 3, 10);
  truncated.resize(4096 + 100);
  out.push_back({"meta_truncated_page1", truncated});
  return out;
}
