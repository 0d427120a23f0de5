// The seed and resume directories through the Namespace, without a mount
// (fs/namespace/namespace_contexts.cc, docs/views.md): a resumed epoch's
// views hold the remainder (fs/views/resume_order.h) in every format, with
// the right bytes; seeds/<s>/ is byte for byte what a dataset configured
// with seed s serves (also in rounds, where its samples are read past the
// round buffers); bad resume names are ENOENT; context inodes are pinned
// while the kernel holds them; per-seed counters.
#include <fcntl.h>

#include <set>
#include <sstream>

#include "fs/views/resume_order.h"
#include "views_test_util.h"

namespace dlfs::fs::test {
namespace {

constexpr uint64_t kSeed = 77, kOther = 18446744073709551557ull;  // a seed past 2^63

class ViewContextsTest : public ViewsFixture {
 protected:
  void SetUp() override {
    g_ = make_files_dataset(tmp_, "data", 29, 4000, 13);
    ids_ = ids_by_member(g_);
  }
  void open_with(uint64_t seed, plan::Remainder rem = plan::Remainder::pad, uint64_t budget = ~0ull) {
    PlanConfig p;
    p.seed = seed;
    p.remainder = rem;
    p.world_size = 2;
    p.round_chunk = 8 << 10;
    open("data", g_, p, budget);
  }
  uint64_t n() const { return g_.samples.size(); }
  std::vector<uint64_t> tar_ids(const std::string& path) {
    auto f = open_view(path);
    if (!f) return {};
    std::vector<uint64_t> out;
    for (const auto& m : parse_tar(read_all(*f, 5000))) {
      auto it = ids_.find(m.name);
      EXPECT_NE(it, ids_.end()) << m.name;
      if (it == ids_.end()) continue;
      EXPECT_EQ(m.data, g_.samples[it->second].bytes) << path << ": " << m.name;
      out.push_back(it->second);
    }
    return out;
  }
  std::string file(const std::string& path) {
    auto f = open_view(path);
    return f ? read_all(*f, 3000) : std::string();
  }
  Generated g_;
  std::map<std::string, uint64_t> ids_;
};

TEST_F(ViewContextsTest, ResumedViewsHoldTheRemainderInEveryFormat) {
  for (const auto rem : {plan::Remainder::pad, plan::Remainder::drop}) {
    open_with(kSeed, rem);
    const uint32_t w = 3;
    const std::vector<uint64_t> counts = {4, 3, 3};
    const std::vector<uint64_t> order = plan::epoch_permutation(kSeed, 2, n());
    std::multiset<uint64_t> consumed;
    for (uint32_t r = 0; r < w; ++r) {
      const auto view = tar_ids(view_path(2, w, r, ".tar"));
      for (uint64_t k = 0; k < counts[r]; ++k) consumed.insert(view[k]);
    }
    auto rest = remaining_positions(n(), w, counts, rem);
    ASSERT_TRUE(rest.is_ok());
    const uint64_t m = (*rest)->size();
    for (uint32_t w2 : {1u, 2u, 4u}) {
      std::map<uint64_t, int> seen;
      for (uint32_t r2 = 0; r2 < w2; ++r2) {
        const std::string stem = "ds/epochs/2/3/resume/4,3*2/" + std::to_string(w2) + "/" + std::to_string(r2);
        const auto ids = tar_ids(stem + ".tar");
        ASSERT_EQ(ids.size(), per_rank(m, w2, rem)) << stem;
        for (uint64_t k = 0; k < ids.size(); ++k) {
          EXPECT_EQ(ids[k], order[(*rest)->positions[(r2 + k * w2) % m]]) << stem << " position " << k;
          EXPECT_EQ(consumed.count(ids[k]), 0u) << "consumed, and read again";
          ++seen[ids[k]];
        }
        // The .index lists the same samples, and says what it resumes.
        const std::string index = file(stem + ".index");
        EXPECT_NE(index.find(" resume_world_size=3 consumed=4,3*2"), std::string::npos) << index.substr(0, 300);
        std::istringstream lines(index);
        std::string line;
        std::getline(lines, line);
        for (uint64_t k = 0; std::getline(lines, line); ++k)
          EXPECT_EQ(line.substr(0, line.find('\t', line.find('\t') + 1)),
                    std::to_string(k) + "\t" + std::to_string(ids[k]));
        // The directory view: entries in order, each the sample's bytes.
        auto dir = resolve(stem);
        ASSERT_TRUE(dir.is_ok());
        const auto entries = list(dir->ino);
        ASSERT_EQ(entries.size(), ids.size());
        for (uint64_t k = 0; k < ids.size(); ++k) {
          auto e = ns_->lookup(dir->ino, entries[k]);
          ASSERT_TRUE(e.is_ok());
          EXPECT_EQ(read_all(*e, 1 << 20), g_.samples[ids[k]].bytes);
        }
      }
      EXPECT_EQ(seen.size(), rem == plan::Remainder::pad ? m : m - m % w2);
      EXPECT_EQ(seen.size() + consumed.size(), rem == plan::Remainder::pad ? n() : seen.size() + consumed.size());
      for (uint64_t s = 0; s < n() && rem == plan::Remainder::pad; ++s)
        EXPECT_TRUE(seen.count(s) || consumed.count(s)) << "sample " << s << " neither consumed nor left";
    }
  }
}

TEST_F(ViewContextsTest, OneCountMeansEveryRankAndNamesAreDistinctDirectories) {
  open_with(kSeed);
  EXPECT_EQ(tar_ids("ds/epochs/0/4/resume/2/3/1.tar"), tar_ids("ds/epochs/0/4/resume/2,2,2,2/3/1.tar"));
  auto a = resolve("ds/epochs/0/4/resume/2/3/1"), b = resolve("ds/epochs/0/4/resume/2*4/3/1");
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_NE(a->ino, b->ino) << "a directory has one name: the kernel refuses aliased directories";
  auto ua = resolve("ds/epochs/0/4/resume/2"), ub = resolve("ds/epochs/0/4/resume/2*4");
  ASSERT_TRUE(ua.is_ok() && ub.is_ok());
  EXPECT_NE(ua->ino, ub->ino);
}

TEST_F(ViewContextsTest, BadResumeNamesAreNotFound) {
  open_with(kSeed);  // 37 samples over W 4: 10 each
  for (const char* bad : {"11", "10,10,10,11", "1,2,3", "1,2,3,4,5", "x", "07", "1,,2,3", "-1", "2*5"}) {
    auto a = resolve(std::string("ds/epochs/0/4/resume/") + bad);
    ASSERT_FALSE(a.is_ok()) << bad;
    EXPECT_EQ(a.status().err(), ENOENT) << bad;
  }
  EXPECT_TRUE(resolve("ds/epochs/0/4/resume/10").is_ok()) << "a whole epoch consumed: an empty remainder";
  auto empty = open_view("ds/epochs/0/4/resume/10/2/1.tar");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->size, 1024u) << "a tar of no member: its end blocks";
  EXPECT_FALSE(resolve("ds/epochs/0/4/resume/1/0").is_ok());
  EXPECT_FALSE(resolve("ds/epochs/0/4/resume/1/2/2.tar").is_ok()) << "rank 2 of 2";
  EXPECT_FALSE(resolve("ds/epochs/0/4/resume/1/2/resume").is_ok()) << "no resume of a resume";
  EXPECT_TRUE(list(resolve("ds/epochs/0/4/resume")->ino).empty());
}

TEST_F(ViewContextsTest, ExistingPathsKeepTheirInodesAndListings) {
  open_with(kSeed);
  auto world = resolve("ds/epochs/0/2");
  ASSERT_TRUE(world.is_ok());
  EXPECT_EQ(world->ino, encode_ino({NodeKind::world_dir, 0, (0ull << 16) | 2}));
  auto names = list(world->ino);
  EXPECT_EQ(std::count(names.begin(), names.end(), "resume"), 0) << "resume/ is not listed";
  auto ds_dir = resolve("ds");
  EXPECT_EQ(list(ds_dir->ino), (std::vector<std::string>{"raw", "epochs"})) << "seeds/ is not listed";
}

// seeds/<s>/ against a dataset configured with seed s: the same bytes.
TEST_F(ViewContextsTest, SeedsPathIsWhatADatasetWithThatSeedServes) {
  for (const uint64_t budget : {~uint64_t{0}, uint64_t{64} << 10}) {  // whole, and in rounds
    std::map<std::string, std::string> configured;
    const std::vector<std::string> files = {"epochs/0/2/0.tar", "epochs/0/2/1.index", "epochs/3/4/3.tar",
                                            "epochs/1/3/resume/2,1,1/2/1.tar", "epochs/1/3/resume/2,1,1/2/0.index"};
    open_with(kOther, plan::Remainder::pad, budget);
    if (budget != ~0ull) {
      ASSERT_TRUE(ds().planner().rounds());
    }
    for (const auto& f : files) configured[f] = file("ds/" + f);
    open_with(kSeed, plan::Remainder::pad, budget);
    for (const auto& f : files) {
      const std::string seeded = file("ds/seeds/" + std::to_string(kOther) + "/" + f);
      EXPECT_FALSE(seeded.empty()) << f;
      EXPECT_EQ(seeded, configured[f]) << f << (budget == ~0ull ? "" : " (rounds)");
      EXPECT_NE(file("ds/" + f), configured[f]) << f << ": the configured seed's own order differs";
    }
    auto a = resolve("ds/seeds/" + std::to_string(kOther) + "/epochs/0/2/0.tar");
    EXPECT_EQ(*ns_->getxattr(a->ino, "user.dlfs.seed"), std::to_string(kOther));
  }
}

TEST_F(ViewContextsTest, SeedsListingsAndBadNames) {
  open_with(kSeed);
  auto seeds = resolve("ds/seeds");
  ASSERT_TRUE(seeds.is_ok());
  EXPECT_TRUE(list(seeds->ino).empty());
  EXPECT_EQ(list(resolve("ds/seeds/5")->ino), (std::vector<std::string>{"epochs"}));
  EXPECT_EQ(list(resolve("ds/seeds/5/epochs")->ino), (std::vector<std::string>{"0"}));
  EXPECT_EQ(list(resolve("ds/seeds/5/epochs/0")->ino), (std::vector<std::string>{"2"}));
  EXPECT_EQ(list(resolve("ds/seeds/5/epochs/0/2")->ino),
            (std::vector<std::string>{"0", "0.index", "0.tar", "1", "1.index", "1.tar"}));
  for (const char* bad : {"ds/seeds/18446744073709551616", "ds/seeds/05", "ds/seeds/x", "ds/seeds/5/raw",
                          "ds/seeds/5/epochs/16777216", "ds/seeds/5/epochs/0/0", "ds/seeds/5/epochs/0/65536"})
    EXPECT_EQ(resolve(bad).status().err(), ENOENT) << bad;
}

// The kernel's lookups pin context ids, its FORGETs release them.
TEST_F(ViewContextsTest, ContextIdsArePinnedWhileTheKernelHoldsThem) {
  open_with(kSeed);
  const DirContexts& c = ns_->dir_contexts(0);
  // One lookup per component, as the kernel makes them: the numbers it holds.
  std::vector<uint64_t> held;
  uint64_t at = resolve("ds")->ino;
  for (const char* part : {"seeds", "9", "epochs", "1", "2", "resume", "1", "3"}) {
    auto a = ns_->lookup(at, part);
    ASSERT_TRUE(a.is_ok()) << part;
    held.push_back(at = a->ino);
  }
  // seeds/9, epochs, 1 (and 2, its world directory: the epoch's id again),
  // resume, 1 (and 3: the counts' id again)
  EXPECT_EQ(c.usage().ids, 5u);
  EXPECT_EQ(c.usage().pinned, 5u);
  EXPECT_TRUE(resolve("ds/seeds/9/epochs/1/2/resume/1/3/0.tar").is_ok()) << "views below";
  for (uint64_t ino : held) ns_->forget(ino, 1);
  EXPECT_EQ(c.usage().pinned, 5u) << "the second walk's lookups still pin every id";
  for (uint64_t ino : held) ns_->forget(ino, 1u << 20);  // the kernel forgets a number with all its lookups
  EXPECT_EQ(c.usage().pinned, 0u);
  EXPECT_EQ(c.usage().ids, 5u) << "ids stay until the table is full";
}

TEST_F(ViewContextsTest, SeedCountersSeparateTheJobs) {
  open_with(kSeed);
  const std::string a = file("ds/epochs/0/1/0.tar");
  const std::string b = file("ds/seeds/5/epochs/0/1/0.tar");
  file("ds/seeds/5/epochs/0/2/1.tar");
  auto rows = ns_->seed_rows(0, kSeed);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(*rows[0].seed, kSeed);
  EXPECT_EQ(rows[0].bytes, a.size());
  EXPECT_EQ(rows[0].lookups, 1u);
  EXPECT_EQ(rows[0].samples, n());
  EXPECT_EQ(*rows[1].seed, 5u);
  EXPECT_EQ(rows[1].lookups, 2u);
  EXPECT_EQ(rows[1].samples, n() + (n() + 1) / 2);
  EXPECT_GE(rows[1].bytes, b.size());
}

}  // namespace
}  // namespace dlfs::fs::test
