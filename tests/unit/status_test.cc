// Status and Result<T>: errno and message, context, value/error paths, and
// the early-return macro.
#include <cstring>
#include <memory>
#include <string>
#include <variant>

#include <gtest/gtest.h>

#include "common/status.h"

namespace dlfs {
namespace {

TEST(Status, DefaultAndOkAreOk) {
  Status d;
  EXPECT_TRUE(d.is_ok());
  EXPECT_TRUE(static_cast<bool>(d));
  EXPECT_EQ(d.err(), 0);
  EXPECT_EQ(d.message(), "");
  EXPECT_TRUE(Status::ok().is_ok());
}

TEST(Status, ErrorKeepsErrnoAndMessage) {
  Status s(ENOSPC, "cache full");
  EXPECT_FALSE(s.is_ok());
  EXPECT_FALSE(static_cast<bool>(s));
  EXPECT_EQ(s.err(), ENOSPC);
  EXPECT_EQ(s.message(), "cache full");
}

TEST(Status, FromErrnoAppendsStrerror) {
  Status s = Status::from_errno(EACCES, "backend '/data/x'");
  EXPECT_EQ(s.err(), EACCES);
  EXPECT_EQ(s.message(), std::string("backend '/data/x': ") + std::strerror(EACCES));
  EXPECT_NE(s.message().find("Permission denied"), std::string::npos);
}

// errno 0 (a caller that read errno too late) still makes an error; its text
// should describe the errno it reports (EIO), not "Success".
TEST(Status, FromErrnoZeroIsAnIoErrorWithMatchingText) {
  Status s = Status::from_errno(0, "read 'x'");
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.err(), EIO);
  EXPECT_EQ(s.message().find("Success"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(std::strerror(EIO)), std::string::npos) << s.message();
}

TEST(Status, WithContextPrefixesAndNests) {
  Status s = Status(ENOENT, "no such sample").with_context("file 'a/b.jpg'").with_context("dataset 'imagenet'");
  EXPECT_EQ(s.err(), ENOENT);
  EXPECT_EQ(s.message(), "dataset 'imagenet': file 'a/b.jpg': no such sample");
  Status ok = Status::ok().with_context("ignored");
  EXPECT_TRUE(ok.is_ok());
  EXPECT_EQ(ok.message(), "");
  // with_context does not change the original.
  Status base(EIO, "x");
  (void)base.with_context("y");
  EXPECT_EQ(base.message(), "x");
}

TEST(Result, ValuePath) {
  Result<std::string> r = std::string("hello");
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(*r, "hello");
  EXPECT_EQ(r->size(), 5u);
  EXPECT_TRUE(r.status().is_ok());
  r.value() += "!";
  EXPECT_EQ(r.value(), "hello!");
  const Result<std::string>& cr = r;
  EXPECT_EQ(cr->size(), 6u);
  std::string moved = std::move(r).value();
  EXPECT_EQ(moved, "hello!");
}

TEST(Result, MoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(**r, 7);
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, 7);
}

TEST(Result, ErrorPath) {
  Result<int> r = Status(EINVAL, "bad value");
  EXPECT_FALSE(r.is_ok());
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.status().err(), EINVAL);
  EXPECT_EQ(r.status().message(), "bad value");
  EXPECT_THROW((void)r.value(), std::bad_variant_access);
  Result<int> ctx = r.status().with_context("option 'x'");
  EXPECT_EQ(ctx.status().message(), "option 'x': bad value");
}

// Every caller writes `if (!r) return r.status();`. A Result built from an OK
// Status has no value, so its status() must not claim success, or that
// caller returns OK with nothing behind it.
TEST(Result, BuiltFromAnOkStatusIsStillAnError) {
  Result<int> r = Status::ok();
  EXPECT_FALSE(r.is_ok());
  EXPECT_FALSE(r.status().is_ok()) << "no value, yet status() says OK";
}

int g_evaluations = 0;
Status count_and_return(Status s) {
  ++g_evaluations;
  return s;
}

Status two_steps(bool fail_first, bool fail_second, int& steps) {
  steps = 0;
  DLFS_RETURN_IF_ERROR(count_and_return(fail_first ? Status(EIO, "step 1") : Status::ok()));
  ++steps;
  DLFS_RETURN_IF_ERROR(count_and_return(fail_second ? Status(ENOSPC, "step 2") : Status::ok()));
  ++steps;
  return Status::ok();
}

TEST(ReturnIfError, ReturnsTheFirstErrorAndEvaluatesOnce) {
  int steps = -1;
  g_evaluations = 0;
  Status s = two_steps(true, true, steps);
  EXPECT_EQ(s.err(), EIO);
  EXPECT_EQ(s.message(), "step 1");
  EXPECT_EQ(steps, 0);
  EXPECT_EQ(g_evaluations, 1);
  g_evaluations = 0;
  s = two_steps(false, true, steps);
  EXPECT_EQ(s.err(), ENOSPC);
  EXPECT_EQ(steps, 1);
  EXPECT_EQ(g_evaluations, 2);
  EXPECT_TRUE(two_steps(false, false, steps).is_ok());
  EXPECT_EQ(steps, 2);
}

Result<int> parse_positive(int v, bool fail_check) {
  DLFS_RETURN_IF_ERROR(fail_check ? Status(ERANGE, "out of range") : Status::ok());
  if (v <= 0) return Status(EINVAL, "not positive");
  return v;
}

TEST(ReturnIfError, WorksInFunctionsReturningResult) {
  auto bad = parse_positive(5, true);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().err(), ERANGE);
  EXPECT_EQ(*parse_positive(5, false), 5);
  EXPECT_EQ(parse_positive(-1, false).status().err(), EINVAL);
}

Status in_unbraced_if(bool cond, int& branch) {
  if (cond)
    DLFS_RETURN_IF_ERROR(Status(EIO, "x"));
  else
    branch = 2;
  return Status::ok();
}

TEST(ReturnIfError, IsASingleStatement) {
  int branch = 0;
  EXPECT_EQ(in_unbraced_if(true, branch).err(), EIO);
  EXPECT_EQ(branch, 0);
  EXPECT_TRUE(in_unbraced_if(false, branch).is_ok());
  EXPECT_EQ(branch, 2);
}

}  // namespace
}  // namespace dlfs
