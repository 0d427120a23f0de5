// Who may read a dataset's views (fs/dataset/audience.h), derived from real
// backend trees with real owners (chown needs root: skipped otherwise), and
// what the Namespace then shows: views with the audience's owner, group and
// mode, raw/ with each backend file's own.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "fs/config/config.h"
#include "fs/dataset/audience.h"
#include "fs/dataset/dataset.h"
#include "fs/namespace/namespace.h"
#include "provenance/manifest.h"
#include "temp_dir.h"

namespace dlfs::fs {
namespace {

namespace stdfs = std::filesystem;

// Backend owners that need no user database entry.
constexpr uint32_t kAlice = 60001, kBob = 60002, kStaff = 60010, kOthers = 60011;

class AudienceTest : public ::dlfs::test::TempDirTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to give backend files other owners";
    // mkdtemp makes 0700: the parents of a backend must let users through
    // for any audience but root's (one test closes it on purpose).
    ::chmod(tmp_.path().c_str(), 0755);
    root_ = tmp_.file("data");
    stdfs::create_directories(root_);
    own("", 0, 0, 0755);
  }
  // Writes `rel` (a file) with owner, group and mode.
  void file(const std::string& rel, uint32_t uid, uint32_t gid, mode_t mode) {
    tmp_.write_file("data/" + rel, "bytes of " + rel);
    own(rel, uid, gid, mode);
  }
  void dir(const std::string& rel, uint32_t uid, uint32_t gid, mode_t mode) {
    stdfs::create_directories(root_ + "/" + rel);
    own(rel, uid, gid, mode);
  }
  void own(const std::string& rel, uint32_t uid, uint32_t gid, mode_t mode) {
    const std::string p = rel.empty() ? root_ : root_ + "/" + rel;
    ASSERT_EQ(::chown(p.c_str(), uid, gid), 0) << p;
    ASSERT_EQ(::chmod(p.c_str(), mode), 0) << p;
  }
  Audience audience(const std::string& owner = "", const std::string& group = "", const std::string& mode = "") {
    DatasetConfig dc;
    dc.name = "ds";
    dc.backend = root_;
    dc.view_owner = owner;
    dc.view_group = group;
    dc.view_mode = mode;
    auto m = provenance::Manifest::build(root_, dc.format);
    EXPECT_TRUE(m.is_ok()) << m.status().message();
    auto a = audience_of(dc, *m);
    EXPECT_TRUE(a.is_ok()) << a.status().message();
    return a.is_ok() ? *a : Audience{};
  }
  std::string root_;
};

TEST_F(AudienceTest, AWorldReadableTreeIsReadableByEveryone) {
  dir("a", kAlice, kStaff, 0755);
  file("a/x", kAlice, kStaff, 0644);
  file("y", 0, 0, 0444);
  own("", kAlice, kStaff, 0755);
  Audience a = audience();
  EXPECT_EQ(a.uid, kAlice) << "the backend directory's owner";
  EXPECT_EQ(a.gid, kStaff);
  EXPECT_EQ(a.file_mode(), 0444u);
  EXPECT_EQ(a.dir_mode(), 0555u);
  EXPECT_EQ(a.readers, "everyone");
  EXPECT_FALSE(a.configured);
}

TEST_F(AudienceTest, AnOwnerOnlyFileClosesTheViewsToGroupAndOthers) {
  own("", kAlice, kStaff, 0755);
  file("open", kAlice, kStaff, 0644);
  file("z/secret", kAlice, kStaff, 0600);
  own("z", kAlice, kStaff, 0755);
  Audience a = audience();
  EXPECT_EQ(a.file_mode(), 0400u);
  EXPECT_EQ(a.dir_mode(), 0500u);
  EXPECT_NE(a.why.find("raw/z/secret (-rw------- 60001:60010)"), std::string::npos) << a.why;
  EXPECT_NE(a.why.find("group 60010 (60010) cannot read"), std::string::npos) << a.why;
  EXPECT_NE(a.why.find("other users cannot read"), std::string::npos) << a.why;
}

TEST_F(AudienceTest, AGroupTreeIsReadableByTheGroupOnly) {
  own("", 0, kStaff, 0750);
  dir("d", 0, kStaff, 0750);
  file("d/x", 0, kStaff, 0640);
  file("y", 0, kStaff, 0440);
  Audience a = audience();
  EXPECT_EQ(a.gid, kStaff);
  EXPECT_EQ(a.file_mode(), 0440u);
  EXPECT_EQ(a.dir_mode(), 0550u);
  EXPECT_NE(a.readers.find("group 60010"), std::string::npos) << a.readers;
}

// A file of another group: a member of the views' group may not be in it,
// and one who is not relies on the other bits.
TEST_F(AudienceTest, AFileOfAnotherGroupNeedsItsGroupAndOtherBits) {
  own("", 0, kStaff, 0755);
  file("x", 0, kOthers, 0640);
  EXPECT_EQ(audience().file_mode(), 0400u);
  own("x", 0, kOthers, 0644);
  EXPECT_EQ(audience().file_mode(), 0444u);
}

// Names are what a view lists: a directory one may search but not list
// keeps its names from the class, as the backend does.
TEST_F(AudienceTest, ADirectoryThatCannotBeListedClosesTheViews) {
  dir("hidden", 0, 0, 0711);
  file("hidden/x", 0, 0, 0644);
  Audience a = audience();
  EXPECT_EQ(a.file_mode(), 0400u);
  EXPECT_NE(a.why.find("cannot list raw/hidden (drwx--x--x 0:0)"), std::string::npos) << a.why;
}

// The file's owner is someone else, in the views' group: that member is
// judged by the owner bits (0044: its owner may not read it).
TEST_F(AudienceTest, AFileItsOwnerMayNotReadClosesOthers) {
  file("x", kBob, 0, 0044);
  Audience a = audience();
  EXPECT_EQ(a.file_mode() & 04, 0u) << "bob is an 'other' user of the views and may not read x: " << a.why;
}

TEST_F(AudienceTest, TheBackendDirectorysParentsCount) {
  file("x", 0, 0, 0644);
  ::chmod(tmp_.path().c_str(), 0700);
  Audience a = audience();
  EXPECT_EQ(a.file_mode(), 0400u);
  EXPECT_EQ(a.raw_root_classes, kOwnerClass) << "raw/ keeps out whom the parents keep out";
  EXPECT_NE(a.why.find("cannot search " + tmp_.path()), std::string::npos) << a.why;
  EXPECT_NE(a.why.find("above the backend directory"), std::string::npos) << a.why;
  ::chmod(tmp_.path().c_str(), 0755);
  EXPECT_EQ(audience().raw_root_classes, kAllClasses);
}

TEST_F(AudienceTest, ConfiguredKeysWinAndSayWhenMoreOpenThanTheBackend) {
  file("secret", 0, 0, 0600);
  Audience open = audience("", "", "0644");  // write bits are not view bits
  EXPECT_EQ(open.file_mode(), 0444u);
  EXPECT_TRUE(open.configured);
  EXPECT_TRUE(open.more_open_than_backend());
  EXPECT_NE(open.why.find("configured: view_mode 0444, more open than the backend"), std::string::npos) << open.why;
  EXPECT_NE(open.why.find("raw/secret"), std::string::npos) << open.why;

  Audience group = audience(std::to_string(kAlice), std::to_string(kStaff), "0440");
  EXPECT_EQ(group.uid, kAlice);
  EXPECT_EQ(group.gid, kStaff);
  EXPECT_EQ(group.file_mode(), 0440u);

  Audience closed = audience("", "", "0400");
  EXPECT_FALSE(closed.more_open_than_backend());
  EXPECT_EQ(closed.why, "configured: view_mode 0400");
}

TEST_F(AudienceTest, ConfiguredGroupIsJudgedAgainstTheFiles) {
  own("", 0, kStaff, 0750);
  file("x", 0, kStaff, 0640);
  EXPECT_EQ(audience("", std::to_string(kOthers)).file_mode(), 0400u)
      << "members of another group need not be in the files' group";
  EXPECT_EQ(audience("", std::to_string(kStaff)).file_mode(), 0440u);
}

TEST_F(AudienceTest, UnknownNamesAreErrorsThatNameThem) {
  file("x", 0, 0, 0644);
  DatasetConfig dc;
  dc.name = "ds";
  dc.backend = root_;
  auto m = provenance::Manifest::build(root_, dc.format);
  ASSERT_TRUE(m.is_ok());
  dc.view_owner = "no-such-user-dlfs";
  auto a = audience_of(dc, *m);
  ASSERT_FALSE(a.is_ok());
  EXPECT_NE(a.status().message().find("no user 'no-such-user-dlfs'"), std::string::npos) << a.status().message();
  dc.view_owner = "";
  dc.view_group = "no-such-group-dlfs";
  a = audience_of(dc, *m);
  ASSERT_FALSE(a.is_ok());
  EXPECT_NE(a.status().message().find("no group 'no-such-group-dlfs'"), std::string::npos) << a.status().message();
  EXPECT_FALSE(parse_view_mode("0x44").is_ok());
  EXPECT_FALSE(parse_view_mode("4440").is_ok());
  EXPECT_FALSE(parse_view_mode("").is_ok());
  EXPECT_EQ(*parse_view_mode("440"), 0440u);
}

TEST(AudienceMayRead, FollowsTheKernelsRule) {
  Audience a;
  a.uid = kAlice;
  a.gid = kStaff;
  a.mode = 0040;  // the group, not the owner (the kernel checks the owner's bits alone)
  EXPECT_TRUE(a.may_read(Reader{0, 0, {}})) << "root";
  EXPECT_FALSE(a.may_read(Reader{kAlice, kStaff, {}})) << "the owner, by the owner's bits";
  EXPECT_TRUE(a.may_read(Reader{kBob, kStaff, {}})) << "primary group";
  EXPECT_TRUE(a.may_read(Reader{kBob, kBob, {1, kStaff}})) << "supplementary group";
  EXPECT_FALSE(a.may_read(Reader{kBob, kBob, {1}}));
  a.mode = 0004;
  EXPECT_TRUE(a.may_read(Reader{kBob, kBob, {}}));
  EXPECT_FALSE(a.may_read(Reader{kBob, kStaff, {}})) << "a member is judged by the group's bits";
}

// The Namespace: raw/ shows each file's backend owner, group and mode
// (read-only); everything under epochs/ the audience's.
TEST_F(AudienceTest, NamespaceGivesRawTheBackendsOwnersAndViewsTheAudiences) {
  own("", 0, kStaff, 0750);
  dir("d", kAlice, kStaff, 0750);
  file("d/x", kAlice, kStaff, 0640);
  file("y", kBob, kStaff, 0440);
  DatasetConfig dc;
  dc.name = "ds";
  dc.backend = root_;
  DaemonConfig daemon;
  auto ds = Dataset::open(dc, 1 << 20, daemon);
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  std::vector<std::unique_ptr<Dataset>> datasets;
  datasets.push_back(std::move(ds).value());
  Namespace ns(datasets, [](const Reader*) { return std::string("{}"); }, 1, 0, 0);
  auto walk = [&](std::vector<std::string> path) {
    Result<Attr> cur = ns.getattr(kRootIno);
    for (const auto& part : path) cur = cur ? ns.lookup(cur->ino, part) : cur;
    EXPECT_TRUE(cur.is_ok()) << path.back() << ": " << cur.status().message();
    return cur.is_ok() ? *cur : Attr{};
  };
  Attr x = walk({"ds", "raw", "d", "x"});
  EXPECT_EQ(x.uid, kAlice);
  EXPECT_EQ(x.gid, kStaff);
  EXPECT_EQ(x.mode & 07777, 0440u);
  Attr d = walk({"ds", "raw", "d"});
  EXPECT_EQ(d.uid, kAlice);
  EXPECT_EQ(d.mode & 07777, 0550u);
  Attr raw = walk({"ds", "raw"});
  EXPECT_EQ(raw.gid, kStaff);
  EXPECT_EQ(raw.mode & 07777, 0550u);
  for (auto path : {std::vector<std::string>{"ds", "epochs"}, {"ds", "epochs", "0", "1"}, {"ds", "epochs", "0", "1", "0"}}) {
    Attr v = walk(path);
    EXPECT_EQ(v.uid, 0u);
    EXPECT_EQ(v.gid, kStaff);
    EXPECT_EQ(v.mode & 07777, 0550u) << path.back();
  }
  for (auto name : {"0.tar", "0.index"}) {
    Attr v = walk({"ds", "epochs", "0", "1", name});
    EXPECT_EQ(v.gid, kStaff);
    EXPECT_EQ(v.mode & 07777, 0440u) << name;
  }
}

}  // namespace
}  // namespace dlfs::fs
