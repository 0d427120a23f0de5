// The control socket: a real ControlServer and the real client, with a fake
// daemon behind them.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/control_protocol.h"
#include "common/unique_fd.h"
#include "fs/daemon/control_server.h"
#include "temp_dir.h"

namespace dlfs::fs {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class FakeDaemon : public ControlHandler {
 public:
  json status() override {
    ++status_calls;
    if (throw_in_status) throw std::runtime_error("status exploded");
    json j = {{"pid", 42}, {"datasets", json::array()}};
    if (!backend.empty()) j["backend"] = backend;
    return j;
  }
  json stats() override { return {{"pid", 42}, {"memory", {{"rss_bytes", 1}}}}; }
  Result<json> verify(const std::string& dataset, const ProgressFn& progress) override {
    ++verify_calls;
    {
      std::lock_guard<std::mutex> lock(mu);
      last_dataset = dataset;
    }
    if (dataset == "nope") return Status(ENOENT, "no dataset named 'nope'");
    for (int i = 1; i <= 3; ++i) progress({{"extents_done", i}, {"extents_total", 3}});
    std::this_thread::sleep_for(verify_delay);
    return json{{"ok", true}};
  }
  Result<json> plan(const json& args) override {
    if (args.value("dataset", std::string()) == "nope") return Status(ENOENT, "no dataset named 'nope'");
    return json{{"seed", 7}, {"epoch", args.value("epoch", 0)}};
  }
  Result<json> shuffle_report(const json& args, const ProgressFn& progress) override {
    progress({{"epochs_done", 1}, {"epochs_total", 2}});
    return json{{"epochs", args.value("epochs", 10)}};
  }
  Status unmount() override {
    ++unmount_calls;
    return fail_unmount ? Status(EBUSY, "datasets still open") : Status::ok();
  }
  std::atomic<int> status_calls{0}, unmount_calls{0}, verify_calls{0};
  std::chrono::milliseconds verify_delay{0};
  bool throw_in_status = false, fail_unmount = false;
  std::string backend;  // shown in status when set (a path: any bytes)
  std::mutex mu;
  std::string last_dataset;
};

class ControlTest : public ::dlfs::test::TempDirTest {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    path_ = dir_ + "/sub/ctl.sock";
  }
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

// A path in an answer need not be UTF-8 (a backend directory named with other
// bytes): the answer still goes out, those bytes as U+FFFD (it was an
// "internal error" from json::dump; found by scenario 18).
TEST_F(ControlTest, AnswersWithStringsThatAreNotUtf8StillGoOut) {
  daemon_.backend = "/data/caf\xe9/\xff";
  auto server = start();
  auto st = call({{"cmd", "status"}});
  ASSERT_TRUE(st.is_ok()) << st.status().message();
  EXPECT_EQ((*st)["backend"], "/data/caf\xef\xbf\xbd/\xef\xbf\xbd");
  EXPECT_EQ(json_text(json{{"a", "\xff"}}, 2), "{\n  \"a\": \"\xef\xbf\xbd\"\n}");
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

TEST_F(ControlTest, PlanAndShuffleReportPassTheirArguments) {
  auto server = start();
  auto p = call({{"cmd", "plan"}, {"epoch", 3}});
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_EQ((*p)["epoch"], 3);
  auto missing = call({{"cmd", "plan"}, {"dataset", "nope"}});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().err(), ENOENT);
  int progress = 0;
  auto r = call({{"cmd", "shuffle-report"}, {"epochs", 4}}, [&](const json&) { ++progress; });
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)["epochs"], 4);
  EXPECT_EQ(progress, 1);
}

TEST_F(ControlTest, BadRequestsGetErrorsAndTheServerKeepsServing) {
  auto server = start();
  auto unknown = call({{"cmd", "reboot"}});
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("unknown command 'reboot'"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("status, stats, verify, plan, shuffle-report, unmount"), std::string::npos);
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

TEST(ControlPath, DefaultClientSocketFitsASocketAddress) {
  if (::geteuid() != 0) GTEST_SKIP() << "root paths";
  EXPECT_EQ(default_client_socket("/mnt/dlfs"), "/run/dlfs-client/mnt-dlfs.sock");
  // A deep mountpoint would pass sun_path's 108 bytes: a hash of it instead.
  const std::string deep = "/tmp/dlfs-it-29_pipeline_bench_smoke-MU078W/bench/mnt-local-small-files";
  const std::string a = default_client_socket(deep), b = default_client_socket(deep + "2");
  EXPECT_LT(a.size(), sizeof(sockaddr_un{}.sun_path)) << a;
  EXPECT_EQ(a.rfind("/run/dlfs-client/m-", 0), 0u) << a;
  EXPECT_NE(a, b);
  EXPECT_EQ(a, default_client_socket(deep + "/"));  // the same mountpoint, the same socket
}

// ---- more protocol edge cases ----

TEST_F(ControlTest, VerifyPassesTheDatasetNameAndProgressPrecedesTheResult) {
  auto server = start();
  std::vector<int> seen;
  auto r = call({{"cmd", "verify"}, {"dataset", "imagenet"}},
                [&](const json& p) { seen.push_back(p["extents_done"].get<int>()); });
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3}));
  {
    std::lock_guard<std::mutex> lock(daemon_.mu);
    EXPECT_EQ(daemon_.last_dataset, "imagenet");
  }
  // A non-string dataset means "all".
  ASSERT_TRUE(call({{"cmd", "verify"}, {"dataset", 7}}).is_ok());
  std::lock_guard<std::mutex> lock(daemon_.mu);
  EXPECT_EQ(daemon_.last_dataset, "");
}

TEST_F(ControlTest, HandlerErrorsKeepTheirErrno) {
  auto server = start();
  daemon_.fail_unmount = true;
  auto r = call({{"cmd", "unmount"}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().err(), EBUSY);
  EXPECT_NE(r.status().message().find("datasets still open"), std::string::npos);
  EXPECT_EQ(daemon_.unmount_calls, 1);
}

TEST_F(ControlTest, AThrowingHandlerIsAnInternalErrorNotACrash) {
  auto server = start();
  daemon_.throw_in_status = true;
  auto r = call({{"cmd", "status"}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().err(), EIO);
  EXPECT_NE(r.status().message().find("status exploded"), std::string::npos) << r.status().message();
  daemon_.throw_in_status = false;
  EXPECT_TRUE(call({{"cmd", "status"}}).is_ok());
}

TEST_F(ControlTest, RequestsThatAreNotObjectsWithACmdStringAreRejected) {
  auto server = start();
  for (const char* bad : {"{}\n", "{\"cmd\": 5}\n", "\"status\"\n", "{\"cmd\": null}\n"}) {
    std::string reply = raw(bad);
    EXPECT_NE(reply.find("bad request"), std::string::npos) << bad << " -> " << reply;
    EXPECT_NE(reply.find("\"errno\":" + std::to_string(EINVAL)), std::string::npos) << reply;
  }
  EXPECT_EQ(daemon_.status_calls, 0);
  EXPECT_TRUE(call({{"cmd", "status"}}).is_ok());
}

TEST_F(ControlTest, ARequestWithoutNewlineThenEofIsAnErrorAndTheServerSurvives) {
  auto server = start();
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, path_.c_str());
  ASSERT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  std::string req = R"({"cmd":"status"})";
  ASSERT_EQ(::send(fd.get(), req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  ASSERT_EQ(::shutdown(fd.get(), SHUT_WR), 0);
  std::string pending, line;
  ASSERT_TRUE(read_line(fd.get(), pending, line, 5s).is_ok());
  EXPECT_NE(line.find("bad request"), std::string::npos) << line;
  EXPECT_EQ(daemon_.status_calls, 0) << "a request without its newline is not executed";
  EXPECT_TRUE(call({{"cmd", "status"}}).is_ok());
}

// A request line of exactly kMaxControlLine bytes is accepted; one a little
// longer is refused even when it is valid JSON ending in a newline, and the
// handler never runs.
TEST_F(ControlTest, RequestLineLimitIsExactEvenWithANewline) {
  auto server = start();
  auto request_of_length = [](size_t total) {
    std::string head = R"({"cmd":"status","pad":")", tail = R"("})";
    return head + std::string(total - head.size() - tail.size(), 'p') + tail;
  };
  std::string at_limit = request_of_length(kMaxControlLine);
  ASSERT_EQ(at_limit.size(), kMaxControlLine);
  EXPECT_NE(raw(at_limit + "\n").find("\"ok\":true"), std::string::npos);
  EXPECT_EQ(daemon_.status_calls, 1);

  std::string over = request_of_length(kMaxControlLine + 100);
  std::string reply = raw(over + "\n");
  EXPECT_NE(reply.find("\"ok\":false"), std::string::npos) << reply.substr(0, 200);
  EXPECT_EQ(daemon_.status_calls, 1) << "an over-long request line was executed";
  EXPECT_TRUE(call({{"cmd", "status"}}).is_ok());
}

TEST_F(ControlTest, AClientThatLeavesDuringVerifyDoesNotHurtTheServer) {
  auto server = start();
  daemon_.verify_delay = 300ms;
  {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path_.c_str());
    ASSERT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_TRUE(write_line(fd.get(), R"({"cmd":"verify"})").is_ok());
    std::this_thread::sleep_for(50ms);
  }  // closed while the verify runs: progress and result writes hit a dead socket
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(daemon_.verify_calls, 1);
  auto st = call({{"cmd", "status"}});
  EXPECT_TRUE(st.is_ok()) << st.status().message();
}

TEST_F(ControlTest, ConnectionsBeyondTheLimitGetEbusyAndServiceResumes) {
  auto server = start();
  daemon_.verify_delay = 1000ms;
  std::vector<std::thread> slow;
  std::atomic<int> ok{0};
  for (int i = 0; i < ControlServer::kMaxConnections; ++i)
    slow.emplace_back([&] { ok += call({{"cmd", "verify"}}).is_ok() ? 1 : 0; });
  for (int i = 0; i < 100 && daemon_.verify_calls < ControlServer::kMaxConnections; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(daemon_.verify_calls, ControlServer::kMaxConnections);
  auto busy = call({{"cmd", "status"}});
  ASSERT_FALSE(busy.is_ok());
  EXPECT_EQ(busy.status().err(), EBUSY);
  EXPECT_NE(busy.status().message().find("too many"), std::string::npos);
  EXPECT_EQ(daemon_.status_calls, 0);
  for (auto& t : slow) t.join();
  EXPECT_EQ(ok, ControlServer::kMaxConnections);
  EXPECT_TRUE(call({{"cmd", "status"}}).is_ok());
}

TEST_F(ControlTest, StartRefusesAPathThatIsNotASocketAndLeavesItAlone) {
  std::filesystem::create_directories(dir_ + "/sub");
  ::chmod((dir_ + "/sub").c_str(), 0700);
  { std::ofstream(path_) << "precious"; }
  auto s = ControlServer::start(path_, daemon_);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("not a socket"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find(path_), std::string::npos);
  std::ifstream in(path_);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "precious");
}

TEST_F(ControlTest, StartRefusesADirectoryOthersCanWriteUnlessSticky) {
  std::filesystem::create_directories(dir_ + "/sub");
  ASSERT_EQ(::chmod((dir_ + "/sub").c_str(), 0777), 0);
  auto s = ControlServer::start(path_, daemon_);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().err(), EPERM);
  EXPECT_NE(s.status().message().find("writable by other users"), std::string::npos) << s.status().message();
  ASSERT_EQ(::chmod((dir_ + "/sub").c_str(), 01777), 0);  // like /tmp
  auto sticky = ControlServer::start(path_, daemon_);
  ASSERT_TRUE(sticky.is_ok()) << sticky.status().message();
  EXPECT_TRUE(call({{"cmd", "status"}}).is_ok());
}

TEST_F(ControlTest, ClientReportsAMissingServerAndALongPath) {
  auto too_long = control_call("/tmp/" + std::string(200, 'x') + ".sock", {{"cmd", "status"}}, nullptr, 1s);
  ASSERT_FALSE(too_long.is_ok());
  EXPECT_EQ(too_long.status().err(), ENAMETOOLONG);
  FakeDaemon d;
  auto server = ControlServer::start(dir_ + "/" + std::string(120, 'y') + ".sock", d);
  ASSERT_FALSE(server.is_ok());
  EXPECT_EQ(server.status().err(), ENAMETOOLONG);
}

// A one-shot fake daemon that answers any request with `reply` (raw bytes).
class RawServer {
 public:
  RawServer(const std::string& path, std::string reply) {
    fd_.reset(::socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path.c_str());
    EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_.get(), 4), 0);
    thread_ = std::thread([this, reply = std::move(reply)] {
      UniqueFd c(::accept(fd_.get(), nullptr, nullptr));
      if (!c.valid()) return;
      std::string pending, line;
      (void)read_line(c.get(), pending, line, 5s);
      (void)::send(c.get(), reply.data(), reply.size(), MSG_NOSIGNAL);
    });
  }
  ~RawServer() { thread_.join(); }

 private:
  UniqueFd fd_;
  std::thread thread_;
};

TEST_F(ControlTest, ClientRejectsAMalformedReply) {
  std::filesystem::create_directories(dir_ + "/sub");
  RawServer fake(path_, "this is not json\n");
  auto r = call({{"cmd", "status"}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().err(), EPROTO);
  EXPECT_NE(r.status().message().find("this is not json"), std::string::npos);
}

TEST_F(ControlTest, ClientReportsADaemonThatHangsUpWithoutAnswer) {
  std::filesystem::create_directories(dir_ + "/sub");
  RawServer fake(path_, "{\"progress\":{}}\n");  // then closes
  int progress = 0;
  auto r = call({{"cmd", "verify"}}, [&](const json&) { ++progress; });
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(progress, 1);
  EXPECT_EQ(r.status().err(), ECONNRESET);
}

// Replies whose fields have the wrong JSON types (another version of dlfsd, or
// something else listening on the path) must come back as an error Status;
// nlohmann's value() throws type_error on them.
TEST_F(ControlTest, ClientDoesNotThrowOnWronglyTypedReplyFields) {
  std::filesystem::create_directories(dir_ + "/sub");
  for (const char* reply : {"{\"ok\":\"yes\"}\n", "{\"ok\":false,\"errno\":\"EIO\",\"error\":\"x\"}\n",
                            "{\"ok\":false,\"errno\":5,\"error\":17}\n"}) {
    std::filesystem::remove(path_);
    RawServer fake(path_, reply);
    Result<json> r = Status(0, "");
    EXPECT_NO_THROW(r = call({{"cmd", "status"}})) << reply;
    EXPECT_FALSE(r.is_ok()) << reply;
  }
}

TEST_F(ControlTest, ClientTimesOutOnASlowDaemon) {
  auto server = start();
  daemon_.verify_delay = 1500ms;
  auto t0 = std::chrono::steady_clock::now();
  auto r = control_call(path_, {{"cmd", "verify"}}, nullptr, 300ms);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().err(), ETIMEDOUT);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1200ms);
}

// Runs `fn` in a child process as uid/gid 65534 and returns what it wrote.
std::string run_as_nobody(const std::function<std::string()>& fn) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return "pipe failed";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipefd[0]);
    std::string msg = (::setgroups(0, nullptr) == 0 && ::setgid(65534) == 0 && ::setuid(65534) == 0)
                          ? fn() : std::string("setuid failed");
    (void)!::write(pipefd[1], msg.data(), msg.size());
    ::_exit(0);
  }
  ::close(pipefd[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return out;
}

// Here every directory on the way is searchable by others, so it is the
// socket's own mode (0600) that refuses the connection.
TEST_F(ControlTest, TheSocketModeAloneRefusesOtherUsers) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to another uid";
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  std::filesystem::create_directories(dir_ + "/open");
  ASSERT_EQ(::chmod((dir_ + "/open").c_str(), 0755), 0);
  path_ = dir_ + "/open/ctl.sock";
  auto server = start();
  ASSERT_TRUE(server);
  std::string path = path_;
  std::string msg = run_as_nobody([&] {
    auto r = control_call(path, {{"cmd", "status"}}, nullptr, 2s);
    return r.is_ok() ? std::string("ACCEPTED") : std::to_string(r.status().err()) + " " + r.status().message();
  });
  EXPECT_EQ(msg.rfind(std::to_string(EACCES) + " ", 0), 0u) << msg;
  EXPECT_NE(msg.find("ermission denied"), std::string::npos) << msg;
  EXPECT_EQ(daemon_.status_calls, 0);
}

// Even if the socket's mode is loosened, the SO_PEERCRED check refuses.
TEST_F(ControlTest, PeerCredentialsAreCheckedEvenIfTheSocketIsOpened) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to another uid";
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  std::filesystem::create_directories(dir_ + "/open");
  ASSERT_EQ(::chmod((dir_ + "/open").c_str(), 0755), 0);
  path_ = dir_ + "/open/ctl.sock";
  auto server = start();
  ASSERT_TRUE(server);
  ASSERT_EQ(::chmod(path_.c_str(), 0666), 0);
  std::string path = path_;
  std::string msg = run_as_nobody([&] {
    auto r = control_call(path, {{"cmd", "unmount"}}, nullptr, 2s);
    return r.is_ok() ? std::string("ACCEPTED") : std::to_string(r.status().err()) + " " + r.status().message();
  });
  EXPECT_EQ(msg.rfind(std::to_string(EACCES) + " ", 0), 0u) << msg;
  EXPECT_NE(msg.find("permission denied: uid 65534"), std::string::npos) << msg;
  EXPECT_EQ(daemon_.unmount_calls, 0);
}

TEST(ControlPath, RelativeMountpointsAreMadeAbsolute) {
  if (::geteuid() != 0) GTEST_SKIP() << "root paths";
  std::string cwd = std::filesystem::current_path().string();
  std::string expected = default_control_socket(cwd + "/mnt");
  EXPECT_EQ(default_control_socket("mnt"), expected);
  EXPECT_EQ(default_control_socket("./mnt/"), expected);
  EXPECT_EQ(default_control_socket("//mnt//dlfs"), "/run/dlfs/mnt-dlfs.sock");
}

// Two different mountpoints must not share a control socket: a second daemon
// would find the first one's socket "in use" and refuse to start.
TEST(ControlPath, DistinctMountpointsGetDistinctSockets) {
  EXPECT_NE(default_control_socket("/mnt/a-b"), default_control_socket("/mnt/a/b"));
  EXPECT_NE(default_control_socket("/data/x-y/z"), default_control_socket("/data/x/y-z"));
}

TEST(ControlPath, NonRootUsersUseXdgRuntimeDirOrTmp) {
  if (::geteuid() != 0) {
    EXPECT_NE(default_control_dir(), "/run/dlfs");
    return;
  }
  std::string got = run_as_nobody([] {
    ::setenv("XDG_RUNTIME_DIR", "/run/user/65534", 1);
    std::string a = default_control_socket("/mnt/dlfs");
    ::unsetenv("XDG_RUNTIME_DIR");
    return a + "|" + default_control_socket("/mnt/dlfs");
  });
  EXPECT_EQ(got, "/run/user/65534/dlfs/mnt-dlfs.sock|/tmp/dlfs-65534/mnt-dlfs.sock");
}

}  // namespace
}  // namespace dlfs::fs
