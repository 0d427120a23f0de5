// Sample groups (provenance/sample_groups.h): the key rules, and grouped
// `files` datasets read through the .tar and .index views without a mount.
// The test groups the files itself (runs of consecutive sorted paths with one
// key, as WebDataset groups a shard's members) and checks every rank's tar:
// each group's members adjacent and in order, groups in the planned order of
// the group count, every group once per epoch across ranks; with the whole
// dataset resident, with nothing resident, and in rounds.
#include "provenance/sample_groups.h"

#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "views_test_util.h"

namespace dlfs::fs::test {
namespace {

using provenance::group_key;
using provenance::GroupRule;

TEST(GroupKey, FirstDotIsTheWebDatasetKey) {
  EXPECT_EQ(group_key("n0153/x.jpg", GroupRule::first_dot), "n0153/x");
  EXPECT_EQ(group_key("n0153/x.seg.png", GroupRule::first_dot), "n0153/x");
  EXPECT_EQ(group_key("a.b/c.d.e", GroupRule::first_dot), "a.b/c") << "dots of directories do not count";
  EXPECT_EQ(group_key("a.b/c", GroupRule::first_dot), "a.b/c") << "no dot: the whole path";
  EXPECT_EQ(group_key("d/.hidden", GroupRule::first_dot), "d/.hidden") << "a leading dot is not a separator";
  EXPECT_EQ(group_key("d/.x.cls", GroupRule::first_dot), "d/.x");
  EXPECT_EQ(group_key("top.txt", GroupRule::first_dot), "top");
}

TEST(GroupKey, LastDotAndNone) {
  EXPECT_EQ(group_key("n0153/x.seg.png", GroupRule::last_dot), "n0153/x.seg");
  EXPECT_EQ(group_key("a.b/c", GroupRule::last_dot), "a.b/c");
  EXPECT_EQ(group_key("n0153/x.jpg", GroupRule::none), "n0153/x.jpg");
  EXPECT_FALSE(enum_named<GroupRule>("first_dot"));
  EXPECT_TRUE(enum_named<GroupRule>("first-dot") == GroupRule::first_dot);
}

constexpr uint64_t kSeed = 77;

class SampleGroupsTest : public ViewsFixture {
 protected:
  // Keys with 1-4 members of various extensions, empty members, and a
  // directory "k.d" that sorts between k.cls and k.jpg: WebDataset's
  // adjacency then makes two groups with key "k" around group "k.d/z".
  void SetUp() override {
    std::mt19937_64 rng(9);
    std::vector<std::string> paths = {"k.cls", "k.d/z.jpg", "k.jpg", "solo", "e.empty.txt", "e.png"};
    static const char* exts[] = {"cls", "jpg", "json", "seg.png"};
    for (int i = 0; i < 40; ++i) {
      const std::string key = "n" + std::to_string(i % 4) + "/s" + std::to_string(i);
      for (const char* ext : exts)
        if (rng() % 3 != 0 || ext == exts[1]) paths.push_back(key + "." + ext);
    }
    for (const auto& p : paths) {
      const size_t size = p.find("empty") != std::string::npos ? 0 : 1 + rng() % 5000;
      std::string bytes = random_string(rng, size);
      tmp_.write_file("data/" + p, bytes);
      all_.push_back({p, std::move(bytes)});
    }
    std::sort(all_.begin(), all_.end(), [](const Sample& a, const Sample& b) { return a.member < b.member; });
    for (const Sample& s : all_) {
      const std::string key(group_key(s.member, GroupRule::first_dot));
      if (groups_.empty() || groups_.back().key != key) groups_.push_back({key, "", {}});
      groups_.back().members.push_back(s);
    }
    g_.format.group_by = GroupRule::first_dot;
    g_.samples = all_;
  }
  void open_plan(uint64_t budget, bool load) {
    PlanConfig p;
    p.seed = kSeed;
    p.world_size = 2;
    p.round_chunk = 8 << 10;
    open("data", g_, p, budget, load);
  }
  uint64_t dataset_bytes() const {
    uint64_t n = 0;
    for (const Sample& s : all_) n += s.bytes.size();
    return n;
  }

  std::vector<Sample> all_;
  std::vector<Group> groups_;
  Generated g_;
};

TEST_F(SampleGroupsTest, GroupsAreAdjacentAndOncePerEpochNothingResident) {
  ASSERT_GT(groups_.size(), 40u);
  ASSERT_EQ(std::count_if(groups_.begin(), groups_.end(), [](const Group& x) { return x.key == "k"; }), 2)
      << "the test's own grouping must split k around k.d/z";
  open_plan(0, false);
  check_groups_per_epoch(groups_, {1, 3}, kSeed, true);
}

TEST_F(SampleGroupsTest, GroupsAreAdjacentAndOncePerEpochResident) {
  open_plan(~0ull, true);
  check_groups_per_epoch(groups_, {1, 3}, kSeed, true);
  EXPECT_EQ(ds().view_counters().reads.fetched_bytes.load(), 0u) << "all resident: no backend read";
}

TEST_F(SampleGroupsTest, GroupsAreAdjacentAndOncePerEpochInRounds) {
  open_plan(dataset_bytes() / 2, false);
  ASSERT_TRUE(ds().planner().rounds()) << "half the dataset's bytes must mean rounds";
  check_groups_per_epoch(groups_, {1, 3}, kSeed, false);  // rounds reorder (round_plan.h); whole groups, once each, all the same
}

// Each .index line is a group: its key, and the tar bytes of all its members
// (headers included), which parse on their own into exactly those members.
TEST_F(SampleGroupsTest, IndexLinesAreGroupsWithTheirTarSpan) {
  open_plan(~0ull, false);
  auto tar_file = open_view(view_path(0, 2, 1, ".tar"));
  auto index_file = open_view(view_path(0, 2, 1, ".index"));
  ASSERT_TRUE(tar_file && index_file);
  const std::string tar = read_all(*tar_file, 1 << 16);
  std::istringstream text(read_all(*index_file, 1 << 16));
  std::string line;
  std::getline(text, line);
  EXPECT_NE(line.find(" group_by=first-dot"), std::string::npos) << line;
  const auto want = planned(kSeed, 0, groups_.size(), 2, 1);
  size_t k = 0;
  for (; std::getline(text, line); ++k) {
    ASSERT_LT(k, want.size());
    std::istringstream f(line);
    uint64_t pos, id, off, len;
    std::string name;
    f >> pos >> id >> off >> len >> name;
    const Group& grp = groups_[want[k]];
    EXPECT_EQ(pos, k);
    EXPECT_EQ(id, want[k]);
    EXPECT_EQ(name, grp.key);
    ASSERT_LE(off + len, tar.size());
    const auto members = parse_tar(tar.substr(off, len) + std::string(1024, '\0'));
    ASSERT_EQ(members.size(), grp.members.size()) << grp.key;
    for (size_t j = 0; j < members.size(); ++j) {
      EXPECT_EQ(members[j].name, grp.members[j].member);
      EXPECT_TRUE(members[j].data == grp.members[j].bytes) << grp.members[j].member << ": other bytes";
    }
  }
  EXPECT_EQ(k, want.size());
}

// A directory view entry is one file's bytes: grouped datasets have none.
TEST_F(SampleGroupsTest, NoDirectoryViewForGroups) {
  open_plan(~0ull, false);
  EXPECT_EQ(resolve(view_path(0, 2, 0, "")).status().err(), ENOENT);
  EXPECT_TRUE(resolve(view_path(0, 2, 0, ".tar")).is_ok());
}

TEST_F(SampleGroupsTest, OtherFormatsRefuseGrouping) {
  Generated fixed = make_fixed_dataset(tmp_, "fixed", {3}, 100, 0, 1);
  fixed.format.group_by = GroupRule::first_dot;
  DatasetConfig dc;
  dc.name = "f";
  dc.backend = tmp_.file("fixed");
  dc.format = fixed.format;
  auto ds = Dataset::open(dc, ~0ull, DaemonConfig{});
  ASSERT_FALSE(ds.is_ok());
  EXPECT_NE(ds.status().message().find("group_by applies to formats 'files' and 'tar' only"), std::string::npos)
      << ds.status().message();
}

}  // namespace
}  // namespace dlfs::fs::test
