// dlfs-ctl lmdb's logic: Datum records decode to what was encoded; ingest
// builds a database whose values (read back with liblmdb) are the dataset's
// samples in canonical order under sorted keys, with a provenance sidecar
// that replays exactly; the sidecar search recovers the provenance of a
// Caffe-style build made here with liblmdb directly, and falls back to the
// explicit form for databases no such build explains.
#include <lmdb.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "provenance/lmdb_layout.h"
#include "provenance/lmdb_sidecar.h"
#include "provenance/lmdb_walk.h"
#include "tools/ctl/caffe_datum.h"
#include "tools/ctl/lmdb_ingest.h"
#include "tools/ctl/lmdb_sidecar_maker.h"
#include "temp_dir.h"

namespace dlfs::ctl {
namespace {

namespace stdfs = std::filesystem;
namespace lm = provenance::lmdb;

// ---- a protobuf decoder just big enough for Datum ----

struct Decoded {
  std::map<uint32_t, uint64_t> varints;  // field -> value
  std::map<uint32_t, std::string> bytes;
  std::vector<uint32_t> order;           // fields as they appear
};

bool read_varint(const std::string& b, size_t& i, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (i >= b.size()) return false;
    const auto c = static_cast<uint8_t>(b[i++]);
    v |= uint64_t{c & 0x7fu} << shift;
    if (c < 0x80) return true;
  }
  return false;
}

std::optional<Decoded> decode(const std::string& b) {
  Decoded d;
  size_t i = 0;
  while (i < b.size()) {
    uint64_t tag = 0, v = 0;
    if (!read_varint(b, i, tag)) return std::nullopt;
    const auto field = static_cast<uint32_t>(tag >> 3);
    d.order.push_back(field);
    if ((tag & 7) == 0) {
      if (!read_varint(b, i, v)) return std::nullopt;
      d.varints[field] = v;
    } else if ((tag & 7) == 2) {
      if (!read_varint(b, i, v) || v > b.size() - i) return std::nullopt;
      d.bytes[field] = b.substr(i, v);
      i += v;
    } else {
      return std::nullopt;  // Datum writers use no other wire types
    }
  }
  return d;
}

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

TEST(CaffeDatum, RawPixelsDecode) {
  std::string pixels(3072, '\0');
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<char>(i * 7);
  std::string out = "garbage that must be cleared";
  encode_datum({.channels = 3, .height = 32, .width = 32, .label = 9, .encoded = false}, as_bytes(pixels), out);
  auto d = decode(out);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->order, (std::vector<uint32_t>{1, 2, 3, 4, 5}));  // protobuf's field-number order
  EXPECT_EQ(d->varints[1], 3u);
  EXPECT_EQ(d->varints[2], 32u);
  EXPECT_EQ(d->varints[3], 32u);
  EXPECT_EQ(d->bytes[4], pixels);
  EXPECT_EQ(d->varints[5], 9u);
  EXPECT_EQ(d->varints.count(7), 0u) << "encoded is only written for image files";
  // The bytes convert_cifar_data's protobuf would write for this record.
  EXPECT_EQ(out.substr(0, 9), std::string("\x08\x03\x10\x20\x18\x20\x22\x80\x18", 9));
}

TEST(CaffeDatum, EncodedImageAndNegativeLabel) {
  const std::string jpeg = "\xff\xd8\xff\xe0 not really a jpeg";
  std::string out;
  encode_datum({.label = 0, .encoded = true}, as_bytes(jpeg), out);
  auto d = decode(out);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->order, (std::vector<uint32_t>{4, 5, 7}));  // no shape for an encoded image
  EXPECT_EQ(d->bytes[4], jpeg);
  EXPECT_EQ(d->varints[5], 0u) << "label 0 is written, as Caffe sets it explicitly";
  EXPECT_EQ(d->varints[7], 1u);

  encode_datum({.label = -1}, as_bytes(jpeg), out);  // int32 -1: ten bytes, sign-extended
  d = decode(out);
  ASSERT_TRUE(d);
  EXPECT_EQ(static_cast<int32_t>(d->varints[5]), -1);
  EXPECT_EQ(out.size(), 2 + jpeg.size() + 1 + 10);
}

// ---- databases ----

using Records = std::vector<std::pair<std::string, std::string>>;

// Every (key, value) in key order, with liblmdb (read-only, no lock file).
Records read_db(const std::string& dir) {
  Records out;
  MDB_env* env = nullptr;
  EXPECT_EQ(mdb_env_create(&env), 0);
  EXPECT_EQ(mdb_env_open(env, dir.c_str(), MDB_RDONLY | MDB_NOLOCK, 0644), 0);
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  MDB_cursor* cur = nullptr;
  EXPECT_EQ(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn), 0);
  EXPECT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
  EXPECT_EQ(mdb_cursor_open(txn, dbi, &cur), 0);
  MDB_val k, v;
  for (int op = MDB_FIRST; mdb_cursor_get(cur, &k, &v, static_cast<MDB_cursor_op>(op)) == 0; op = MDB_NEXT)
    out.emplace_back(std::string(static_cast<char*>(k.mv_data), k.mv_size),
                     std::string(static_cast<char*>(v.mv_data), v.mv_size));
  mdb_cursor_close(cur);
  mdb_txn_abort(txn);
  mdb_env_close(env);
  return out;
}

// A database made with liblmdb the way a Caffe-like tool makes one, but with
// any insertion order: `records` put in the given order, a commit every
// `commit_every` (0: one transaction); `del`, if given, is deleted in the
// last transaction.
void build_db(const std::string& dir, const Records& records, uint64_t commit_every, bool append,
              const std::string& del = "") {
  stdfs::create_directories(dir);
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_mapsize(env, size_t{1} << 32), 0);
  ASSERT_EQ(mdb_env_open(env, dir.c_str(), MDB_NOSYNC, 0644), 0);
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  uint64_t in_txn = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    if (!txn) {
      ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
      ASSERT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
    }
    auto [key, value] = records[i];
    MDB_val k{key.size(), key.data()}, v{value.size(), value.data()};
    ASSERT_EQ(mdb_put(txn, dbi, &k, &v, append ? MDB_APPEND : 0), 0) << i;
    if (++in_txn == commit_every || i + 1 == records.size()) {
      if (i + 1 == records.size() && !del.empty()) {
        MDB_val dk{del.size(), const_cast<char*>(del.data())};
        ASSERT_EQ(mdb_del(txn, dbi, &dk, nullptr), 0);
      }
      ASSERT_EQ(mdb_txn_commit(txn), 0);
      txn = nullptr;
      in_txn = 0;
    }
  }
  ASSERT_EQ(mdb_env_sync(env, 1), 0);
  mdb_env_close(env);
}

// As `dlfs-ctl lmdb verify` opens: a sidecar problem is an error, not a walk.
lm::LayoutOptions strict() {
  lm::LayoutOptions o;
  o.allow_walk = false;
  return o;
}

std::string read_file(const stdfs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

void write_file(const stdfs::path& p, const std::string& data) {
  stdfs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << data;
}

std::string key8(uint64_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08llu", static_cast<unsigned long long>(i));
  return buf;
}

class LmdbCtl : public ::dlfs::test::TempDirTest {
 protected:
  // A files dataset, made once for the suite (creating files is the slow
  // part): 1300 samples (two transactions at Caffe's 1000) of 100 B to
  // 7.5 KiB, inline and overflow values, in three class directories and the
  // root.
  static void SetUpTestSuite() {
    suite_dir_ = std::make_unique<::dlfs::test::TempDir>();
    src_ = *suite_dir_ / "src";
    std::mt19937_64 rng(7);
    for (int i = 0; i < 1300; ++i) {
      const char* dir = i % 50 == 0 ? "" : (i % 3 == 0 ? "n02/" : i % 3 == 1 ? "n01/" : "n03/");
      std::string data(100 + rng() % 7500, '\0');
      for (auto& c : data) c = static_cast<char>(rng());
      write_file(src_ / (std::string(dir) + "img" + std::to_string(100000 + i)), data);
    }
  }
  static void TearDownTestSuite() { suite_dir_.reset(); }
  void SetUp() override { base_ = tmp_.path(); }

  // The source's samples in canonical order: relative path, bytes.
  std::vector<std::pair<std::string, std::string>> samples() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& e : stdfs::recursive_directory_iterator(src_))
      if (e.is_regular_file()) out.emplace_back(stdfs::relative(e.path(), src_).string(), read_file(e.path()));
    std::sort(out.begin(), out.end());  // std::string compares bytewise
    return out;
  }

  IngestOptions options(const std::string& dest) const {
    IngestOptions o;
    o.src = src_.string();
    o.dest = (base_ / dest).string();
    o.progress = false;
    return o;
  }

  static inline std::unique_ptr<::dlfs::test::TempDir> suite_dir_;
  static inline stdfs::path src_;
  stdfs::path base_;  // this test's outputs
};

TEST(CandidateIntervals, EveryCandidateGivesTheTransactionCount) {
  for (uint64_t n : {1ull, 7ull, 1000ull, 1281167ull}) {
    for (uint64_t k : {1ull, 2ull, 10ull, 1282ull}) {
      auto cs = candidate_intervals(n, k);
      for (uint64_t c : cs) EXPECT_EQ((n + c - 1) / c, k) << n << " " << k << " " << c;
      if (k <= n && !cs.empty()) {
        // The smallest and the largest interval that give k transactions.
        EXPECT_EQ(cs.front(), (n + k - 1) / k);
        // The largest: one record more per transaction gives fewer of them.
        if (k > 1) {
          EXPECT_NE((n + cs.back()) / (cs.back() + 1), k);
        }
      }
    }
  }
  auto c = candidate_intervals(1281167, 1282);  // ImageNet in batches of 1000
  EXPECT_NE(std::find(c.begin(), c.end(), 1000u), c.end());
  EXPECT_EQ(candidate_intervals(5, 1), std::vector<uint64_t>{5});
  EXPECT_EQ(candidate_intervals(400, 58), (std::vector<uint64_t>{7}));  // only 7 gives 58 for 400
  EXPECT_TRUE(candidate_intervals(10, 20).empty());  // more transactions than records
  EXPECT_TRUE(candidate_intervals(0, 1).empty());
}

// Caffe's schedules: a commit every 1000, every 7, one transaction; with and
// without MDB_APPEND. Every one must read back as the files, in order, under
// sorted keys, and store the provenance form, which the daemon's open
// accepts and which equals a walk.
TEST_F(LmdbCtl, IngestFilesReadsBackAndStoresTheProvenance) {
  const auto want = samples();
  ASSERT_EQ(want.size(), 1300u);
  for (uint64_t every : {1000ull, 7ull, 0ull}) {
    for (bool append : {false, true}) {
      SCOPED_TRACE("commit every " + std::to_string(every) + (append ? ", append" : ""));
      auto o = options("db-" + std::to_string(every) + (append ? "-append" : ""));
      o.commit_every = every;
      o.append = append;
      auto r = ingest(o);
      ASSERT_TRUE(r.is_ok()) << r.status().message();
      EXPECT_EQ(r->records, 1300u);
      EXPECT_EQ(r->commits, every ? (1300 + every - 1) / every : 1);
      EXPECT_TRUE(r->sidecar.provenance_form);
      EXPECT_EQ(r->sidecar.candidates_tried, 1) << "ingest replays its own provenance only";

      const Records got = read_db(o.dest);
      ASSERT_EQ(got.size(), want.size());
      uint64_t value_bytes = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].first, key8(i));
        EXPECT_EQ(got[i].second, want[i].second) << "record " << i << " should be " << want[i].first;
        if (i) {
          EXPECT_LT(got[i - 1].first, got[i].first);
        }
        value_bytes += got[i].second.size();
      }
      EXPECT_EQ(r->value_bytes, value_bytes);

      auto side = lm::read_sidecar_file(o.dest + "/data.mdb.dlfs");
      ASSERT_TRUE(side.is_ok()) << side.status().message();
      ASSERT_TRUE(side->provenance.has_value());
      EXPECT_EQ(side->provenance->append, append);
      EXPECT_TRUE(side->provenance->key_rank.empty());
      EXPECT_EQ(side->provenance->key_sizes, std::vector<uint32_t>{8});
      EXPECT_EQ(side->provenance->txn_records, std::vector<uint64_t>{every ? std::min<uint64_t>(every, 1300) : 1300});
      auto l = lm::open_layout(o.dest, strict());
      ASSERT_TRUE(l.is_ok()) << l.status().message();
      EXPECT_EQ(l->source, lm::LayoutSource::sidecar_provenance);
      EXPECT_EQ(l->locations, lm::walk_locations(o.dest).value());
    }
  }
}

// convert_imageset's keys and records: "%08d_" + path, a Datum with the file
// as an encoded image and the class folder's index as the label.
TEST_F(LmdbCtl, IngestFilesAsDatumWithFilenameKeys) {
  const auto want = samples();
  auto o = options("datum");
  o.keys = KeyStyle::index_name;
  o.values = ValueStyle::datum;
  auto r = ingest(o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const Records got = read_db(o.dest);
  ASSERT_EQ(got.size(), want.size());
  const std::map<std::string, uint64_t> label = {{"n01", 0}, {"n02", 1}, {"n03", 2}};
  std::map<uint64_t, int> per_label;
  for (size_t i = 0; i < got.size(); ++i) {
    const auto& path = want[i].first;
    EXPECT_EQ(got[i].first, key8(i) + "_" + path);
    auto d = decode(got[i].second);
    ASSERT_TRUE(d) << "record " << i;
    EXPECT_EQ(d->bytes[4], want[i].second);
    EXPECT_EQ(d->varints[7], 1u);
    EXPECT_EQ(d->varints.count(1), 0u);
    const auto slash = path.find('/');
    const uint64_t want_label = slash == std::string::npos ? 0 : label.at(path.substr(0, slash));
    EXPECT_EQ(d->varints[5], want_label) << path;
    ++per_label[d->varints[5]];
  }
  EXPECT_EQ(per_label.size(), 3u);
  // Per-record key sizes (the paths differ in length only at the root here,
  // but the provenance holds them either way) still replay exactly.
  EXPECT_TRUE(r->sidecar.provenance_form);
  auto l = lm::open_layout(o.dest, strict());
  ASSERT_TRUE(l.is_ok()) << l.status().message();
}

// convert_cifar_data's records from a fixed dataset: the leading label bytes
// (little-endian) as the label, the rest as C x H x W pixels.
TEST_F(LmdbCtl, IngestFixedRecordsAsDatum) {
  const uint64_t kRecord = 2 + 3 * 8 * 8;
  std::string all;
  for (int f = 0; f < 2; ++f) {
    std::string file;
    for (int r = 0; r < 150; ++r) {
      const int n = f * 150 + r;
      std::string rec(kRecord, static_cast<char>(n));
      rec[0] = static_cast<char>(n & 0xff);
      rec[1] = static_cast<char>(n >> 8);
      file += rec;
    }
    write_file(base_ / "cifar" / ("batch_" + std::to_string(f) + ".bin"), file);
    all += file;
  }
  IngestOptions o = options("cdb");
  o.src = (base_ / "cifar").string();
  o.format.format = "fixed";
  o.format.record_size = kRecord;
  o.values = ValueStyle::datum;
  o.label_bytes = 2;
  o.shape = {3, 8, 8};
  auto r = ingest(o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const Records got = read_db(o.dest);
  ASSERT_EQ(got.size(), 300u);
  for (size_t i = 0; i < got.size(); ++i) {
    auto d = decode(got[i].second);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->varints[1], 3u);
    EXPECT_EQ(d->varints[2], 8u);
    EXPECT_EQ(d->varints[3], 8u);
    EXPECT_EQ(d->varints[5], i) << "label from two little-endian bytes";
    EXPECT_EQ(d->bytes[4], all.substr(i * kRecord + 2, kRecord - 2));
    EXPECT_EQ(d->varints.count(7), 0u);
  }
  EXPECT_TRUE(r->sidecar.provenance_form);

  // Default shape: 1 x 1 x data bytes.
  o.dest = (base_ / "cdb2").string();
  o.shape = {0, 0, 0};
  ASSERT_TRUE(ingest(o).is_ok());
  auto d = decode(read_db(o.dest).at(5).second);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->varints[1], 1u);
  EXPECT_EQ(d->varints[2], 1u);
  EXPECT_EQ(d->varints[3], kRecord - 2);
}

TEST_F(LmdbCtl, IngestRefusesBadOptionsAndExistingOutput) {
  auto o = options("db");
  o.format.format = "fixed";
  o.format.record_size = 3000;  // the files are not multiples of it
  auto r = ingest(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("3000"), std::string::npos) << r.status().message();

  o.format.record_size = 101;
  o.values = ValueStyle::datum;
  o.shape = {3, 32, 32};
  r = ingest(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().err(), EINVAL);
  EXPECT_NE(r.status().message().find("--shape 3,32,32 is 3072 bytes but a record holds 100"), std::string::npos)
      << r.status().message();
  o.shape = {0, 0, 0};
  o.label_bytes = 5;
  EXPECT_EQ(ingest(o).status().err(), EINVAL);

  o = options("db");
  o.dest = (src_ / "inside").string();
  r = ingest(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("inside SRC"), std::string::npos) << r.status().message();
  EXPECT_FALSE(stdfs::exists(src_ / "inside"));

  o = options("empty-src");
  stdfs::create_directories(base_ / "nothing");
  o.src = (base_ / "nothing").string();
  EXPECT_EQ(ingest(o).status().err(), EINVAL);

  o = options("db");
  ASSERT_TRUE(ingest(o).is_ok());
  r = ingest(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().err(), EEXIST);
  EXPECT_NE(r.status().message().find("--force"), std::string::npos);
  o.force = true;
  o.commit_every = 7;
  r = ingest(o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(read_db(o.dest).size(), 1300u) << "--force replaces the database, it does not add to it";
  EXPECT_EQ(r->commits, 186u);
}

// The search on a database this test built with liblmdb (it never saw the
// provenance): a commit every 7, not APPEND; and APPEND in one transaction.
TEST_F(LmdbCtl, SidecarSearchRecoversACaffeStyleBuild) {
  Records recs;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 400; ++i) recs.emplace_back(key8(i), std::string(100 + rng() % 4000, 'a' + i % 26));
  const std::string dir = (base_ / "every7").string();
  build_db(dir, recs, 7, false);

  SidecarRequest req;
  req.dir = dir;
  auto made = make_sidecar(req);
  ASSERT_TRUE(made.is_ok()) << made.status().message();
  EXPECT_TRUE(made->provenance_form) << "the search should find interval 7";
  EXPECT_EQ(made->build, "keys put in order, a commit every 7 records");
  EXPECT_EQ(made->records, 400u);
  auto side = lm::read_sidecar_file(made->path);
  ASSERT_TRUE(side.is_ok());
  ASSERT_TRUE(side->provenance.has_value());
  EXPECT_EQ(side->provenance->txn_records, std::vector<uint64_t>{7});
  auto l = lm::open_layout(dir, strict());
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  EXPECT_EQ(l->source, lm::LayoutSource::sidecar_provenance);
  EXPECT_EQ(l->locations, lm::walk_locations(dir).value());

  auto again = make_sidecar(req);
  ASSERT_FALSE(again.is_ok()) << "an existing sidecar must not be replaced without force";
  EXPECT_EQ(again.status().err(), EEXIST);
  req.force = true;
  req.explicit_only = true;
  auto ex = make_sidecar(req);
  ASSERT_TRUE(ex.is_ok());
  EXPECT_FALSE(ex->provenance_form);
  EXPECT_EQ(ex->candidates_tried, 0);
  l = lm::open_layout(dir, strict());
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  EXPECT_EQ(l->source, lm::LayoutSource::sidecar_explicit);

  const std::string one = (base_ / "one-append").string();
  build_db(one, recs, 0, true);
  req = SidecarRequest();
  req.dir = one;
  made = make_sidecar(req);
  ASSERT_TRUE(made.is_ok()) << made.status().message();
  EXPECT_TRUE(made->provenance_form);
  EXPECT_NE(made->build.find("one transaction"), std::string::npos) << made->build;
  EXPECT_EQ(lm::open_layout(one, strict()).value().locations, lm::walk_locations(one).value());
}

// Databases no Caffe-style build explains get the explicit form, exact.
TEST_F(LmdbCtl, SidecarSearchFallsBackToExplicit) {
  Records recs;
  for (int i = 0; i < 400; ++i) recs.emplace_back(key8(i), std::string(3000 + i % 3 * 1500, 'a' + i % 26));
  auto check_explicit = [&](const std::string& dir) {
    SidecarRequest req;
    req.dir = dir;
    req.force = true;
    auto made = make_sidecar(req);
    ASSERT_TRUE(made.is_ok()) << made.status().message();
    EXPECT_FALSE(made->provenance_form) << made->build;
    EXPECT_GT(made->candidates_tried, 0);
    auto l = lm::open_layout(dir, strict());
    ASSERT_TRUE(l.is_ok()) << l.status().message();
    EXPECT_EQ(l->source, lm::LayoutSource::sidecar_explicit);
    EXPECT_EQ(l->locations, lm::walk_locations(dir).value());
  };

  // Shuffled insertion, a commit every 7 (the search assumes keys in order).
  Records shuffled = recs;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(11));
  const std::string sdir = (base_ / "shuffled").string();
  build_db(sdir, shuffled, 7, false);
  check_explicit(sdir);

  // One record deleted in the last transaction of a commit-every-10 build:
  // 399 records in 40 transactions, so interval 10 is tried, but no
  // insert-only build of 399 records left this file.
  const std::string ddir = (base_ / "deleted").string();
  build_db(ddir, recs, 10, false, key8(123));
  check_explicit(ddir);
  EXPECT_EQ(read_db(ddir).size(), 399u);
}

// A database rewritten after its build (deletes and overwrites in a later
// transaction): explicit, and exact.
TEST_F(LmdbCtl, DeletesAndOverwritesGetTheExplicitForm) {
  IngestOptions o = options("db");
  ASSERT_TRUE(ingest(o).is_ok());
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_mapsize(env, size_t{1} << 32), 0);
  ASSERT_EQ(mdb_env_open(env, o.dest.c_str(), 0, 0644), 0);
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  ASSERT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
  std::string big(6000, 'z');
  for (int i = 0; i < 400; i += 3) {
    std::string key = key8(i);
    MDB_val k{8, key.data()}, v{big.size(), big.data()};
    if (i % 2) ASSERT_EQ(mdb_del(txn, dbi, &k, nullptr), 0);
    else ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
  }
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);

  SidecarRequest req;
  req.dir = o.dest;
  req.force = true;
  auto made = make_sidecar(req);
  ASSERT_TRUE(made.is_ok()) << made.status().message();
  EXPECT_FALSE(made->provenance_form);
  EXPECT_GT(made->candidates_tried, 0);
  auto l = lm::open_layout(o.dest);
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->source, lm::LayoutSource::sidecar_explicit) << l->why_walk;
  EXPECT_EQ(l->locations, lm::walk_locations(o.dest).value());
}

}  // namespace
}  // namespace dlfs::ctl
