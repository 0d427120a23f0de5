// LMDB datasets at open and at read time: which source the value locations
// come from (sidecar provenance, sidecar explicit, tree walk), that stale,
// wrong, forged and damaged sidecars never yield wrong locations, and that a
// Manifest of format lmdb serves the values in key order and repairs itself
// when a read's page-header check fails.
//
// Databases are built here with liblmdb; the reference is mdb_get/cursor.
#include <fcntl.h>
#include <lmdb.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "provenance/lmdb_check.h"
#include "provenance/lmdb_layout.h"
#include "provenance/lmdb_meta.h"
#include "provenance/lmdb_replay.h"
#include "provenance/lmdb_sidecar.h"
#include "provenance/lmdb_walk.h"
#include "provenance/manifest.h"
#include "temp_dir.h"

namespace dlfs::provenance::lmdb {
namespace {

namespace stdfs = std::filesystem;

#define LMDB_OK(expr) ASSERT_EQ((expr), 0) << #expr

// Value size of record r (key order = insertion order): in-leaf values and
// overflow values of 2 and 3 pages, so both read paths are exercised.
uint32_t value_size(uint64_t r, bool fixed) {
  if (fixed) return 3000;
  static const uint32_t sizes[] = {100, 5000, 700, 9000, 5000};
  return sizes[r % 5];
}

std::string value_of(uint64_t r, uint32_t size) {
  std::string v(size, '\0');
  for (uint32_t i = 0; i < size; ++i) v[i] = static_cast<char>((r * 2654435761u + i * 97) >> 3);
  return v;
}

class LmdbLayoutTest : public ::dlfs::test::TempDirTest {
 protected:
  void SetUp() override { dir_ = tmp_.path(); }

  // Puts records [first, first + n) in key order, committing every `every`.
  // Returns the provenance of everything put so far (fresh env: first == 0).
  void put(uint64_t first, uint64_t n, uint64_t every, bool fixed = false) {
    MDB_env* env = nullptr;
    LMDB_OK(mdb_env_create(&env));
    LMDB_OK(mdb_env_set_mapsize(env, size_t{1} << 32));
    LMDB_OK(mdb_env_open(env, dir_.c_str(), MDB_NOSYNC, 0644));
    MDB_stat st{};
    LMDB_OK(mdb_env_stat(env, &st));
    int maj = 0, min = 0, pat = 0;
    mdb_version(&maj, &min, &pat);
    prov_.page_size = st.ms_psize;
    prov_.lmdb_version = kVersionFull(maj, min, pat);
    prov_.key_sizes = {8};
    MDB_txn* txn = nullptr;
    MDB_dbi dbi = 0;
    uint64_t in_txn = 0;
    for (uint64_t r = first; r < first + n; ++r) {
      if (!txn) {
        LMDB_OK(mdb_txn_begin(env, nullptr, 0, &txn));
        LMDB_OK(mdb_dbi_open(txn, nullptr, 0, &dbi));
      }
      char key[9];
      std::snprintf(key, sizeof key, "%08llu", static_cast<unsigned long long>(r));
      std::string v = value_of(r, value_size(r, fixed));
      MDB_val k{8, key}, d{v.size(), v.data()};
      LMDB_OK(mdb_put(txn, dbi, &k, &d, 0));
      prov_.value_sizes.push_back(static_cast<uint32_t>(v.size()));
      if (++in_txn == every) {
        LMDB_OK(mdb_txn_commit(txn));
        txn = nullptr;
        prov_.txn_records.push_back(in_txn);
        in_txn = 0;
      }
    }
    if (txn) {
      LMDB_OK(mdb_txn_commit(txn));
      prov_.txn_records.push_back(in_txn);
    }
    prov_.records += n;
    mdb_env_close(env);
  }

  std::string data() const { return (dir_ / "data.mdb").string(); }
  std::string side() const { return (dir_ / std::string(kSidecarFileName)).string(); }
  MetaKey key() const { return read_meta_key(data()).value(); }
  Locations walk() const { return walk_locations(dir_.string()).value(); }

  void write_sidecar(Sidecar s) { ASSERT_TRUE(write_sidecar_file(side(), s).is_ok()); }

  std::string pread_str(uint64_t offset, uint64_t length) const {
    std::string out(length, '\0');
    int fd = ::open(data().c_str(), O_RDONLY);
    EXPECT_EQ(::pread(fd, out.data(), length, static_cast<off_t>(offset)), static_cast<ssize_t>(length));
    ::close(fd);
    return out;
  }

  // Two overflow records of the same length away from the first and last
  // leaf: swapping their offsets gives a sidecar wrong for exactly them.
  std::pair<uint64_t, uint64_t> twin_overflow_records(const Locations& l) const {
    for (uint64_t i = l.size() / 3; i < l.size(); ++i)
      for (uint64_t j = i + 1; j < l.size() * 2 / 3; ++j)
        if (l[i].length == l[j].length && is_overflow_location(l[i], 4096) && is_overflow_location(l[j], 4096))
          return {i, j};
    ADD_FAILURE() << "no two overflow records of one length";
    return {0, 0};
  }

  stdfs::path dir_;
  Provenance prov_;
};

TEST_F(LmdbLayoutTest, NoSidecarMeansOneTreeWalk) {
  put(0, 500, 50);
  auto l = open_layout(dir_.string());
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  EXPECT_EQ(l->source, LayoutSource::walk);
  EXPECT_EQ(l->why_walk, "");
  EXPECT_EQ(l->locations, walk());
  LayoutOptions strict;
  strict.allow_walk = false;
  auto s = open_layout(dir_.string(), strict);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("no sidecar"), std::string::npos) << s.status().message();
}

TEST_F(LmdbLayoutTest, ProvenanceSidecarIsReplayedAndSpotChecked) {
  put(0, 2000, 70);
  write_sidecar(Sidecar{key(), canonical(prov_), std::nullopt});
  auto l = open_layout(dir_.string());
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  EXPECT_EQ(l->source, LayoutSource::sidecar_provenance) << l->why_walk;
  EXPECT_EQ(l->locations, walk());
  EXPECT_GE(l->checks.leaves, 2u);
  EXPECT_GT(l->checks.records, 0u);
  EXPECT_GT(l->checks.overflow_headers, 0u);
}

TEST_F(LmdbLayoutTest, ExplicitSidecarIsUsed) {
  put(0, 800, 0);
  write_sidecar(Sidecar{key(), std::nullopt, walk()});
  auto l = open_layout(dir_.string());
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->source, LayoutSource::sidecar_explicit);
  EXPECT_EQ(l->locations, walk());
}

TEST_F(LmdbLayoutTest, StaleSidecarIsRefusedNamingBothStates) {
  put(0, 1000, 100);
  write_sidecar(Sidecar{key(), canonical(prov_), std::nullopt});
  const MetaKey before = key();
  put(1000, 1, 1);  // one more transaction
  auto l = open_layout(dir_.string());
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->source, LayoutSource::walk);
  EXPECT_EQ(l->locations, walk());
  EXPECT_NE(l->why_walk.find(describe(before)), std::string::npos) << l->why_walk;
  EXPECT_NE(l->why_walk.find(describe(key())), std::string::npos) << l->why_walk;
  LayoutOptions strict;
  strict.allow_walk = false;
  auto s = open_layout(dir_.string(), strict);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().err(), ESTALE);
}

TEST_F(LmdbLayoutTest, WrongCommitIntervalIsCaught) {
  // 1000 records committed every 100: ten transactions. "Every 101" is also
  // ten transactions (9 x 101 + 91): same txnid, same record count.
  put(0, 1000, 100);
  Provenance wrong = canonical(prov_);
  wrong.txn_records = {101};
  auto replayed = replay(wrong);
  ASSERT_TRUE(replayed.is_ok()) << replayed.status().message();
  ASSERT_NE(replayed->locations, walk()) << "the wrong interval should misplace records";
  write_sidecar(Sidecar{key(), wrong, std::nullopt});
  auto l = open_layout(dir_.string());
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->source, LayoutSource::walk);
  EXPECT_EQ(l->locations, walk());
  EXPECT_FALSE(l->why_walk.empty());
}

TEST_F(LmdbLayoutTest, ForgedExplicitSidecarFailsTheSpotChecks) {
  put(0, 3000, 1000);
  Locations forged = walk();
  auto [i, j] = twin_overflow_records(forged);
  std::swap(forged[i].offset, forged[j].offset);
  write_sidecar(Sidecar{key(), std::nullopt, forged});
  LayoutOptions all;
  all.checks.random_leaves = 100000;  // every leaf
  auto l = open_layout(dir_.string(), all);
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->source, LayoutSource::walk);
  EXPECT_NE(l->why_walk.find("spot checks"), std::string::npos) << l->why_walk;
  EXPECT_EQ(l->locations, walk());
}

// Records named in SpotCheckOptions::records are checked where the locations
// put them, whichever leaves the descents visit: an in-leaf value moved by a
// few bytes and an overflow value moved by a page are both caught.
TEST_F(LmdbLayoutTest, NamedRecordsAreCheckedWhereTheLocationsPutThem) {
  put(0, 3000, 1000);
  const Locations truth = walk();
  uint64_t in_leaf = 0, overflow = 0;
  for (uint64_t r = truth.size() / 2; r < truth.size() && (!in_leaf || !overflow); ++r) {
    if (!in_leaf && !is_overflow_location(truth[r], 4096)) in_leaf = r;
    if (!overflow && is_overflow_location(truth[r], 4096) && truth[r].length > 4096) overflow = r;
  }
  ASSERT_TRUE(in_leaf && overflow);
  int fd = ::open(data().c_str(), O_RDONLY);
  SpotCheckOptions only_named;
  only_named.random_leaves = 0;
  only_named.records = {in_leaf, overflow};
  SpotCheckReport rep;
  ASSERT_TRUE(spot_check(fd, data(), key(), truth, only_named, &rep).is_ok());
  EXPECT_GE(rep.leaves, 3u);  // first, last, and the leaf of `in_leaf`
  for (uint64_t victim : {in_leaf, overflow}) {
    Locations forged = truth;
    forged[victim].offset += victim == overflow ? 4096 : 8;
    SpotCheckOptions none;
    none.random_leaves = 0;
    EXPECT_TRUE(spot_check(fd, data(), key(), forged, none).is_ok()) << "first and last leaf alone miss it";
    Status st = spot_check(fd, data(), key(), forged, only_named);
    EXPECT_EQ(st.err(), EBADMSG) << victim;
    EXPECT_NE(st.message().find("record " + std::to_string(victim)), std::string::npos) << st.message();
  }
  ::close(fd);
}

TEST_F(LmdbLayoutTest, DamagedSidecarAndDatabaseGiveClearErrors) {
  put(0, 300, 30);
  write_sidecar(Sidecar{key(), canonical(prov_), std::nullopt});
  stdfs::resize_file(side(), stdfs::file_size(side()) / 2);
  auto l = open_layout(dir_.string());
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->source, LayoutSource::walk);
  EXPECT_NE(l->why_walk.find(side()), std::string::npos) << l->why_walk;

  stdfs::resize_file(data(), 4096);  // not even both meta pages
  auto d = open_layout(dir_.string());
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find(data()), std::string::npos) << d.status().message();
  stdfs::remove(data());
  auto gone = open_layout(dir_.string());
  ASSERT_FALSE(gone.is_ok());
  EXPECT_EQ(gone.status().err(), ENOENT);
}

// ---- Manifest of format lmdb ------------------------------------------------

FormatOptions lmdb_format(uint32_t spot_leaves = 32) {
  FormatOptions o;
  o.format = "lmdb";
  o.lmdb_spot_checks = spot_leaves;
  return o;
}

TEST_F(LmdbLayoutTest, ManifestSamplesAreTheValuesInKeyOrder) {
  put(0, 1234, 100);
  auto m = Manifest::build(dir_.string(), lmdb_format());
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  ASSERT_EQ(m->sample_count(), 1234u);
  EXPECT_EQ(m->fixed_record_size(), 0u);  // values of several sizes: no .bin view
  ASSERT_NE(m->lmdb(), nullptr);
  EXPECT_EQ(m->lmdb()->source, "tree walk");
  EXPECT_GT(m->lmdb()->overflow_values, 0u);
  const auto f = m->lmdb()->file;
  EXPECT_EQ(m->file_path(f), "data.mdb");
  for (uint64_t i = 0; i < m->sample_count(); ++i) {
    auto s = m->sample(i);
    ASSERT_EQ(s.file, f);
    ASSERT_EQ(pread_str(s.offset, s.length), value_of(i, value_size(i, false))) << "sample " << i;
    ASSERT_EQ(m->sample_data_offset(i), m->file_data_offset(f) + s.offset);
    EXPECT_EQ(m->sample_check_bytes(i), s.length > 2000 ? 16u : 0u) << i;
  }
  EXPECT_EQ(m->sample_name(42), "data.mdb#000042");
}

TEST_F(LmdbLayoutTest, ManifestOfOneValueSizeHasARecordSize) {
  put(0, 400, 0, /*fixed=*/true);
  auto m = Manifest::build(dir_.string(), lmdb_format());
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ(m->fixed_record_size(), 3000u);
}

TEST_F(LmdbLayoutTest, ManifestWithoutDataMdbIsAnError) {
  std::ofstream(dir_ / "other.bin") << "x";
  auto m = Manifest::build(dir_.string(), lmdb_format());
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("data.mdb"), std::string::npos) << m.status().message();
}

// The header check proves an offset starts an overflow run of the right
// page count; it cannot tell two such runs apart (a permutation of equal
// sized values passes it: that is what the spot checks' leaf comparison is
// for). A location off by a page, as a wrong provenance gives, fails it.
TEST_F(LmdbLayoutTest, ReadCheckRepairsAWrongOffsetTheSpotChecksMissed) {
  put(0, 3000, 1000);
  const Locations truth = walk();
  Locations forged = truth;
  const uint64_t i = twin_overflow_records(forged).first;
  forged[i].offset += 4096;  // into the second page of its own run: raw value bytes
  write_sidecar(Sidecar{key(), std::nullopt, forged});
  auto m = Manifest::build(dir_.string(), lmdb_format(/*spot_leaves=*/0));
  ASSERT_TRUE(m.is_ok());
  ASSERT_EQ(m->lmdb()->source, "sidecar (explicit)") << "the forgery should get past the first and last leaf";
  ASSERT_EQ(m->sample(i).offset, truth[i].offset + 4096);

  // The read of record i checks the header in front of where it thinks i is.
  std::string h = pread_str(m->sample(i).offset - 16, 16);
  Status st = m->check_sample(i, std::as_bytes(std::span(h)));
  ASSERT_EQ(st.err(), EBADMSG) << st.message();
  EXPECT_NE(st.message().find("record " + std::to_string(i)), std::string::npos) << st.message();

  ASSERT_TRUE(m->repair_samples(0, st.message()).is_ok());
  EXPECT_EQ(m->samples_generation(), 1u);
  for (uint64_t r = 0; r < truth.size(); ++r) ASSERT_EQ(m->sample(r).offset, truth[r].offset) << r;
  h = pread_str(m->sample(i).offset - 16, 16);
  EXPECT_TRUE(m->check_sample(i, std::as_bytes(std::span(h))).is_ok());
  // A second reader that saw generation 0 does not walk again.
  EXPECT_TRUE(m->repair_samples(0, "late").is_ok());
  EXPECT_EQ(m->samples_generation(), 1u);
}

TEST_F(LmdbLayoutTest, ReadCheckWithWrongLengthsStopsServing) {
  put(0, 3000, 1000);
  Locations forged = walk();
  // An overflow record given another overflow record's length (more pages):
  // the views would be sized by the wrong length, so the dataset must stop
  // serving rather than guess.
  uint64_t a = 0, b = 0;
  for (uint64_t r = forged.size() / 3; r < forged.size() && !b; ++r)
    if (is_overflow_location(forged[r], 4096)) {
      if (!a && forged[r].length < 6000) a = r;  // two pages
      else if (a && forged[r].length > 8200) b = r;  // three pages
    }
  ASSERT_NE(b, 0u);
  forged[a].length = forged[b].length;
  write_sidecar(Sidecar{key(), std::nullopt, forged});
  auto m = Manifest::build(dir_.string(), lmdb_format(0));
  ASSERT_TRUE(m.is_ok());
  ASSERT_EQ(m->lmdb()->source, "sidecar (explicit)");
  std::string h = pread_str(m->sample(a).offset - 16, 16);
  Status st = m->check_sample(a, std::as_bytes(std::span(h)));
  ASSERT_EQ(st.err(), EBADMSG) << st.message();
  Status r = m->repair_samples(0, st.message());
  ASSERT_EQ(r.err(), EIO);
  EXPECT_NE(r.message().find("restart dlfsd"), std::string::npos) << r.message();
  // From now on every checked read fails rather than serve a wrong byte.
  EXPECT_EQ(m->check_sample(b, std::as_bytes(std::span(h))).err(), EIO);
}

}  // namespace
}  // namespace dlfs::provenance::lmdb
