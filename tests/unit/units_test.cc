#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "common/status.h"
#include "common/units.h"

namespace dlfs {
namespace {

TEST(Units, ParseSize) {
  EXPECT_EQ(*parse_size("4096"), 4096u);
  EXPECT_EQ(*parse_size("64KiB"), 64u << 10);
  EXPECT_EQ(*parse_size("8MiB"), 8u << 20);
  EXPECT_EQ(*parse_size("1.5GiB"), 3ull << 29);
  EXPECT_EQ(*parse_size("2G"), 2ull << 30);
  EXPECT_EQ(*parse_size("1 MiB"), 1u << 20);
  EXPECT_EQ(*parse_size("0"), 0u);
  for (const char* bad : {"", "abc", "-1", "12parsecs"}) EXPECT_FALSE(parse_size(bad).is_ok()) << bad;
  EXPECT_NE(parse_size("12parsecs").status().message().find("parsecs"), std::string::npos);
}

TEST(Units, Format) {
  EXPECT_EQ(format_size(0), "0 B");
  EXPECT_EQ(format_size(512), "512 B");
  EXPECT_EQ(format_size(1536), "1.50 KiB");
  EXPECT_EQ(format_size(1ull << 30), "1.00 GiB");
  EXPECT_EQ(format_rate(2.5e9), "2.50 GB/s");
}

TEST(Units, ParseSizeSpellings) {
  EXPECT_EQ(*parse_size("4096B"), 4096u);
  EXPECT_EQ(*parse_size("4096 "), 4096u);
  EXPECT_EQ(*parse_size("64k"), 64u << 10);
  EXPECT_EQ(*parse_size("64kb"), 64u << 10);
  EXPECT_EQ(*parse_size("64 KiB"), 64u << 10);
  EXPECT_EQ(*parse_size("8m"), 8u << 20);
  EXPECT_EQ(*parse_size("0.5GiB"), 1ull << 29);
  EXPECT_EQ(*parse_size("3T"), 3ull << 40);
  EXPECT_EQ(*parse_size("0KiB"), 0u);
}

TEST(Units, ParseSizeErrorsNameTheText) {
  for (const char* bad : {"", "abc", "-1", "-1KiB", "12parsecs", "1.5.5", "KiB", "nan", "inf", "4096 B B"}) {
    auto r = parse_size(bad);
    ASSERT_FALSE(r.is_ok()) << "'" << bad << "' parsed as " << *r;
    EXPECT_EQ(r.status().err(), EINVAL) << bad;
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos) << r.status().message();
  }
  auto unit = parse_size("12parsecs");
  EXPECT_NE(unit.status().message().find("'parsecs'"), std::string::npos) << unit.status().message();
  EXPECT_NE(unit.status().message().find("MiB"), std::string::npos) << "lists the valid units";
}

// Sizes at and above 2^63 bytes must not go through a signed conversion.
TEST(Units, ParseSizeNearTheTopOfUint64) {
  auto big = parse_size("10000000TiB");  // 1.0995e19 bytes, > INT64_MAX, < UINT64_MAX
  ASSERT_TRUE(big.is_ok()) << big.status().message();
  EXPECT_EQ(*big, 10000000ull << 40);
  auto just_over_int64 = parse_size("8388608TiB");  // exactly 2^63
  ASSERT_TRUE(just_over_int64.is_ok()) << just_over_int64.status().message();
  EXPECT_EQ(*just_over_int64, 1ull << 63);
  auto too_big = parse_size("16777216TiB");  // 2^64
  ASSERT_FALSE(too_big.is_ok());
  EXPECT_EQ(too_big.status().err(), ERANGE);
  EXPECT_FALSE(parse_size("1e30").is_ok());
}

TEST(Units, FormatSizeMoreValues) {
  EXPECT_EQ(format_size(1023), "1023 B");
  EXPECT_EQ(format_size(1024), "1.00 KiB");
  EXPECT_EQ(format_size(64 << 10), "64.0 KiB");
  EXPECT_EQ(format_size(500ull << 20), "500 MiB");
  EXPECT_EQ(format_size(3ull << 40), "3.00 TiB");
  EXPECT_EQ(format_size(5ull << 50), "5.00 PiB");
  EXPECT_EQ(format_size(UINT64_MAX), "16384 PiB");  // no unit past PiB
}

// Rounding must not print a number that belongs to the next unit:
// 1048575 bytes is "1.00 MiB", not "1024 KiB".
TEST(Units, FormatSizeNeverShows1024OfAUnit) {
  for (int shift = 10; shift <= 40; shift += 10) {
    uint64_t just_below = (1ull << (shift + 10)) - 1;
    std::string s = format_size(just_below);
    EXPECT_EQ(s.rfind("1024 ", 0), std::string::npos) << just_below << " -> " << s;
    EXPECT_EQ(s.rfind("1.00 ", 0), 0u) << just_below << " -> " << s;
  }
}

TEST(Units, FormatRateUnits) {
  EXPECT_EQ(format_rate(2.5e9), "2.50 GB/s");
  EXPECT_NE(format_rate(2.5e9).find("GB/s"), std::string::npos);
  EXPECT_EQ(format_rate(12.5e9), "12.50 GB/s");
  EXPECT_EQ(format_rate(1.5e6), "1.5 MB/s");
  EXPECT_EQ(format_rate(999e6), "999.0 MB/s");
  EXPECT_EQ(format_rate(2500), "2.5 kB/s");
  EXPECT_EQ(format_rate(0), "0.0 kB/s");
}

Status fails_then_continues(bool fail, int& reached) {
  DLFS_RETURN_IF_ERROR(fail ? Status(EIO, "first") : Status::ok());
  reached = 1;
  return Status::ok();
}

TEST(StatusTest, ContextAndErrno) {
  Status s = Status::from_errno(ENOENT, "file 'x'");
  EXPECT_EQ(s.err(), ENOENT);
  EXPECT_NE(s.message().find("No such file"), std::string::npos);
  Status c = s.with_context("dataset 'd'");
  EXPECT_EQ(c.err(), ENOENT);
  EXPECT_EQ(c.message().rfind("dataset 'd': file 'x'", 0), 0u);
  EXPECT_TRUE(Status::ok().with_context("x").is_ok());
  Result<int> good = 5;
  Result<int> bad = Status(EINVAL, "nope");
  EXPECT_EQ(*good, 5);
  EXPECT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().err(), EINVAL);
  int reached = 0;
  EXPECT_EQ(fails_then_continues(true, reached).err(), EIO);
  EXPECT_EQ(reached, 0);
  EXPECT_TRUE(fails_then_continues(false, reached).is_ok());
  EXPECT_EQ(reached, 1);
}

}  // namespace
}  // namespace dlfs
