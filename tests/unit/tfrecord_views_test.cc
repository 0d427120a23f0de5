// A TFRecord dataset with one damaged record, through the views (Namespace,
// no mount), resident or not: reads of the damaged record's data fail with
// EIO naming the file and the record's offset, in .tfrecord and .tar alike;
// every other byte is served right. Expected bytes come from the test's own
// encoder (tfrecord_test_util.h), not from DLFS.
#include <fstream>
#include <iterator>

#include "views_test_util.h"

namespace dlfs::fs::test {
namespace {

constexpr uint64_t kSeed = 77;

class TfrecordViewsTest : public ViewsFixture {
 protected:
  // Flips one data byte of record `index` of `rel`; returns the record's offset.
  uint64_t damage(const std::string& rel, int index) {
    std::ifstream in(tmp_.file(rel), std::ios::binary);
    std::string t((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    uint64_t at = 0;
    for (int i = 0; i < index; ++i) at += 16 + dlfs::test::le_value(t, at, 8);
    const uint64_t len = dlfs::test::le_value(t, at, 8);
    EXPECT_GT(len, 0u) << "pick a record with data";
    t[at + 12 + len / 2] ^= 0x10;
    tmp_.write_file(rel, t);
    return at;
  }
  Status read_status(const Attr& f, uint64_t offset, uint64_t size) const {
    cache::Gather g;
    Status s = ns_->read(f.ino, offset, size, g);
    g.release();
    return s;
  }
};

TEST_F(TfrecordViewsTest, ADamagedRecordFailsWithEioAndEveryOtherByteIsRight) {
  const Generated g = make_tfrecord_dataset(tmp_, "data", {6, 7}, 2000, 4);
  const uint64_t bad = 6 + 2;  // record 2 of shard-1
  const uint64_t at = damage("data/shard-1.tfrecord", 2);
  const std::string where = tmp_.file("data/shard-1.tfrecord") + ": record at byte " + std::to_string(at);
  for (bool load : {false, true}) {
    PlanConfig p;
    p.seed = kSeed;
    p.world_size = 1;
    open("data", g, p, load ? ~0ull : 0, load);
    const auto order = planned(kSeed, 0, g.samples.size(), 1, 0);
    std::string want;
    uint64_t bad_begin = 0;
    for (uint64_t id : order) {
      if (id == bad) bad_begin = want.size();
      want += dlfs::test::ref_frame(g.samples[id].bytes);
    }
    const uint64_t bad_end = bad_begin + 16 + g.samples[bad].bytes.size();
    auto f = open_view(view_path(0, 1, 0, ".tfrecord"));
    ASSERT_TRUE(f);
    EXPECT_EQ(read_range(*f, 0, bad_begin + 12), want.substr(0, bad_begin + 12)) << "up to the damaged data";
    if (bad_end < want.size()) {
      EXPECT_EQ(read_range(*f, bad_end, want.size()), want.substr(bad_end)) << "after the damaged record";
    }
    for (uint64_t from : {bad_begin, bad_begin + 13, bad_end - 4}) {  // its header, data, footer
      Status s = read_status(*f, from, 64);
      EXPECT_EQ(s.err(), EIO) << "read at " << from << (load ? " (resident)" : "") << ": " << s.message();
      EXPECT_NE(s.message().find(where), std::string::npos) << s.message();
    }
    auto tar = open_view(view_path(0, 1, 0, ".tar"));
    ASSERT_TRUE(tar);
    EXPECT_EQ(read_status(*tar, 0, 1 << 24).err(), EIO) << "the .tar holds the same record";
  }
}

}  // namespace
}  // namespace dlfs::fs::test
