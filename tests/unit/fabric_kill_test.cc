// The fault, for real: peers in other processes (this binary re-executed,
// with its own UCX) that are SIGKILLed or SIGSTOPped while gets are in
// flight. A killed asker must not take down the node serving it (over TCP,
// UCX 1.13's own emulated get aborts the server then: run this suite with
// DLFS_KILL_TEST_GETS=rma UCX_TLS=tcp to see it), and a stalled server must
// not write a caller's buffer after the caller's deadline.
#include "transport/fabric.h"

#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace dlfs::transport {
namespace {

using namespace std::chrono_literals;

constexpr size_t kStripe = 4 << 20;

// The same bytes in both processes, cheap to make (each child makes them again).
std::vector<std::byte> stripe_bytes() {
  std::vector<std::byte> v(kStripe);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::byte>((i * 2654435761u) >> 13 ^ i >> 9);
  return v;
}

// SIGSTOP and wait until the process is stopped: kill() only queues the
// signal, and on a busy machine the server could still answer a get or two.
void stop_process(pid_t pid) {
  ::kill(pid, SIGSTOP);
  const std::string stat_path = "/proc/" + std::to_string(pid) + "/stat";
  for (int i = 0; i < 500; ++i) {
    std::ifstream in(stat_path);
    std::string line;
    std::getline(in, line);
    const auto paren = line.rfind(')');  // the state follows the command name
    if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'T') return;
    std::this_thread::sleep_for(2ms);
  }
}

std::string hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) out += {d[c >> 4], d[c & 15]};
  return out;
}

std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

GetMode mode_named(const char* name) {
  const std::string n = name ? name : "";
  return n == "rma" ? GetMode::rma : n == "am" ? GetMode::am : GetMode::automatic;
}

// ---- the child's side: runs before main when DLFS_FABRIC_CHILD says so -------

// Asker: gets 1 MiB pieces of the parent's stripe, 16 in flight, until
// killed; says "x" on the pipe once the first one came back right.
[[noreturn]] void run_asker(int fd) {
  auto f = Fabric::create({.listen_host = "", .port = 0, .listen = false,
                           .gets = mode_named(std::getenv("DLFS_KILL_TEST_GETS"))},
                          [](Message&) {});
  if (!f) _exit(2);
  auto ep = (*f)->connect_worker(unhex(std::getenv("DLFS_CHILD_ADDRESS")), "parent", nullptr);
  if (!ep) _exit(3);
  auto key = (*ep)->unpack(unhex(std::getenv("DLFS_CHILD_RKEY")));
  if (!key) _exit(4);
  const uint64_t base = std::stoull(std::getenv("DLFS_CHILD_BASE"));
  const std::vector<std::byte> want = stripe_bytes();
  // Into the caller's buffers, as dlfsd's reads do (start_get_into).
  std::vector<std::vector<std::byte>> got(16, std::vector<std::byte>(1 << 20));
  const size_t piece = got[0].size();
  for (uint64_t round = 0;; ++round) {
    std::vector<Endpoint::PendingGet> gets;
    const size_t pieces = kStripe / piece;
    for (size_t i = 0; i < got.size(); ++i)
      gets.push_back((*ep)->start_get_into(**key, base + i % pieces * piece, got[i]));
    for (size_t i = 0; i < gets.size(); ++i) {
      if (!(*ep)->finish_get(gets[i], got[i], std::chrono::steady_clock::now() + 10s)) _exit(5);
      if (std::memcmp(got[i].data(), want.data() + i % pieces * piece, piece) != 0) _exit(6);
      if (round == 0 && i == 0 && ::write(fd, "x", 1) != 1) _exit(7);  // the rest are in flight
    }
  }
}

// Server: registers the stripe, writes "address rkey base" on the pipe and
// serves until killed.
[[noreturn]] void run_server(int fd) {
  auto f = Fabric::create({.listen_host = "127.0.0.1", .port = 0, .listen = true,
                           .gets = GetMode::automatic},
                          [](Message&) {});
  if (!f) _exit(2);
  std::vector<std::byte> stripe = stripe_bytes();
  auto reg = (*f)->register_memory(stripe.data(), stripe.size());
  if (!reg) _exit(3);
  const std::string line = hex((*f)->worker_address()) + " " + hex((*reg)->packed_rkey()) + " " +
                           std::to_string((*reg)->address()) + "\n";
  if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(4);
  for (;;) ::pause();
}

[[maybe_unused]] const bool child_ran = [] {
  const char* role = std::getenv("DLFS_FABRIC_CHILD");
  if (role == nullptr) return false;
  const int fd = std::atoi(std::getenv("DLFS_CHILD_FD"));
  if (std::string(role) == "asker") run_asker(fd);
  run_server(fd);
}();

// ---- the parent's side -------------------------------------------------------

struct Child {
  pid_t pid = -1;
  int fd = -1;  // the read end of the child's pipe
};

// Runs this binary again as `role`, with `env` added (NAME=value).
Child spawn(const std::string& role, std::vector<std::string> env) {
  int p[2];
  if (::pipe(p) != 0) return {};
  env.push_back("DLFS_FABRIC_CHILD=" + role);
  env.push_back("DLFS_CHILD_FD=" + std::to_string(p[1]));
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    for (auto& e : env) ::putenv(e.data());
    char* argv[] = {const_cast<char*>("unit_fabric"), nullptr};
    ::execv("/proc/self/exe", argv);
    _exit(127);
  }
  ::close(p[1]);
  return {pid, p[0]};
}

// Reads what the child says until `want` bytes or a newline, waiting at most `t`.
std::string read_from(const Child& c, std::chrono::milliseconds t, size_t want = 1 << 16) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + t;
  while (out.size() < want && (out.empty() || out.back() != '\n')) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd pfd{c.fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) break;
    char b[4096];
    const ssize_t n = ::read(c.fd, b, std::min(sizeof b, want - out.size()));
    if (n <= 0) break;
    out.append(b, n);
  }
  return out;
}

void kill_and_reap(Child& c) {
  ::kill(c.pid, SIGKILL);
  int status = 0;
  ::waitpid(c.pid, &status, 0);
  ::close(c.fd);
}

// 12 askers, each SIGKILLed at a random moment while its 1 MiB gets stream
// (half of them SIGSTOPped first); this process serves them all, and a new
// asker after each kill. (--gtest_repeat=N for more rounds.)
TEST(FabricKill, AnAskerKilledMidGetDoesNotTakeTheServerDown) {
  auto server = Fabric::create({.listen_host = "127.0.0.1", .port = 0}, [](Message&) {});
  ASSERT_TRUE(server) << server.status().message();
  std::vector<std::byte> stripe = stripe_bytes();
  auto reg = (*server)->register_memory(stripe.data(), stripe.size());
  ASSERT_TRUE(reg) << reg.status().message();
  const std::vector<std::string> env = {"DLFS_CHILD_ADDRESS=" + hex((*server)->worker_address()),
                                        "DLFS_CHILD_RKEY=" + hex((*reg)->packed_rkey()),
                                        "DLFS_CHILD_BASE=" + std::to_string((*reg)->address())};
  auto client = Fabric::create({.listen = false}, [](Message&) {});
  ASSERT_TRUE(client) << client.status().message();
  std::mt19937 rng(1);
  for (int round = 0; round < 12; ++round) {
    Child c = spawn("asker", env);
    ASSERT_GT(c.pid, 0);
    ASSERT_EQ(read_from(c, 20s, 1), "x") << "round " << round << ": the asker's first gets did not come back right";
    // A random moment in the stream (a fixed one could miss the window).
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 30000));
    if (round % 2 == 1) {
      // Stopped first: its socket fills up, replies queue in this process,
      // and the connection dies under them.
      ::kill(c.pid, SIGSTOP);
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 50000));
    }
    kill_and_reap(c);
    // A new asker is served, right.
    auto ep = (*client)->connect_worker((*server)->worker_address(), "server", nullptr);
    ASSERT_TRUE(ep) << ep.status().message();
    auto key = (*ep)->unpack((*reg)->packed_rkey());
    ASSERT_TRUE(key) << key.status().message();
    std::vector<std::byte> got(1 << 20);
    const size_t off = rng() % (kStripe - got.size());
    Status s = (*ep)->get(**key, (*reg)->address() + off, got, 10s);
    ASSERT_TRUE(s) << "round " << round << ": " << s.message();
    ASSERT_EQ(0, std::memcmp(got.data(), stripe.data() + off, got.size())) << "round " << round;
  }
}

// A server that stops answering (SIGSTOP): the get times out at its
// deadline, and when the server resumes, its late reply never lands in the
// caller's buffer. Gets by message (a one-sided get over shared memory
// needs no help from the stopped server).
TEST(FabricKill, AStalledServerNeverWritesTheCallersBufferLate) {
  Child c = spawn("server", {});
  ASSERT_GT(c.pid, 0);
  std::istringstream line(read_from(c, 20s));
  std::string address, rkey;
  uint64_t base = 0;
  line >> address >> rkey >> base;
  ASSERT_NE(base, 0u) << "the server child said nothing";
  auto client = Fabric::create({.listen_host = "", .port = 0, .listen = false, .gets = GetMode::am}, [](Message&) {});
  ASSERT_TRUE(client) << client.status().message();
  auto ep = (*client)->connect_worker(unhex(address), "server", nullptr);
  ASSERT_TRUE(ep) << ep.status().message();
  auto key = (*ep)->unpack(unhex(rkey));
  ASSERT_TRUE(key) << key.status().message();
  const std::vector<std::byte> want = stripe_bytes();
  std::vector<std::byte> got(1 << 20);
  ASSERT_TRUE((*ep)->get(**key, base, got, 10s));
  ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size()));
  stop_process(c.pid);
  auto untouched = [](const std::vector<std::byte>& v) {
    return std::all_of(v.begin(), v.end(), [](std::byte b) { return b == std::byte{0x5a}; });
  };
  // A get into a private buffer, one into the caller's buffer that misses
  // its deadline, and one into the caller's buffer that is dropped unfinished.
  std::vector<std::byte> late(1 << 20, std::byte{0x5a}), late_into(1 << 20, std::byte{0x5a}),
      dropped(1 << 20, std::byte{0x5a});
  const auto t0 = std::chrono::steady_clock::now();
  Status s = (*ep)->get(**key, base + 4096, late, 300ms);
  EXPECT_EQ(s.err(), ETIMEDOUT) << s.message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  Endpoint::PendingGet g = (*ep)->start_get_into(**key, base + 12288, late_into);
  s = (*ep)->finish_get(g, late_into, std::chrono::steady_clock::now() + 300ms);
  EXPECT_EQ(s.err(), ETIMEDOUT) << s.message();
  { Endpoint::PendingGet gone = (*ep)->start_get_into(**key, base + 16384, dropped); }
  ::kill(c.pid, SIGCONT);
  // Replies come back in order: once this get is answered, so were the late ones.
  ASSERT_TRUE((*ep)->get(**key, base + 8192, got, 10s));
  EXPECT_EQ(0, std::memcmp(got.data(), want.data() + 8192, got.size()));
  EXPECT_TRUE(untouched(late)) << "the caller's buffer was written after its deadline";
  EXPECT_TRUE(untouched(late_into)) << "start_get_into: the caller's buffer was written after its deadline";
  EXPECT_TRUE(untouched(dropped)) << "start_get_into: the buffer of a dropped get was written";
  kill_and_reap(c);
}

}  // namespace
}  // namespace dlfs::transport
