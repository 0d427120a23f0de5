// Format "tar" (WebDataset shards, provenance/format_tar.cc): the test writes
// shards itself (ustar headers from fs/views/tar_format.h, GNU long names, pax
// path= records with a non-ASCII long name, a global pax header, directory
// entries, "./" prefixes), groups their members by key on its own, and
// checks the epoch views: every group whole, with its members' names and
// bytes, once per epoch across ranks, in the plan's order, with and without
// rounds. Bad shards (checksum, truncation, no end block) fail the open with
// the shard and the byte offset in the error. The scanner alone: GNU base-256
// sizes, pax size= records, 'K' and symlink entries, unsafe names, bad pax.
#include <fstream>
#include <iterator>
#include <numeric>

#include "common/unique_fd.h"
#include "fs/views/tar_format.h"
#include "provenance/sample_groups.h"
#include "provenance/tar_shard_scan.h"
#include "views_test_util.h"

namespace dlfs::fs::test {
namespace {

using provenance::group_key;
using provenance::GroupRule;

// Sets the checksum of the 512-byte header at h, as tar writers do.
void set_checksum(char* h) {
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (int i = 0; i < 512; ++i) sum += static_cast<unsigned char>(h[i]);
  std::snprintf(h + 148, 8, "%06o", sum);
}

// Writes a tar shard the way tar writers do, without DLFS's reader.
class ShardWriter {
 public:
  void member(const std::string& name, const std::string& data, char type = '0') {
    header(name, data.size(), type);
    body(data);
  }
  // A pax 'x' header whose path= record names the member; the ustar name is a stub.
  void pax_member(const std::string& name, const std::string& data) {
    std::string rec = " path=" + name + "\n";
    size_t len = rec.size() + 1;
    while (std::to_string(len).size() + rec.size() != len) ++len;
    rec = std::to_string(len) + rec;
    header("PaxHeaders/stub", rec.size(), 'x');
    body(rec);
    member("stub-name-ignored", data);
  }
  void global_pax() {
    const std::string rec = "19 comment=global!\n";
    header("pax_global_header", rec.size(), 'g');
    body(rec);
  }
  // A pax 'x' header with these records (each "key=value"), for the next member.
  void pax(const std::vector<std::string>& records) {
    std::string text;
    for (const std::string& r : records) {
      const std::string rec = " " + r + "\n";
      size_t len = rec.size() + 1;
      while (std::to_string(len).size() + rec.size() != len) ++len;
      text += std::to_string(len) + rec;
    }
    header("PaxHeaders/stub", text.size(), 'x');
    body(text);
  }
  std::string finish() { return bytes_ + std::string(1024, '\0'); }
  std::string& bytes() { return bytes_; }

 private:
  void header(const std::string& name, uint64_t size, char type) {
    std::string h(tar_header_bytes(name), '\0');
    write_tar_header(name, size, 1700000000, 0644, reinterpret_cast<std::byte*>(h.data()));
    char* last = h.data() + h.size() - 512;  // the member's own header (after any 'L' record)
    last[156] = type;
    set_checksum(last);
    bytes_ += h;
  }
  void body(const std::string& data) { bytes_ += data + std::string(tar_padded(data.size()) - data.size(), '\0'); }
  std::string bytes_;
};

constexpr uint64_t kSeed = 5;

class TarShardsTest : public ViewsFixture {
 protected:
  // Shards s0..s5 of keys with 1-3 members; s1 is pax (a non-ASCII name
  // longer than 100 bytes), s2 has a GNU long name; every shard has a
  // directory entry and a non-shard file sits beside them.
  void SetUp() override {
    std::mt19937_64 rng(3);
    for (int s = 0; s < 6; ++s) {
      ShardWriter w;
      const std::string shard = "shards/s" + std::to_string(s) + ".tar";
      if (s == 1) w.global_pax();
      w.member("dir" + std::to_string(s) + "/", "", '5');
      for (int k = 0; k < 12; ++k) {
        std::string key = "./d" + std::to_string(s) + "/k" + std::to_string(k);
        if (s == 1 && k == 3) key = "./d1/" + std::string(90, 'x') + "-\xc3\xa9t\xc3\xa9";
        if (s == 2 && k == 4) key = "./d2/" + std::string(120, 'y');
        for (const char* ext : {".jpg", ".cls", ".meta.json"}) {
          if (ext[1] != 'j' && rng() % 3 == 0) continue;
          std::string bytes = random_string(rng, ext[1] == 'c' ? rng() % 4 : 1 + rng() % 3000);
          const std::string name = key + ext;
          if (s == 1 && k % 2 == 1) {
            w.pax_member(name, bytes);
          } else {
            w.member(name, bytes);
          }
          add(shard, name.substr(2), std::move(bytes));
        }
      }
      tmp_.write_file("data/" + shard, w.finish());
    }
    tmp_.write_file("data/README.txt", "not a shard");
    g_.format.format = "tar";
    g_.format.group_by = GroupRule::first_dot;
  }
  void add(const std::string& shard, std::string name, std::string bytes) {
    const std::string key(group_key(name, GroupRule::first_dot));
    if (groups_.empty() || groups_.back().key != key || groups_.back().shard != shard)
      groups_.push_back({key, shard, {}});
    groups_.back().members.push_back({std::move(name), std::move(bytes)});
  }
  void open_plan(uint64_t budget, bool load) {
    PlanConfig p;
    p.seed = kSeed;
    p.world_size = 2;
    p.round_chunk = 8 << 10;
    open("data", g_, p, budget, load);
  }
  // Opening the dataset with shard s0 replaced by `bytes` fails with `want` in the error.
  void expect_refused(const std::string& bytes, const std::string& want) {
    tmp_.write_file("data/shards/s0.tar", bytes);
    DatasetConfig dc;
    dc.name = "bad";
    dc.backend = tmp_.file("data");
    dc.format = g_.format;
    auto ds = Dataset::open(dc, ~0ull, DaemonConfig{});
    ASSERT_FALSE(ds.is_ok()) << "a bad shard must be refused: " << want;
    EXPECT_NE(ds.status().message().find(want), std::string::npos) << ds.status().message();
  }
  std::string shard0() const {
    std::ifstream in(tmp_.file("data/shards/s0.tar"), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::vector<Group> groups_;
  Generated g_;
};

TEST_F(TarShardsTest, GroupsAreWholeAndOncePerEpoch) {
  open_plan(~0ull, false);
  check_groups_per_epoch(groups_, {1, 2}, kSeed, true);
  EXPECT_EQ(ds().manifest().sample_name(0), groups_[0].key);
  EXPECT_LT(ds().manifest().memory_bytes(), 200u * 1024) << "per-sample tables stay small";
}

TEST_F(TarShardsTest, GroupsAreWholeResidentAndInRounds) {
  open_plan(~0ull, true);
  check_groups_per_epoch(groups_, {1, 2}, kSeed, true);
  EXPECT_EQ(ds().view_counters().reads.fetched_bytes.load(), 0u) << "all resident: no backend read";
  open_plan(ds().manifest().total_bytes() / 3, false);
  ASSERT_TRUE(ds().planner().rounds()) << "a third of the bytes must mean rounds";
  check_groups_per_epoch(groups_, {1, 2}, kSeed, false);
}

// The epoch order is a per-sample shuffle across shards, not shard by shard.
TEST_F(TarShardsTest, OrderMixesShards) {
  open_plan(~0ull, false);
  const auto order = groups_in_tar(groups_, 0, 1, 0);
  ASSERT_EQ(order.size(), groups_.size());
  size_t switches = 0;
  for (size_t k = 1; k < order.size(); ++k) switches += groups_[order[k]].shard != groups_[order[k - 1]].shard;
  EXPECT_GT(switches, order.size() / 2) << "adjacent samples should mostly come from different shards";
  EXPECT_NE(order, groups_in_tar(groups_, 1, 1, 0)) << "epochs differ";
}

TEST_F(TarShardsTest, BadShardsNameFileAndOffset) {
  const std::string good = shard0();
  std::string bad = good;
  bad[512 + 3] ^= 1;  // the second header's name: its checksum no longer matches
  expect_refused(bad, "tar shard 'shards/s0.tar' at byte 512: header checksum does not match");
  expect_refused(good.substr(0, 512 + 512), "tar shard 'shards/s0.tar' at byte 512: member of");
  const size_t end = good.size() - 1024;
  expect_refused(good.substr(0, end), "tar shard 'shards/s0.tar' at byte " + std::to_string(end) +
                                          ": ends without the end-of-archive block");
  bad = good;
  std::memcpy(bad.data() + 512 + 124, "0000000x777", 12);
  set_checksum(bad.data() + 512);
  expect_refused(bad, "tar shard 'shards/s0.tar' at byte 512: size field is not a number");
}

// The scanner on its own: header kinds real writers emit rarely.
class TarShardScanTest : public ::dlfs::test::TempDirTest {
 protected:
  Result<provenance::TarShardFacts> scan(const std::string& bytes, std::vector<provenance::TarShardMember>& out) {
    const std::string path = tmp_.write_file("x.tar", bytes);
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    return provenance::scan_tar_shard(fd.get(), bytes.size(), "x.tar",
                                      [&](provenance::TarShardMember&& m) { out.push_back(std::move(m)); });
  }
};

TEST_F(TarShardScanTest, Base256SizesPaxSizeAndSkippedEntries) {
  ShardWriter w;
  w.member("a.jpg", std::string(700, 'a'));
  const size_t b256 = w.bytes().size();
  w.member("b.jpg", std::string(300, 'b'));
  w.member("link-name", "", 'K');  // a GNU long link name: a record about the next entry
  w.member("l.jpg", "", '2');      // a symlink: skipped
  w.member("v7dir/", "");          // a directory as old writers mark it: skipped
  w.pax({"mtime=1.5", "size=20", "path=./p/c.jpg"});  // the member's size comes from pax
  w.member("c-stub", std::string(20, 'c'));
  std::string bytes = w.finish();
  char* h = bytes.data() + b256;          // b.jpg's size as GNU base-256
  std::memset(h + 124, 0, 12);
  h[124] = static_cast<char>(0x80);
  h[134] = 300 >> 8;
  h[135] = 300 & 0xff;
  set_checksum(h);
  std::vector<provenance::TarShardMember> got;
  auto facts = scan(bytes, got);
  ASSERT_TRUE(facts.is_ok()) << facts.status().message();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1].name, "b.jpg");
  EXPECT_EQ(got[1].size, 300u);
  EXPECT_EQ(bytes.substr(got[1].data_offset, 300), std::string(300, 'b'));
  EXPECT_EQ(got[2].name, "p/c.jpg");
  EXPECT_EQ(got[2].size, 20u);
  EXPECT_EQ(bytes.substr(got[2].data_offset, 20), std::string(20, 'c'));
  EXPECT_LT(got[2].header_offset, got[2].data_offset - 512) << "a member's bytes start at its pax header";
  EXPECT_EQ(facts->skipped, 2u) << "the symlink (its 'K' record is part of it) and v7dir/";
}

TEST_F(TarShardScanTest, RefusesUnsafeNamesAndBadPax) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"path=../etc/passwd"}, "member name '../etc/passwd' is empty, absolute or climbs out"},
      {{"path=/abs"}, "member name '/abs'"},
      {{"size=12x"}, "pax size '12x' is not a number"},
  };
  for (const auto& [records, want] : cases) {
    ShardWriter w;
    w.pax(records);
    w.member("m", "data");
    std::vector<provenance::TarShardMember> got;
    auto facts = scan(w.finish(), got);
    ASSERT_FALSE(facts.is_ok()) << want;
    EXPECT_NE(facts.status().message().find(want), std::string::npos) << facts.status().message();
    EXPECT_NE(facts.status().message().find("tar shard 'x.tar' at byte"), std::string::npos);
  }
  std::vector<provenance::TarShardMember> got;
  ShardWriter p;
  p.member("PaxHeaders/x", "99 path=short\n", 'x');  // a record longer than the pax data
  p.member("m", "data");
  auto facts = scan(p.finish(), got);
  ASSERT_FALSE(facts.is_ok());
  EXPECT_NE(facts.status().message().find("at byte 0: malformed pax record"), std::string::npos)
      << facts.status().message();
}

TEST_F(TarShardsTest, NeedsAGroupRule) {
  g_.format.group_by = GroupRule::none;
  DatasetConfig dc;
  dc.name = "t";
  dc.backend = tmp_.file("data");
  dc.format = g_.format;
  auto ds = Dataset::open(dc, ~0ull, DaemonConfig{});
  ASSERT_FALSE(ds.is_ok());
  EXPECT_NE(ds.status().message().find("format 'tar' needs group_by"), std::string::npos) << ds.status().message();
}

}  // namespace
}  // namespace dlfs::fs::test
