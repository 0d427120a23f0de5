// dlfs-ctl lmdb's logic: which commit intervals the sidecar search tries, and
// that it recovers the provenance of a Caffe-style build it did not see.
#include <lmdb.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "provenance/lmdb_layout.h"
#include "provenance/lmdb_sidecar.h"
#include "provenance/lmdb_walk.h"
#include "tools/ctl/lmdb_ingest.h"
#include "tools/ctl/lmdb_sidecar_maker.h"

namespace dlfs::ctl {
namespace {

namespace stdfs = std::filesystem;

TEST(CandidateIntervals, EveryCandidateGivesTheTransactionCount) {
  for (uint64_t n : {1ull, 7ull, 1000ull, 1281167ull}) {
    for (uint64_t k : {1ull, 2ull, 10ull, 1282ull}) {
      for (uint64_t c : candidate_intervals(n, k)) EXPECT_EQ((n + c - 1) / c, k) << n << " " << k << " " << c;
    }
  }
  auto c = candidate_intervals(1281167, 1282);  // ImageNet in batches of 1000
  EXPECT_NE(std::find(c.begin(), c.end(), 1000u), c.end());
  EXPECT_EQ(candidate_intervals(5, 1), std::vector<uint64_t>{5});
  EXPECT_TRUE(candidate_intervals(10, 20).empty());  // more transactions than records
  EXPECT_TRUE(candidate_intervals(0, 1).empty());
}

class SidecarSearch : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = stdfs::temp_directory_path() / ("dlfs-ctl-test-" + std::to_string(::getpid()));
    stdfs::remove_all(base_);
    stdfs::create_directories(base_ / "src" / "a");
    for (int i = 0; i < 400; ++i) {
      std::ofstream f(base_ / "src" / "a" / ("f" + std::to_string(1000 + i)), std::ios::binary);
      f << std::string(100 + (i * 37) % 4000, static_cast<char>('a' + i % 26));
    }
  }
  void TearDown() override { stdfs::remove_all(base_); }
  stdfs::path base_;
};

TEST_F(SidecarSearch, RecoversTheProvenanceOfACommitEvery7Build) {
  IngestOptions o;
  o.src = (base_ / "src").string();
  o.dest = (base_ / "db").string();
  o.commit_every = 7;
  o.progress = false;
  auto r = ingest(o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->records, 400u);
  EXPECT_EQ(r->commits, 58u);  // ceil(400 / 7)
  EXPECT_TRUE(r->sidecar.provenance_form);

  SidecarRequest req;
  req.dir = o.dest;
  auto again = make_sidecar(req);
  ASSERT_FALSE(again.is_ok()) << "an existing sidecar must not be replaced without force";
  EXPECT_EQ(again.status().err(), EEXIST);
  req.force = true;
  auto made = make_sidecar(req);
  ASSERT_TRUE(made.is_ok()) << made.status().message();
  EXPECT_TRUE(made->provenance_form) << "the search should find interval 7";
  EXPECT_GE(made->candidates_tried, 1);
  auto l = provenance::lmdb::open_layout(o.dest);
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->source, provenance::lmdb::LayoutSource::sidecar_provenance);

  req.explicit_only = true;
  auto ex = make_sidecar(req);
  ASSERT_TRUE(ex.is_ok());
  EXPECT_FALSE(ex->provenance_form);
  EXPECT_EQ(ex->candidates_tried, 0);
}

// A database no insert-only build explains (records deleted and rewritten
// after the build): no provenance replays to it, and the explicit form is
// exact.
TEST_F(SidecarSearch, DeletesAndOverwritesGetTheExplicitForm) {
  IngestOptions o;
  o.src = (base_ / "src").string();
  o.dest = (base_ / "db").string();
  o.progress = false;
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
    char key[16];
    std::snprintf(key, sizeof key, "%08d", i);
    MDB_val k{8, key}, v{big.size(), big.data()};
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
  auto l = provenance::lmdb::open_layout(o.dest);
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->source, provenance::lmdb::LayoutSource::sidecar_explicit) << l->why_walk;
  EXPECT_EQ(l->locations, provenance::lmdb::walk_locations(o.dest).value());
}

}  // namespace
}  // namespace dlfs::ctl
