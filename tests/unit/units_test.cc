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
