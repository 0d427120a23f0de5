// The mount table parser and the decision a starting dlfsd makes about what
// is mounted at its mountpoint (free, its own dead mount, a live one, someone
// else's file system), without mounting anything: the decision is a pure
// function and the real table of this process is read as it is. The real
// mounts (a SIGKILLed daemon, a tmpfs) are in tests/integration/22_crash_restart.sh.
#include "fs/kernel/mountpoint_check.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "fs/kernel/mountinfo.h"
#include "temp_dir.h"

namespace dlfs::fs {
namespace {

using Action = MountVerdict::Action;
using Answer = MountProbe::Answer;

// Lines in the kernel's format (proc(5)): optional fields, escaped paths, a
// stacked mount, and two lines that are not mountinfo.
constexpr const char* kTable =
    "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
    "1 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
    "not a mountinfo line\n"
    "97 1 0:50 / /tmp/job\\040one/mnt rw,nosuid,nodev,relatime shared:60 master:3 - fuse.dlfs dlfs "
    "rw,user_id=0,group_id=0,default_permissions\n"
    "120 97 0:61 / /tmp/job\\040one/mnt rw,relatime - tmpfs tmpfs rw,size=1024k\n"
    "130 1 0:70 / /srv/a\\134b rw - fuse dlfs rw\n"
    "131 1 0:71 / /srv/c rw shared:2\n";

TEST(Mountinfo, ParsesFieldsUnescapesPathsAndSkipsOtherLines) {
  const auto t = parse_mountinfo(kTable);
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[0].mount_point, "/proc");
  EXPECT_EQ(t[0].fstype, "proc");
  EXPECT_EQ(t[1].source, "/dev/sda1");
  EXPECT_EQ(t[2].id, 97);
  EXPECT_EQ(t[2].parent, 1);
  EXPECT_EQ(t[2].mount_point, "/tmp/job one/mnt");  // \040, after two optional fields
  EXPECT_EQ(t[2].fstype, "fuse.dlfs");
  EXPECT_EQ(t[2].source, "dlfs");
  EXPECT_EQ(t[2].dev_major, 0u);  // "0:50": a FUSE mount's minor is its connection number
  EXPECT_EQ(t[2].dev_minor, 50u);
  EXPECT_EQ(t[1].dev_major, 8u);  // "8:1"
  EXPECT_EQ(t[1].dev_minor, 1u);
  EXPECT_EQ(t[4].mount_point, "/srv/a\\b");  // \134 is a backslash
  EXPECT_TRUE(parse_mountinfo("").empty());
  EXPECT_TRUE(parse_mountinfo("1 0 8:1 / / rw - ext4").empty()) << "no source field";
}

TEST(Mountinfo, TopmostMountIsTheOneNothingWasMountedOver) {
  const auto t = parse_mountinfo(kTable);
  auto top = topmost_mount_at(t, "/tmp/job one/mnt");
  ASSERT_TRUE(top);
  EXPECT_EQ(top->id, 120);  // the tmpfs mounted over the DLFS mount
  EXPECT_EQ(top->fstype, "tmpfs");
  // The same stack listed in the other order gives the same answer.
  std::vector<MountEntry> reversed(t.rbegin(), t.rend());
  EXPECT_EQ(topmost_mount_at(reversed, "/tmp/job one/mnt")->id, 120);
  EXPECT_FALSE(topmost_mount_at(t, "/tmp/job one"));
  EXPECT_FALSE(topmost_mount_at(t, "/tmp/job one/mnt/"));  // paths are compared resolved, as the kernel lists them
  EXPECT_EQ(topmost_mount_at(t, "/")->fstype, "ext4");
}

TEST(Mountinfo, DlfsMountsAreKnownByTypeAndSource) {
  const auto t = parse_mountinfo(kTable);
  EXPECT_TRUE(is_dlfs_mount(t[2]));   // fuse.dlfs, source dlfs
  EXPECT_TRUE(is_dlfs_mount(t[4]));   // a kernel without subtypes: fuse, source dlfs
  EXPECT_FALSE(is_dlfs_mount(t[3]));  // tmpfs
  EXPECT_FALSE(is_dlfs_mount(MountEntry{.mount_point = "/m", .fstype = "fuse.sshfs", .source = "dlfs"}));
  EXPECT_FALSE(is_dlfs_mount(MountEntry{.mount_point = "/m", .fstype = "fuse.dlfs", .source = "other"}));
}

TEST(Mountinfo, ReadsThisProcessTable) {
  auto t = read_mountinfo();
  ASSERT_TRUE(t) << t.status().message();
  auto root = topmost_mount_at(*t, "/");
  ASSERT_TRUE(root) << "no mount at / in /proc/self/mountinfo";
  EXPECT_FALSE(root->fstype.empty());
  auto proc = topmost_mount_at(*t, "/proc");
  ASSERT_TRUE(proc);
  EXPECT_EQ(proc->fstype, "proc");
}

// judge_mountpoint with a probe that counts its calls and answers `a`.
struct Judged {
  MountVerdict verdict;
  int probes = 0;
};
Judged judge(const std::optional<MountEntry>& top, Answer a, int err = 0) {
  Judged j;
  j.verdict = judge_mountpoint("/mnt/x", top, [&] {
    ++j.probes;
    return MountProbe{a, err};
  });
  return j;
}

const MountEntry kDlfs{.id = 97, .parent = 1, .mount_point = "/mnt/x", .fstype = "fuse.dlfs", .source = "dlfs"};

TEST(JudgeMountpoint, NothingMountedMeansMountWithoutProbing) {
  auto j = judge(std::nullopt, Answer::answers);
  EXPECT_EQ(j.verdict.action, Action::mount);
  EXPECT_EQ(j.probes, 0);
}

TEST(JudgeMountpoint, AnotherFileSystemIsRefusedByNameAndNeverProbed) {
  auto j = judge(MountEntry{.id = 5, .mount_point = "/mnt/x", .fstype = "tmpfs", .source = "scratch"},
                 Answer::not_connected);
  EXPECT_EQ(j.verdict.action, Action::refuse);
  EXPECT_EQ(j.probes, 0) << "a foreign mount must not even be asked (it may be a hung NFS)";
  EXPECT_NE(j.verdict.why.find("mountpoint '/mnt/x' is busy"), std::string::npos) << j.verdict.why;
  EXPECT_NE(j.verdict.why.find("a tmpfs file system (source 'scratch')"), std::string::npos) << j.verdict.why;
  EXPECT_NE(j.verdict.why.find("leaves it alone"), std::string::npos) << j.verdict.why;
  // A FUSE mount of another program is as foreign as a tmpfs, even if dead.
  auto sshfs = judge(MountEntry{.id = 6, .mount_point = "/mnt/x", .fstype = "fuse.sshfs", .source = "host:/"},
                     Answer::not_connected);
  EXPECT_EQ(sshfs.verdict.action, Action::refuse);
  EXPECT_NE(sshfs.verdict.why.find("fuse.sshfs"), std::string::npos) << sshfs.verdict.why;
}

TEST(JudgeMountpoint, ADeadDlfsMountIsUnmounted) {
  auto j = judge(kDlfs, Answer::not_connected, ENOTCONN);
  EXPECT_EQ(j.verdict.action, Action::unmount_dead);
  EXPECT_EQ(j.probes, 1);
  EXPECT_NE(j.verdict.why.find("not connected"), std::string::npos) << j.verdict.why;
  // Some kernels answer a dead daemon's mount with ECONNABORTED: dead all the same.
  auto aborted = judge(kDlfs, Answer::not_connected, ECONNABORTED);
  EXPECT_EQ(aborted.verdict.action, Action::unmount_dead);
  EXPECT_NE(aborted.verdict.why.find("abort"), std::string::npos) << aborted.verdict.why;
}

TEST(JudgeMountpoint, ALiveDlfsMountIsRefused) {
  auto j = judge(kDlfs, Answer::answers);
  EXPECT_EQ(j.verdict.action, Action::refuse);
  EXPECT_NE(j.verdict.why.find("is busy: a running dlfsd serves it"), std::string::npos) << j.verdict.why;
}

TEST(JudgeMountpoint, ADlfsMountThatDoesNotAnswerIsLeftAlone) {
  auto j = judge(kDlfs, Answer::no_answer);
  EXPECT_EQ(j.verdict.action, Action::refuse);
  EXPECT_NE(j.verdict.why.find("did not answer within 5 s"), std::string::npos) << j.verdict.why;
}

TEST(JudgeMountpoint, ADlfsMountAnsweringAnotherErrorIsLeftAlone) {
  auto j = judge(kDlfs, Answer::error, EACCES);
  EXPECT_EQ(j.verdict.action, Action::refuse);
  EXPECT_NE(j.verdict.why.find(std::strerror(EACCES)), std::string::npos) << j.verdict.why;
}

class MountpointCheckTest : public ::dlfs::test::TempDirTest {};

TEST_F(MountpointCheckTest, AFreeEmptyDirectoryIsAcceptedAsAnAbsolutePath) {
  std::filesystem::create_directories(tmp_ / "mnt");
  auto abs = check_mountpoint(tmp_.file("mnt") + "/");
  ASSERT_TRUE(abs) << abs.status().message();
  EXPECT_EQ(*abs, std::filesystem::canonical(tmp_ / "mnt").string());
  // Relative to the working directory, through a symlink: the resolved path.
  std::filesystem::create_directory_symlink(tmp_ / "mnt", tmp_ / "link");
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(tmp_.path());
  auto rel = check_mountpoint("link");
  std::filesystem::current_path(cwd);
  ASSERT_TRUE(rel) << rel.status().message();
  EXPECT_EQ(*rel, *abs);
}

TEST_F(MountpointCheckTest, BadDirectoriesAreRefusedByName) {
  tmp_.write_file("full/something", "x");
  tmp_.write_file("a_file", "x");
  auto missing = check_mountpoint(tmp_.file("nope"));
  EXPECT_EQ(missing.status().err(), ENOENT);
  EXPECT_NE(missing.status().message().find("mountpoint '" + tmp_.file("nope") + "'"), std::string::npos);
  EXPECT_EQ(check_mountpoint(tmp_.file("a_file")).status().err(), ENOTDIR);
  auto full = check_mountpoint(tmp_.file("full"));
  EXPECT_EQ(full.status().err(), ENOTEMPTY);
  EXPECT_NE(full.status().message().find("is not empty"), std::string::npos) << full.status().message();
}

TEST_F(MountpointCheckTest, AMountedFileSystemOfThisMachineIsRefusedAndNamed) {
  // /proc is a real mount in every Linux process: dlfsd names it and leaves it alone.
  auto r = check_mountpoint("/proc");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().err(), EBUSY);
  EXPECT_NE(r.status().message().find("a proc file system (source 'proc')"), std::string::npos)
      << r.status().message();
}

TEST_F(MountpointCheckTest, ProbeAnswersForALiveFileSystemAndNamesErrors) {
  EXPECT_EQ(probe_mount(tmp_.path(), std::chrono::seconds(5)).answer, Answer::answers);
  auto gone = probe_mount(tmp_.file("nope"), std::chrono::seconds(5));
  EXPECT_EQ(gone.answer, Answer::error);
  EXPECT_EQ(gone.err, ENOENT);
}

}  // namespace
}  // namespace dlfs::fs
