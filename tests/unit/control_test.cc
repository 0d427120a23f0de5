// The control socket: a real ControlServer and the real client, with a fake
// daemon behind them.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "common/control_protocol.h"
#include "common/unique_fd.h"
#include "fs/control_server.h"

namespace dlfs::fs {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class FakeDaemon : public ControlHandler {
 public:
  json status() override { ++status_calls; return {{"pid", 42}, {"datasets", json::array()}}; }
  json stats() override { return {{"pid", 42}, {"memory", {{"rss_bytes", 1}}}}; }
  Result<json> verify(const std::string& dataset, const ProgressFn& progress) override {
    if (dataset == "nope") return Status(ENOENT, "no dataset named 'nope'");
    for (int i = 1; i <= 3; ++i) progress({{"extents_done", i}, {"extents_total", 3}});
    std::this_thread::sleep_for(verify_delay);
    return json{{"ok", true}};
  }
  Status unmount() override { ++unmount_calls; return Status::ok(); }
  std::atomic<int> status_calls{0}, unmount_calls{0};
  std::chrono::milliseconds verify_delay{0};
};

class ControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dlfs-control-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/sub/ctl.sock";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::unique_ptr<ControlServer> start() {
    auto s = ControlServer::start(path_, daemon_);
    EXPECT_TRUE(s.is_ok()) << s.status().message();
    return s.is_ok() ? std::move(s).value() : nullptr;
  }
  Result<json> call(const json& req, std::function<void(const json&)> progress = nullptr) {
    return control_call(path_, req, progress, 5s);
  }
  // Sends raw bytes and returns the reply line.
  std::string raw(const std::string& bytes) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path_.c_str());
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::send(fd.get(), bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    std::string pending, line;
    (void)read_line(fd.get(), pending, line, 5s);
    return line;
  }
  std::string dir_, path_;
  FakeDaemon daemon_;
};

TEST_F(ControlTest, StatusStatsUnmountRoundTrip) {
  auto server = start();
  auto st = call({{"cmd", "status"}});
  ASSERT_TRUE(st.is_ok()) << st.status().message();
  EXPECT_EQ((*st)["pid"], 42);
  EXPECT_EQ(daemon_.status_calls, 1);
  EXPECT_TRUE(call({{"cmd", "stats"}})->contains("memory"));
  EXPECT_TRUE(call({{"cmd", "unmount"}}).is_ok());
  EXPECT_EQ(daemon_.unmount_calls, 1);
}

TEST_F(ControlTest, VerifyStreamsProgressBeforeTheResult) {
  auto server = start();
  int progress = 0;
  auto r = call({{"cmd", "verify"}}, [&](const json& p) { EXPECT_EQ(p["extents_done"], ++progress); });
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(progress, 3);
  EXPECT_TRUE((*r)["ok"]);
  auto missing = call({{"cmd", "verify"}, {"dataset", "nope"}});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().err(), ENOENT);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
}

TEST_F(ControlTest, BadRequestsGetErrorsAndTheServerKeepsServing) {
  auto server = start();
  auto unknown = call({{"cmd", "reboot"}});
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("unknown command 'reboot'"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("status, stats, verify, unmount"), std::string::npos);
  EXPECT_NE(raw("this is not json\n").find("bad request"), std::string::npos);
  EXPECT_NE(raw("[1,2,3]\n").find("bad request"), std::string::npos);
  EXPECT_NE(raw(std::string(kMaxControlLine + 10, 'x')).find("\"ok\":false"), std::string::npos);
  EXPECT_TRUE(call({{"cmd", "status"}}).is_ok()) << "still serving after bad requests";
}

TEST_F(ControlTest, StatusAnswersDuringASlowVerify) {
  auto server = start();
  daemon_.verify_delay = 1500ms;
  std::thread slow([&] { EXPECT_TRUE(call({{"cmd", "verify"}}).is_ok()); });
  std::this_thread::sleep_for(200ms);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(call({{"cmd", "status"}}).is_ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1000ms);
  slow.join();
}

TEST_F(ControlTest, SocketAndDirectoryModesAndCleanup) {
  {
    auto server = start();
    struct stat st {};
    ASSERT_EQ(::stat(path_.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    ASSERT_EQ(::stat((dir_ + "/sub").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
  }
  EXPECT_FALSE(std::filesystem::exists(path_)) << "socket removed when the server stops";
}

TEST_F(ControlTest, StaleSocketIsReplacedLiveOneIsNot) {
  {
    // A socket file whose listener is gone.
    std::filesystem::create_directories(dir_ + "/sub");
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path_.c_str());
    ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  }
  ASSERT_TRUE(std::filesystem::exists(path_));
  auto server = start();
  ASSERT_TRUE(server);
  EXPECT_TRUE(call({{"cmd", "status"}}).is_ok());
  FakeDaemon other;
  auto second = ControlServer::start(path_, other);
  ASSERT_FALSE(second.is_ok());
  EXPECT_NE(second.status().message().find("in use"), std::string::npos) << second.status().message();
  EXPECT_TRUE(call({{"cmd", "status"}}).is_ok()) << "the live server keeps its socket";
}

TEST_F(ControlTest, NoDaemonIsAClearError) {
  auto r = call({{"cmd", "status"}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find(path_), std::string::npos);
  EXPECT_NE(r.status().message().find("is dlfsd running"), std::string::npos);
}

TEST_F(ControlTest, OtherUsersAreRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to another uid";
  auto server = start();
  ::chmod(dir_.c_str(), 0755);
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipefd[0]);
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    auto r = control_call(path_, {{"cmd", "status"}}, nullptr, 2s);
    std::string msg = r.is_ok() ? "ACCEPTED" : r.status().message();
    (void)!::write(pipefd[1], msg.data(), msg.size());
    ::_exit(0);
  }
  ::close(pipefd[1]);
  char buf[512] = {};
  ssize_t n = ::read(pipefd[0], buf, sizeof buf - 1);
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_GT(n, 0);
  std::string msg(buf, static_cast<size_t>(n));
  EXPECT_NE(msg, "ACCEPTED");
  EXPECT_NE(msg.find("ermission denied"), std::string::npos) << msg;
}

TEST(ControlPath, DefaultSocketFollowsTheMountpoint) {
  if (::geteuid() != 0) GTEST_SKIP() << "root paths";
  EXPECT_EQ(default_control_socket("/mnt/dlfs"), "/run/dlfs/mnt-dlfs.sock");
  EXPECT_EQ(default_control_socket("/mnt/dlfs/"), "/run/dlfs/mnt-dlfs.sock");
  EXPECT_EQ(default_control_socket("/mnt/./x/../dlfs"), "/run/dlfs/mnt-dlfs.sock");
  EXPECT_EQ(default_control_socket("/"), "/run/dlfs/root.sock");
}

}  // namespace
}  // namespace dlfs::fs
