// The job token file (fs/config/config.h, load_job_token): read only from a
// regular file of the daemon's user that nobody else can read; anything else
// is refused at once with an error naming the file and what is wrong.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <string>

#include <gtest/gtest.h>

#include "fs/config/config.h"
#include "temp_dir.h"

namespace dlfs::fs {
namespace {

class JobTokenTest : public ::testing::Test {
 protected:
  std::string file(const std::string& name, const std::string& text, mode_t mode) {
    const std::string p = dir_.path() + "/" + name;
    std::ofstream(p) << text;
    EXPECT_EQ(::chmod(p.c_str(), mode), 0);
    return p;
  }
  Result<std::string> load(const std::string& path) {
    DaemonConfig c;
    c.token_file = path;
    return load_job_token(c);
  }
  test::TempDir dir_;
};

TEST_F(JobTokenTest, AnOwnersOnlyRegularFileGivesItsTrimmedText) {
  auto t = load(file("token", "s3cret\n", 0600));
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(*t, "s3cret");
}

TEST_F(JobTokenTest, AFileOthersCanReadIsRefusedWithWhatToChmod) {
  auto t = load(file("token", "s3cret", 0640));
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().err(), EPERM);
  EXPECT_NE(t.status().message().find("chmod 600"), std::string::npos) << t.status().message();
}

TEST_F(JobTokenTest, AFifoIsRefusedAtOnceNotWaitedOn) {
  const std::string fifo = dir_.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto pending = std::async(std::launch::async, [&] { return load(fifo); });
  if (pending.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    // Release the blocked open so that the test ends, and say why it failed.
    int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) ::close(w);
    FAIL() << "load_job_token waited on a FIFO";
  }
  auto t = pending.get();
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().err(), EINVAL);
  EXPECT_NE(t.status().message().find("is not a regular file"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find(fifo), std::string::npos) << "the error names the file";
}

TEST_F(JobTokenTest, ALinkADirectoryAndAMissingFileAreRefused) {
  const std::string target = file("token", "s3cret", 0600);
  const std::string link = dir_.path() + "/link";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_FALSE(load(link).is_ok()) << "a symbolic link (O_NOFOLLOW)";
  EXPECT_FALSE(load(dir_.path()).is_ok()) << "a directory";
  auto missing = load(dir_.path() + "/none");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().err(), ENOENT);
}

TEST_F(JobTokenTest, AFileOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the file to another user";
  const std::string p = file("token", "s3cret", 0600);
  ASSERT_EQ(::chown(p.c_str(), 65534, 65534), 0);
  auto t = load(p);
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().err(), EPERM);
  EXPECT_NE(t.status().message().find("not owned by the daemon's user"), std::string::npos) << t.status().message();
}

}  // namespace
}  // namespace dlfs::fs
