// Format "tfrecord" (provenance/format_tfrecord.cc, tfrecord.h): the framing
// against the test's own encoder (tfrecord_test_util.h), records located by
// a scan and by a DALI index, and bad input: a bad length CRC or a truncated
// record fails the load naming file and offset, a bad data CRC fails every
// read check of that sample (and only that one) naming file and offset.
#include <fcntl.h>
#include <sys/stat.h>

#include <map>
#include <random>
#include <span>

#include "provenance/manifest.h"
#include "provenance/tfrecord.h"
#include "temp_dir.h"
#include "tfrecord_test_util.h"

namespace dlfs::provenance {
namespace {

namespace tf = tfrecord;
using dlfs::test::ref_frame;
using dlfs::test::ref_masked_crc;

std::span<const std::byte> as_bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }
std::string as_string(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

class TfrecordTest : public ::dlfs::test::TempDirTest {
 protected:
  // Writes `records` framed as one file; returns where each record starts.
  std::vector<uint64_t> write(const std::string& rel, const std::vector<std::string>& records) {
    std::string content;
    std::vector<uint64_t> at;
    for (const auto& r : records) {
      at.push_back(content.size());
      content += ref_frame(r);
    }
    files_[rel] = content;
    tmp_.write_file("ds/" + rel, content);
    return at;
  }
  Result<Manifest> open() {
    FormatOptions o;
    o.format = "tfrecord";
    return Manifest::build(tmp_.file("ds"), o);
  }
  // The sample's bytes as the file holds them, and its 12 check bytes.
  std::string data(const Manifest& m, uint64_t i) const {
    const SampleLocation l = m.sample(i);
    return files_.at(m.file_path(l.file)).substr(l.offset, l.length);
  }
  std::string header(const Manifest& m, uint64_t i) const {
    const SampleLocation l = m.sample(i);
    return files_.at(m.file_path(l.file)).substr(l.offset - 12, 12);
  }
  Status check(const Manifest& m, uint64_t i) const {
    const std::string h = header(m, i);
    return m.check_sample(i, as_bytes(h));
  }
  std::map<std::string, std::string> files_;
};

TEST_F(TfrecordTest, FramingMatchesAnIndependentEncoder) {
  EXPECT_EQ(tf::crc32c(as_bytes("123456789")), 0xE3069283u) << "the CRC32C check value";
  std::mt19937_64 rng(3);
  for (size_t n : {0, 1, 7, 8, 4095, 70000}) {
    std::string d(n, '\0');
    for (auto& c : d) c = static_cast<char>(rng());
    EXPECT_EQ(as_string(tf::frame(as_bytes(d))), ref_frame(d)) << n << " bytes";
    EXPECT_EQ(tf::masked_crc32c(as_bytes(d)), ref_masked_crc(d));
  }
}

TEST_F(TfrecordTest, RecordsAreTheSamplesLocatedByScanOrIndex) {
  const std::vector<std::string> a = {"alpha", "", std::string(5000, 'x'), "omega"}, b = {"b0", "b1"};
  write("a.tfrecord", a);
  const auto b_at = write("sub/b", b);
  for (bool indexed : {false, true}) {
    if (indexed) tmp_.write_file("ds/sub/b.idx", "0 18\n" + std::to_string(b_at[1]) + " 18\n");
    auto m = open();
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    ASSERT_EQ(m->sample_count(), 6u) << "the .idx is an index, not a data file";
    std::vector<std::string> want = a;
    want.insert(want.end(), b.begin(), b.end());
    for (uint64_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(data(*m, i), want[i]) << "sample " << i;
      EXPECT_TRUE(check(*m, i).is_ok()) << check(*m, i).message();
      auto crc = m->sample_masked_crc(i);
      ASSERT_TRUE(crc.is_ok());
      EXPECT_EQ(*crc, ref_masked_crc(want[i]));
    }
    EXPECT_EQ(m->sample_name(1), "a.tfrecord#000001");
    EXPECT_EQ(m->member_name(5), "sub/b/00000001.bin");
  }
  // A stale index (records that do not tile the file) is not used: the scan is.
  tmp_.write_file("ds/sub/b.idx", "0 18\n18 19\n");
  auto m = open();
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(data(*m, 5), "b1");
}

TEST_F(TfrecordTest, BadLengthCrcOrTruncationFailsTheLoadNamingFileAndOffset) {
  const auto at = write("x.tfrecord", {"first", "second", "third"});
  std::string bad = files_["x.tfrecord"];
  bad[at[1] + 9] ^= 0x20;  // the second record's length CRC
  tmp_.write_file("ds/x.tfrecord", bad);
  auto m = open();
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().err(), EIO);
  const std::string msg = m.status().message();
  const std::string where = tmp_.file("ds/x.tfrecord") + ": record at byte " + std::to_string(at[1]);
  EXPECT_NE(msg.find(where), std::string::npos) << msg;
  EXPECT_NE(msg.find("length's CRC"), std::string::npos) << msg;

  // With tfrecord_skip_bad_files the file is left out and the others serve.
  write("y.tfrecord", {"y0", "y1"});
  FormatOptions skip;
  skip.format = "tfrecord";
  skip.tfrecord_skip_bad_files = true;
  auto rest = Manifest::build(tmp_.file("ds"), skip);
  ASSERT_TRUE(rest.is_ok()) << rest.status().message();
  ASSERT_EQ(rest->sample_count(), 2u);
  EXPECT_EQ(data(*rest, 1), "y1");

  tmp_.write_file("ds/x.tfrecord", files_["x.tfrecord"].substr(0, at[2] + 14));  // the third cut short
  m = open();
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("record at byte " + std::to_string(at[2]) + ": truncated"), std::string::npos)
      << m.status().message();
}

TEST_F(TfrecordTest, BadDataCrcFailsThatSamplesChecksNamingFileAndOffset) {
  const auto at = write("x.tfrecord", {"good", "damaged record", "also good"});
  std::string bad = files_["x.tfrecord"];
  bad[at[1] + 12 + 3] ^= 0x01;  // one data bit of the second record
  files_["x.tfrecord"] = bad;
  tmp_.write_file("ds/x.tfrecord", bad);
  auto m = open();
  ASSERT_TRUE(m.is_ok()) << "the scan reads headers only: " << m.status().message();
  EXPECT_TRUE(check(*m, 0).is_ok());
  EXPECT_TRUE(check(*m, 2).is_ok());
  for (int again = 0; again < 2; ++again) {  // the verdict is kept, and stays an error
    Status s = check(*m, 1);
    EXPECT_EQ(s.err(), EIO);
    EXPECT_NE(s.message().find(tmp_.file("ds/x.tfrecord") + ": record at byte " + std::to_string(at[1])),
              std::string::npos) << s.message();
    EXPECT_EQ(m->sample_masked_crc(1).status().err(), EIO);
  }
  // The file touched after the load: a record not checked yet is not checked
  // against the new version (EIO naming the change), though its bytes match.
  const std::string path = tmp_.file("ds/x.tfrecord");
  auto fresh = open();
  ASSERT_TRUE(fresh.is_ok());
  struct timespec later[2] = {{0, UTIME_OMIT}, {67890, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), later, 0), 0);
  Status changed = check(*fresh, 2);
  EXPECT_EQ(changed.err(), EIO);
  EXPECT_NE(changed.message().find("changed since the dataset was opened"), std::string::npos) << changed.message();
  // A header that no longer says the length the load saw (file rewritten).
  const std::string wrong = ref_frame("other length!").substr(0, 12);
  EXPECT_EQ(m->check_sample(0, as_bytes(wrong)).err(), EIO);
}

TEST_F(TfrecordTest, IndexParsingNamesTheLine) {
  EXPECT_TRUE(tf::parse_index("0 20\n20 16\n", 36, "i").is_ok());
  auto gap = tf::parse_index("0 20\n21 16\n", 37, "i");
  ASSERT_FALSE(gap.is_ok());
  EXPECT_NE(gap.status().message().find("i, line 2"), std::string::npos) << gap.status().message();
  EXPECT_FALSE(tf::parse_index("0 20 junk\n", 20, "i").is_ok());
  EXPECT_FALSE(tf::parse_index("0 10\n", 10, "i").is_ok()) << "a record has at least 16 bytes";
  EXPECT_FALSE(tf::parse_index("0 20\n", 40, "i").is_ok()) << "records must reach the end of the file";
  EXPECT_EQ(tf::index_text({{0, 4}, {20, 0}}), "0 20\n20 16\n");
}

}  // namespace
}  // namespace dlfs::provenance
