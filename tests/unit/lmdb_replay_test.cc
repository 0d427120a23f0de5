// LMDB datasets without seeks: the replay of liblmdb's allocator must put
// every value exactly where liblmdb put it. Databases are built here with
// liblmdb itself (recording their provenance as they are built) and each
// replay is compared, record by record, with a cursor walk of the file.
//
// Grid (value size x key kind x commit interval x insertion): record counts
// per cell are chosen so the whole suite stays within about two minutes on a
// 2-core CI machine: small values get the most records, 196608-byte values
// (48 overflow pages each) 1000 records, commit-every-1 cells fewer records
// than batched ones (each commit is a write of the dirty pages and a meta
// page). See records_for().
#include <fcntl.h>
#include <lmdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "provenance/lmdb_meta.h"
#include "provenance/lmdb_replay.h"
#include "provenance/lmdb_walk.h"
#include "temp_dir.h"

namespace dlfs::provenance::lmdb {
namespace {

namespace stdfs = std::filesystem;

// ---------------------------------------------------------------------------
// Building databases with liblmdb

enum class KeyKind { be64, filename };
enum class Order { sorted_append, sorted, shuffled };

struct BuildSpec {
  uint64_t records = 0;
  KeyKind keys = KeyKind::be64;
  std::vector<uint32_t> value_sizes;  // one for all, or per record in insertion order
  uint64_t commit_every = 0;          // 0: a single transaction
  std::vector<uint64_t> txn_sizes;    // if set: records per transaction (overrides commit_every)
  Order order = Order::sorted;
  uint64_t seed = 1;
};

#define LMDB_OK(expr)                                                   \
  do {                                                                  \
    int rc_ = (expr);                                                   \
    ASSERT_EQ(rc_, 0) << #expr << ": " << mdb_strerror(rc_);           \
  } while (0)

uint32_t lmdb_version_full() {
  int maj = 0, min = 0, patch = 0;
  mdb_version(&maj, &min, &patch);
  return kVersionFull(static_cast<uint32_t>(maj), static_cast<uint32_t>(min), static_cast<uint32_t>(patch));
}

// Keys in key order (index = rank). Filename-like keys look like ImageNet
// paths, of varying length, bytewise sorted as liblmdb's default comparator
// (memcmp, then length) orders them.
std::vector<std::string> make_keys(uint64_t n, KeyKind kind, uint64_t seed) {
  std::vector<std::string> keys;
  keys.reserve(n);
  if (kind == KeyKind::be64) {
    for (uint64_t r = 0; r < n; ++r) {
      uint64_t v = r * 7 + 3;  // not contiguous, still ordered
      std::string k(8, '\0');
      for (int b = 0; b < 8; ++b) k[b] = static_cast<char>(v >> (56 - 8 * b));
      keys.push_back(std::move(k));
    }
    return keys;
  }
  std::mt19937_64 rng(seed * 7919 + 17);
  std::set<std::string> uniq;
  char buf[128];
  const char* splits[] = {"train", "val", "train_extra"};
  while (uniq.size() < n) {
    unsigned cls = static_cast<unsigned>(rng() % 1000);
    unsigned img = static_cast<unsigned>(rng() % 2000000);
    const char* split = splits[rng() % 3];
    const char* ext = (rng() % 5) ? "JPEG" : "jpeg.thumbnail.png";
    std::snprintf(buf, sizeof buf, "%s/n%08u/n%08u_%u.%s", split, 1440764 + cls * 37, 1440764 + cls * 37, img, ext);
    uniq.insert(buf);
  }
  keys.assign(uniq.begin(), uniq.end());
  return keys;
}

struct Built {
  std::string dir;
  Provenance prov;
  double build_seconds = 0;
};

void build_db(const std::string& dir, const BuildSpec& s, Built* out) {
  out->dir = dir;
  stdfs::create_directories(dir);
  const uint64_t n = s.records;
  std::vector<std::string> keys = make_keys(n, s.keys, s.seed);
  std::vector<uint64_t> rank(n);
  std::iota(rank.begin(), rank.end(), 0);
  if (s.order == Order::shuffled) {
    std::mt19937_64 rng(s.seed);
    std::shuffle(rank.begin(), rank.end(), rng);
  }
  const bool append = s.order == Order::sorted_append;
  const uint32_t max_v = *std::max_element(s.value_sizes.begin(), s.value_sizes.end());
  std::vector<char> payload(max_v + 1);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 131 + 7);

  auto t0 = std::chrono::steady_clock::now();
  MDB_env* env = nullptr;
  LMDB_OK(mdb_env_create(&env));
  LMDB_OK(mdb_env_set_mapsize(env, size_t{1} << 38));  // address space only
  LMDB_OK(mdb_env_open(env, dir.c_str(), MDB_NOSYNC, 0644));
  MDB_envinfo info{};
  MDB_stat est{};
  LMDB_OK(mdb_env_stat(env, &est));
  (void)info;

  Provenance& p = out->prov;
  p.page_size = est.ms_psize;
  p.lmdb_version = lmdb_version_full();
  p.append = append;
  p.records = n;
  p.key_sizes.clear();
  bool same_k = true;
  for (uint64_t i = 0; i < n; ++i) {
    if (keys[rank[i]].size() != keys[rank[0]].size()) same_k = false;
  }
  if (same_k) {
    p.key_sizes = {static_cast<uint32_t>(keys[0].size())};
  } else {
    for (uint64_t i = 0; i < n; ++i) p.key_sizes.push_back(static_cast<uint32_t>(keys[rank[i]].size()));
  }
  p.value_sizes = s.value_sizes;
  if (s.order == Order::shuffled) p.key_rank = rank;
  p.txn_records = {s.commit_every ? s.commit_every : n};
  if (!s.txn_sizes.empty()) p.txn_records = s.txn_sizes;

  MDB_dbi dbi = 0;
  uint64_t i = 0;
  size_t t = 0;
  while (i < n) {
    MDB_txn* txn = nullptr;
    LMDB_OK(mdb_txn_begin(env, nullptr, 0, &txn));
    LMDB_OK(mdb_dbi_open(txn, nullptr, 0, &dbi));
    uint64_t end = s.commit_every ? std::min(n, i + s.commit_every) : n;
    if (!s.txn_sizes.empty()) end = std::min(n, i + s.txn_sizes.at(t++));
    for (; i < end; ++i) {
      const std::string& k = keys[rank[i]];
      uint32_t vs = s.value_sizes.size() == 1 ? s.value_sizes[0] : s.value_sizes[i];
      MDB_val mk{k.size(), const_cast<char*>(k.data())};
      MDB_val mv{vs, payload.data() + (i % 2)};
      int rc = mdb_put(txn, dbi, &mk, &mv, append ? MDB_APPEND : 0);
      if (rc != 0) mdb_txn_abort(txn);
      ASSERT_EQ(rc, 0) << "mdb_put record " << i << ": " << mdb_strerror(rc);
    }
    LMDB_OK(mdb_txn_commit(txn));
  }
  mdb_env_close(env);
  out->build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

using ::dlfs::test::TempDir;

// Compares the replay with the walk for every record; on a mismatch says how
// many records differ and shows the first few.
// R failed and its message names WHAT (else gtest prints what it got).
template <typename T>
::testing::AssertionResult fails_with(const Result<T>& r, const std::string& what) {
  if (r.is_ok()) return ::testing::AssertionFailure() << "succeeded; expected an error naming '" << what << "'";
  if (r.status().message().find(what) == std::string::npos)
    return ::testing::AssertionFailure() << "error '" << r.status().message() << "' does not name '" << what << "'";
  return ::testing::AssertionSuccess();
}

// A new environment in DIR (created), opened for writing without fsync.
// MAPSIZE 0 keeps liblmdb's default; MAXDBS > 0 allows named databases.
void open_env(const std::string& dir, MDB_env** env, size_t mapsize = 0, unsigned maxdbs = 0) {
  stdfs::create_directories(dir);
  LMDB_OK(mdb_env_create(env));
  if (mapsize) LMDB_OK(mdb_env_set_mapsize(*env, mapsize));
  if (maxdbs) LMDB_OK(mdb_env_set_maxdbs(*env, maxdbs));
  LMDB_OK(mdb_env_open(*env, dir.c_str(), MDB_NOSYNC, 0644));
}

void expect_replay_matches(const Built& b, double* replay_s = nullptr, double* walk_s = nullptr) {
  auto t0 = std::chrono::steady_clock::now();
  auto rep = replay(b.prov);
  auto t1 = std::chrono::steady_clock::now();
  auto walk = walk_locations(b.dir);
  auto t2 = std::chrono::steady_clock::now();
  if (replay_s) *replay_s = std::chrono::duration<double>(t1 - t0).count();
  if (walk_s) *walk_s = std::chrono::duration<double>(t2 - t1).count();
  ASSERT_TRUE(rep.is_ok()) << rep.status().message();
  ASSERT_TRUE(walk.is_ok()) << walk.status().message();
  const Locations& a = rep->locations;
  const Locations& w = *walk;
  ASSERT_EQ(w.size(), b.prov.records);
  ASSERT_EQ(a.size(), w.size());
  uint64_t wrong = 0;
  std::string first;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == w[i]) continue;
    if (++wrong <= 5) {
      first += "\n  key rank " + std::to_string(i) + ": replay offset " + std::to_string(a[i].offset) + " (page " +
               std::to_string(a[i].offset / b.prov.page_size) + ") length " + std::to_string(a[i].length) +
               ", walk offset " + std::to_string(w[i].offset) + " (page " +
               std::to_string(w[i].offset / b.prov.page_size) + ") length " + std::to_string(w[i].length);
    }
  }
  EXPECT_EQ(wrong, 0u) << wrong << " of " << a.size() << " records differ:" << first;
  auto meta = read_meta_key(b.dir + "/data.mdb");
  ASSERT_TRUE(meta.is_ok()) << meta.status().message();
  EXPECT_EQ(rep->meta, *meta) << "replay predicts: " << describe(rep->meta) << " (branch " << rep->meta.branch_pages
                              << ", leaf " << rep->meta.leaf_pages << ", overflow " << rep->meta.overflow_pages
                              << ")\nfile has:        " << describe(*meta) << " (branch " << meta->branch_pages
                              << ", leaf " << meta->leaf_pages << ", overflow " << meta->overflow_pages << ")";
}

// ---------------------------------------------------------------------------
// The grid

enum class Values { v100, v2037, v3072, v4096, v196608, variable };

struct Cell {
  Values values;
  KeyKind keys;
  uint64_t commit_every;  // 0 = one transaction
  Order order;
};

uint64_t records_for(const Cell& c) {
  const bool every1 = c.commit_every == 1;
  switch (c.values) {
    case Values::v100: return every1 ? 20000 : 100000;
    case Values::v2037:
    case Values::v3072: return every1 ? 5000 : 20000;
    case Values::v4096: return every1 ? 4000 : 10000;
    case Values::v196608: return 1000;
    case Values::variable: return every1 ? 5000 : 10000;
  }
  return 1000;
}

std::vector<uint32_t> value_sizes_for(const Cell& c, uint64_t n, uint64_t seed) {
  switch (c.values) {
    case Values::v100: return {100};
    case Values::v2037: return {2037};
    case Values::v3072: return {3072};
    case Values::v4096: return {4096};
    case Values::v196608: return {196608};
    case Values::variable: break;
  }
  // Mixed: in-page values, values around the overflow threshold, and
  // multi-page overflow values, as an image dataset of varying sizes has.
  std::mt19937_64 rng(seed * 31 + 5);
  std::vector<uint32_t> v(n);
  for (auto& s : v) {
    switch (rng() % 4) {
      case 0: s = 1 + static_cast<uint32_t>(rng() % 1500); break;
      case 1: s = 1900 + static_cast<uint32_t>(rng() % 300); break;
      case 2: s = 2000 + static_cast<uint32_t>(rng() % 14000); break;
      default: s = 16000 + static_cast<uint32_t>(rng() % 120000); break;
    }
  }
  return v;
}

std::string cell_name(const Cell& c) {
  static const char* vn[] = {"v100", "v2037", "v3072", "v4096", "v196608", "vvar"};
  static const char* on[] = {"SortedAppend", "Sorted", "Shuffled"};
  std::string s = vn[static_cast<int>(c.values)];
  s += c.keys == KeyKind::be64 ? "_k8" : "_kname";
  s += c.commit_every ? "_commit" + std::to_string(c.commit_every) : std::string("_onetxn");
  s += std::string("_") + on[static_cast<int>(c.order)];
  return s;
}

std::vector<Cell> grid() {
  std::vector<Cell> cells;
  for (Values v : {Values::v100, Values::v2037, Values::v3072, Values::v4096, Values::v196608, Values::variable}) {
    for (KeyKind k : {KeyKind::be64, KeyKind::filename}) {
      for (uint64_t ce : {uint64_t{1}, uint64_t{7}, uint64_t{1000}, uint64_t{0}}) {
        for (Order o : {Order::sorted_append, Order::sorted, Order::shuffled}) cells.push_back({v, k, ce, o});
      }
    }
  }
  return cells;
}

class LmdbReplayGrid : public ::testing::TestWithParam<Cell> {};

TEST_P(LmdbReplayGrid, ReplayEqualsWalkForEveryRecord) {
  const Cell& c = GetParam();
  TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  BuildSpec s;
  s.records = records_for(c);
  s.keys = c.keys;
  s.seed = std::hash<std::string>{}(cell_name(c)) % 100000 + 1;
  s.value_sizes = value_sizes_for(c, s.records, s.seed);
  s.commit_every = c.commit_every;
  s.order = c.order;
  Built b;
  build_db(tmp.path() + "/db", s, &b);
  if (HasFatalFailure()) return;
  ASSERT_EQ(b.prov.page_size, kModeledPageSize) << "this machine's LMDB page size is not the modeled one";
  double rs = 0, ws = 0;
  expect_replay_matches(b, &rs, &ws);
  RecordProperty("records", static_cast<int>(s.records));
  std::printf("[ cell     ] %s: %llu records, build %.3f s, replay %.3f s, walk %.3f s\n", cell_name(c).c_str(),
              static_cast<unsigned long long>(s.records), b.build_seconds, rs, ws);
}

INSTANTIATE_TEST_SUITE_P(Grid, LmdbReplayGrid, ::testing::ValuesIn(grid()),
                         [](const ::testing::TestParamInfo<Cell>& i) { return cell_name(i.param); });

// ---------------------------------------------------------------------------
// 1.28 million records (the size of ImageNet's training set)

TEST(LmdbLong, ImageNetSizedBuild) {
  const char* on = std::getenv("DLFS_LMDB_LONG");
  if (!on || std::string(on) != "1") {
    GTEST_SKIP() << "1.28e6-record build (about 250 MB, a minute or more): set DLFS_LMDB_LONG=1 to run";
  }
  TempDir tmp;
  // Caffe-style: filename keys put in key order with flags 0, a commit every
  // 1000 records. 100-byte values keep the file near 250 MB; 3 KiB values
  // would make it 5 GB.
  BuildSpec s;
  s.records = 1280000;
  s.keys = KeyKind::filename;
  s.value_sizes = {100};
  s.commit_every = 1000;
  s.order = Order::sorted;
  Built b;
  build_db(tmp.path() + "/db", s, &b);
  if (HasFatalFailure()) return;
  double rs = 0, ws = 0;
  expect_replay_matches(b, &rs, &ws);
  std::printf("[ long     ] 1.28e6 records: build %.2f s, replay %.3f s, walk %.3f s\n", b.build_seconds, rs, ws);
}

// ---------------------------------------------------------------------------
// Replay refusals

Provenance small_prov() {
  Provenance p;
  p.page_size = 4096;
  p.lmdb_version = kVersionFull(0, 9, 24);
  p.records = 10;
  p.key_sizes = {8};
  p.value_sizes = {100};
  p.txn_records = {3};
  return p;
}

TEST(LmdbReplay, RefusesWhatItCannotModel) {
  ASSERT_TRUE(replay(small_prov()).is_ok());
  {
    auto p = small_prov();
    p.page_size = 8192;
    auto r = replay(p);
    ASSERT_TRUE(fails_with(r, "page size 8192"));
  }
  {
    auto p = small_prov();
    p.lmdb_version = kVersionFull(0, 9, 23);
    auto r = replay(p);
    ASSERT_TRUE(fails_with(r, "0.9.23"));
    p.lmdb_version = 0;
    EXPECT_FALSE(replay(p).is_ok());
    p.lmdb_version = kVersionFull(0, 9, 32);
    EXPECT_FALSE(replay(p).is_ok());
    p.lmdb_version = kVersionFull(0, 9, 31);
    EXPECT_TRUE(replay(p).is_ok());
  }
  {
    auto p = small_prov();
    p.value_sizes = {1, 2, 3};
    auto r = replay(p);
    ASSERT_TRUE(fails_with(r, "value_sizes"));
  }
  {
    auto p = small_prov();
    p.key_sizes = {512};
    EXPECT_FALSE(replay(p).is_ok());
    p.key_sizes = {0};
    EXPECT_FALSE(replay(p).is_ok());
  }
  {
    auto p = small_prov();
    p.key_rank = {0, 1, 2, 3, 4, 5, 6, 7, 8, 8};
    auto r = replay(p);
    ASSERT_TRUE(fails_with(r, "permutation"));
  }
  {
    auto p = small_prov();
    p.append = true;
    p.key_rank = {1, 0, 2, 3, 4, 5, 6, 7, 8, 9};
    auto r = replay(p);
    ASSERT_TRUE(fails_with(r, "MDB_APPEND"));
  }
  {
    auto p = small_prov();
    p.txn_records = {3, 3, 3};
    auto r = replay(p);
    ASSERT_TRUE(fails_with(r, "9 records"));
    p.txn_records = {0};
    EXPECT_FALSE(replay(p).is_ok());
    p.txn_records = {};
    EXPECT_FALSE(replay(p).is_ok());
    p.txn_records = {3, 0, 3, 4};  // an empty transaction commits nothing: allowed
    EXPECT_TRUE(replay(p).is_ok());
  }
}

// An explicit list of transaction sizes, with an empty transaction in the
// middle (liblmdb does not advance the txnid for it).
TEST(LmdbReplay, ExplicitTransactionSizes) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/db";
  const std::vector<uint64_t> txns = {1, 0, 500, 3, 0, 2000, 1, 496};
  MDB_env* env = nullptr;
  ASSERT_NO_FATAL_FAILURE(open_env(dir, &env, size_t{1} << 32));
  std::vector<std::string> keys = make_keys(3001, KeyKind::be64, 3);
  std::vector<char> val(3072, 'v');
  uint64_t i = 0;
  for (uint64_t t : txns) {
    MDB_txn* txn = nullptr;
    LMDB_OK(mdb_txn_begin(env, nullptr, 0, &txn));
    MDB_dbi dbi;
    LMDB_OK(mdb_dbi_open(txn, nullptr, 0, &dbi));
    for (uint64_t e = i + t; i < e; ++i) {
      MDB_val k{keys[i].size(), keys[i].data()};
      MDB_val v{val.size(), val.data()};
      LMDB_OK(mdb_put(txn, dbi, &k, &v, 0));
    }
    LMDB_OK(mdb_txn_commit(txn));
  }
  mdb_env_close(env);
  Built b;
  b.dir = dir;
  b.prov.page_size = 4096;
  b.prov.lmdb_version = lmdb_version_full();
  b.prov.records = 3001;
  b.prov.key_sizes = {8};
  b.prov.value_sizes = {3072};
  b.prov.txn_records = txns;
  expect_replay_matches(b);
}

// ---------------------------------------------------------------------------
// read_meta_key

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(LmdbMeta, TruncatedFiles) {
  TempDir tmp;
  const std::string f = tmp.path() + "/data.mdb";
  write_file(f, std::string(100, '\0'));
  auto r = read_meta_key(f);
  ASSERT_TRUE(fails_with(r, f));
  EXPECT_TRUE(fails_with(r, "truncated"));

  write_file(f, "");
  r = read_meta_key(f);
  ASSERT_TRUE(fails_with(r, "truncated"));

  // A real meta page 0 but the file ends before meta page 1.
  TempDir db;
  BuildSpec s;
  s.records = 10;
  s.value_sizes = {10};
  Built b;
  build_db(db.path() + "/db", s, &b);
  if (HasFatalFailure()) return;
  std::ifstream in(db.path() + "/db/data.mdb", std::ios::binary);
  std::string head(4096 + 20, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  write_file(f, head);
  r = read_meta_key(f);
  ASSERT_TRUE(fails_with(r, "meta page 1"));
}

TEST(LmdbMeta, BadMagicAndVersion) {
  TempDir tmp;
  const std::string f = tmp.path() + "/data.mdb";
  write_file(f, std::string(8192, 'x'));
  auto r = read_meta_key(f);
  ASSERT_TRUE(fails_with(r, "not an LMDB data file"));
  EXPECT_TRUE(fails_with(r, f));

  // A copy of a real file with the version field changed.
  TempDir db;
  BuildSpec s;
  s.records = 10;
  s.value_sizes = {10};
  Built b;
  build_db(db.path() + "/db", s, &b);
  if (HasFatalFailure()) return;
  std::ifstream in(db.path() + "/db/data.mdb", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GE(bytes.size(), 8192u);
  uint32_t v2 = 2;
  std::memcpy(bytes.data() + 16 + 4, &v2, 4);
  write_file(f, bytes);
  r = read_meta_key(f);
  ASSERT_TRUE(fails_with(r, "unsupported"));
  EXPECT_EQ(r.status().err(), ENOTSUP);
}

TEST(LmdbMeta, PicksTheNewerMetaPage) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/db";
  MDB_env* env = nullptr;
  ASSERT_NO_FATAL_FAILURE(open_env(dir, &env, size_t{1} << 30));
  auto put_batch = [&](uint64_t from, uint64_t count) {
    MDB_txn* txn = nullptr;
    ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
    MDB_dbi dbi;
    ASSERT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
    std::vector<char> val(3000, 'v');
    for (uint64_t i = from; i < from + count; ++i) {
      uint64_t be = __builtin_bswap64(i);
      MDB_val k{8, &be};
      MDB_val v{val.size(), val.data()};
      ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
    }
    ASSERT_EQ(mdb_txn_commit(txn), 0);
  };
  auto check = [&](uint64_t want_txnid) {
    MDB_envinfo info{};
    MDB_stat st{};
    ASSERT_EQ(mdb_env_info(env, &info), 0);
    MDB_txn* txn = nullptr;
    ASSERT_EQ(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn), 0);
    MDB_dbi dbi;
    ASSERT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
    ASSERT_EQ(mdb_stat(txn, dbi, &st), 0);
    mdb_txn_abort(txn);
    auto m = read_meta_key(dir + "/data.mdb");
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    EXPECT_EQ(m->txnid, want_txnid);
    EXPECT_EQ(m->txnid, info.me_last_txnid);
    EXPECT_EQ(m->last_pgno, info.me_last_pgno);
    EXPECT_EQ(m->page_size, st.ms_psize);
    EXPECT_EQ(m->depth, st.ms_depth);
    EXPECT_EQ(m->branch_pages, st.ms_branch_pages);
    EXPECT_EQ(m->leaf_pages, st.ms_leaf_pages);
    EXPECT_EQ(m->overflow_pages, st.ms_overflow_pages);
    EXPECT_EQ(m->entries, st.ms_entries);
    EXPECT_EQ(m->version, 1u);
    EXPECT_NE(describe(*m).find("txnid " + std::to_string(want_txnid)), std::string::npos) << describe(*m);
  };
  put_batch(0, 100);  // txnid 1: meta page 1
  check(1);
  auto first = read_meta_key(dir + "/data.mdb");
  put_batch(100, 100);  // txnid 2: meta page 0
  check(2);
  put_batch(200, 1);  // txnid 3: meta page 1 again
  check(3);
  auto last = read_meta_key(dir + "/data.mdb");
  ASSERT_TRUE(first.is_ok() && last.is_ok());
  EXPECT_FALSE(*first == *last);
  mdb_env_close(env);
}

// ---------------------------------------------------------------------------
// walk_locations

TEST(LmdbWalk, DataFileReadOnlyAndNoLockFile) {
  TempDir tmp;
  BuildSpec s;
  s.records = 2000;
  s.value_sizes = {5000};
  Built b;
  build_db(tmp.path() + "/db", s, &b);
  if (HasFatalFailure()) return;
  stdfs::remove(b.dir + "/lock.mdb");
  ::chmod((b.dir + "/data.mdb").c_str(), 0444);
  auto by_dir = walk_locations(b.dir);
  ASSERT_TRUE(by_dir.is_ok()) << by_dir.status().message();
  auto by_file = walk_locations(b.dir + "/data.mdb");
  ASSERT_TRUE(by_file.is_ok()) << by_file.status().message();
  EXPECT_EQ(*by_dir, *by_file);
  EXPECT_FALSE(stdfs::exists(b.dir + "/lock.mdb"));
  EXPECT_FALSE(stdfs::exists(b.dir + "/data.mdb-lock"));
  ASSERT_EQ(by_dir->size(), 2000u);
  // The bytes at the walked offsets are the values that were put.
  int fd = ::open((b.dir + "/data.mdb").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::vector<char> buf(5000);
  for (size_t i : {size_t{0}, size_t{999}, size_t{1999}}) {
    const ValueLocation& l = (*by_dir)[i];
    ASSERT_EQ(l.length, 5000u);
    ASSERT_EQ(::pread(fd, buf.data(), l.length, static_cast<off_t>(l.offset)), 5000);
    // build_db writes payload starting at index (insertion index % 2).
    size_t start = i % 2;
    EXPECT_EQ(buf[0], static_cast<char>(start * 131 + 7));
    EXPECT_EQ(buf[4999], static_cast<char>((start + 4999) * 131 + 7));
  }
  ::close(fd);
}

TEST(LmdbWalk, Errors) {
  TempDir tmp;
  auto r = walk_locations(tmp.path() + "/nonexistent");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().err(), ENOENT);

  write_file(tmp.path() + "/junk.mdb", std::string(8192, 'j'));
  r = walk_locations(tmp.path() + "/junk.mdb");
  ASSERT_TRUE(fails_with(r, "not an LMDB data file"));

  // Dupsort main database.
  const std::string dup = tmp.path() + "/dup";
  {
    MDB_env* env = nullptr;
    ASSERT_NO_FATAL_FAILURE(open_env(dup, &env));
    MDB_txn* txn = nullptr;
    LMDB_OK(mdb_txn_begin(env, nullptr, 0, &txn));
    MDB_dbi dbi;
    LMDB_OK(mdb_dbi_open(txn, nullptr, MDB_DUPSORT, &dbi));
    char k[] = "key", v1[] = "a", v2[] = "b";
    MDB_val mk{3, k}, a{1, v1}, bb{1, v2};
    LMDB_OK(mdb_put(txn, dbi, &mk, &a, 0));
    LMDB_OK(mdb_put(txn, dbi, &mk, &bb, 0));
    LMDB_OK(mdb_txn_commit(txn));
    mdb_env_close(env);
  }
  r = walk_locations(dup);
  ASSERT_TRUE(fails_with(r, "DUPSORT"));
  EXPECT_EQ(r.status().err(), ENOTSUP);

  // Named sub-databases.
  const std::string named = tmp.path() + "/named";
  {
    MDB_env* env = nullptr;
    ASSERT_NO_FATAL_FAILURE(open_env(named, &env, 0, 4));
    MDB_txn* txn = nullptr;
    LMDB_OK(mdb_txn_begin(env, nullptr, 0, &txn));
    MDB_dbi dbi;
    LMDB_OK(mdb_dbi_open(txn, "images", MDB_CREATE, &dbi));
    char k[] = "key", v[] = "value";
    MDB_val mk{3, k}, mv{5, v};
    LMDB_OK(mdb_put(txn, dbi, &mk, &mv, 0));
    LMDB_OK(mdb_txn_commit(txn));
    mdb_env_close(env);
  }
  r = walk_locations(named);
  ASSERT_TRUE(fails_with(r, "named sub-databases"));
  EXPECT_EQ(r.status().err(), ENOTSUP);
}

TEST(LmdbWalk, EmptyDatabase) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/db";
  MDB_env* env = nullptr;
  ASSERT_NO_FATAL_FAILURE(open_env(dir, &env));
  mdb_env_close(env);
  auto r = walk_locations(dir);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_TRUE(r->empty());
  Provenance p = small_prov();
  p.records = 0;
  p.key_sizes.clear();
  p.value_sizes.clear();
  p.txn_records = {1};
  auto rep = replay(p);
  ASSERT_TRUE(rep.is_ok()) << rep.status().message();
  EXPECT_TRUE(rep->locations.empty());
  auto meta = read_meta_key(dir + "/data.mdb");
  ASSERT_TRUE(meta.is_ok()) << meta.status().message();
  EXPECT_EQ(rep->meta, *meta) << describe(rep->meta) << " vs " << describe(*meta);
}

}  // namespace
}  // namespace dlfs::provenance::lmdb
