// Fuzz target: the daemon's control socket (fs/daemon/control_server.cc over
// common/control_protocol.cc; `tools/fuzz.sh control`). The input is what a
// client sends: it goes to a real ControlServer over a real Unix socket, with
// a fake daemon behind it, and the whole answer is read back.
//
// Invariants: every connection gets an answer within the deadline; every
// answer line is a JSON object, progress lines first and one final line
// last; the final line is {"ok": true, "result": ...} or {"ok": false,
// "error": "<not empty>", "errno": N > 0}; and it is the answer the request
// asks for (computed here from the first input line by the protocol's rules,
// common/control_protocol.h): a malformed request is EINVAL, an unknown
// command is named, "verify" gets the dataset it asked for, "plan" its args.
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/control_protocol.h"
#include "fs/daemon/control_server.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using nlohmann::json;
using dlfs::fs::ControlHandler;
using dlfs::fs::ControlServer;
using dlfs::fs::ProgressFn;

[[noreturn]] void fail(const std::string& what) { dlfs::fuzz::fail("control_fuzz", what); }

// Answers as a daemon would, in a way the checks can predict.
class FakeDaemon final : public ControlHandler {
 public:
  json status() override { return {{"pid", 1}, {"datasets", json::array()}}; }
  json stats() override { return {{"memory", {{"rss_bytes", 1}}}}; }
  dlfs::Result<json> verify(const std::string& dataset, const ProgressFn& progress) override {
    progress({{"extents_done", 1}, {"extents_total", 2}});
    progress({{"extents_done", 2}, {"extents_total", 2}});
    return json{{"dataset", dataset}, {"ok", true}};
  }
  dlfs::Result<json> plan(const json& args) override { return json{{"args", args}}; }
  dlfs::Result<json> shuffle_report(const json& args, const ProgressFn& progress) override {
    progress({{"epochs_done", 1}});
    return json{{"args", args}};
  }
  dlfs::Status unmount() override { return dlfs::Status(EBUSY, "fuzz: not unmounting"); }
};

// The server, started once: a socket in a private temporary directory.
struct Server {
  std::string dir, path;
  FakeDaemon daemon;
  std::unique_ptr<ControlServer> server;
  Server() {
    char tmpl[] = "/tmp/dlfs-fuzz-ctl-XXXXXX";
    if (!::mkdtemp(tmpl)) fail("mkdtemp failed");
    dir = tmpl;
    path = dir + "/ctl.sock";
    auto s = ControlServer::start(path, daemon);
    if (!s) fail("cannot start the control server: " + s.status().message());
    server = std::move(s).value();
  }
  ~Server() {
    server.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

Server& server() {
  static Server s;
  return s;
}

// Sends `request` on a new connection, half-closes, returns all the server wrote.
std::string exchange(const std::string& request) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket failed");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, server().path.c_str(), sizeof addr.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("connect failed");
  // The server may answer and close before reading everything: a failed send is fine.
  for (size_t done = 0; done < request.size();) {
    ssize_t n = ::send(fd, request.data() + done, request.size() - done, MSG_NOSIGNAL);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string reply;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    if (std::chrono::steady_clock::now() > deadline) fail("no end of the answer within 20 s");
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) continue;
    char buf[65536];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return reply;
}

std::vector<json> answer_lines(const std::string& reply) {
  if (reply.empty() || reply.back() != '\n') fail("answer does not end with a newline: " + reply.substr(0, 200));
  std::vector<json> lines;
  for (size_t at = 0; at < reply.size();) {
    size_t nl = reply.find('\n', at);
    json j = json::parse(reply.substr(at, nl - at), nullptr, false);
    if (j.is_discarded() || !j.is_object()) fail("answer line is not a JSON object: " + reply.substr(at, 200));
    lines.push_back(std::move(j));
    at = nl + 1;
  }
  for (size_t i = 0; i + 1 < lines.size(); ++i)
    if (!lines[i].contains("progress")) fail("a line before the last is not progress: " + lines[i].dump());
  const json& last = lines.back();
  if (!last.contains("ok") || !last["ok"].is_boolean()) fail("final line without a boolean ok: " + last.dump());
  if (last["ok"].get<bool>()) {
    if (!last.contains("result")) fail("ok without a result");
  } else {
    if (!last.contains("error") || !last["error"].is_string() || last["error"].get<std::string>().empty())
      fail("failure without an error message: " + last.dump());
    if (!last.contains("errno") || !last["errno"].is_number_integer() || last["errno"].get<int>() <= 0)
      fail("failure without a positive errno: " + last.dump());
  }
  return lines;
}

// A field of the final line's result; null when there is none.
json result_field(const json& last, const char* key) {
  const json& r = last["result"];
  return r.is_object() && r.contains(key) ? r[key] : json();
}

void expect_error(const json& last, int err, const std::string& what) {
  if (last["ok"].get<bool>() || last["errno"].get<int>() != err)
    fail("expected errno " + std::to_string(err) + " (" + what + "), got " + last.dump());
}

// What the server must have answered to `input` (rules of control_protocol.h).
void check_answer(const std::string& input, const std::vector<json>& lines) {
  const json& last = lines.back();
  const size_t nl = input.find('\n');
  if (nl == std::string::npos) {  // the client hung up before a whole request
    if (last["ok"].get<bool>()) fail("a request without a newline was answered ok");
    return;
  }
  const json req = json::parse(input.substr(0, nl), nullptr, false);
  if (req.is_discarded() || !req.is_object() || !req.contains("cmd") || !req["cmd"].is_string())
    return expect_error(last, EINVAL, "malformed request");
  const std::string cmd = req["cmd"];
  const size_t progress = lines.size() - 1;
  if (cmd == "status" || cmd == "stats") {
    if (!last["ok"].get<bool>() || progress != 0) fail(cmd + " not answered ok without progress: " + last.dump());
  } else if (cmd == "verify") {
    const std::string ds = req.contains("dataset") && req["dataset"].is_string() ? req["dataset"].get<std::string>() : "";
    if (!last["ok"].get<bool>() || progress != 2 || result_field(last, "dataset") != ds)
      fail("verify answered for the wrong dataset or without progress: " + last.dump());
  } else if (cmd == "plan" || cmd == "shuffle-report") {
    if (!last["ok"].get<bool>() || result_field(last, "args") != req) fail(cmd + " did not get its arguments: " + last.dump());
  } else if (cmd == "unmount") {
    expect_error(last, EBUSY, "the fake daemon refuses to unmount");
  } else {
    expect_error(last, EINVAL, "unknown command");
    if (last["error"].get<std::string>().find("unknown command") == std::string::npos)
      fail("an unknown command is not called one: " + last.dump());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  check_answer(input, answer_lines(exchange(input)));
  return 0;
}

std::vector<dlfs::fuzz::Seed> dlfs::fuzz::seeds() {
  auto line = [](const json& j) { return j.dump() + "\n"; };
  return {
      {"status", line({{"cmd", "status"}})},
      {"stats", line({{"cmd", "stats"}})},
      {"verify_all", line({{"cmd", "verify"}})},
      {"verify_one", line({{"cmd", "verify"}, {"dataset", "imagenet"}})},
      {"verify_wrong_type", line({{"cmd", "verify"}, {"dataset", 7}})},
      {"plan", line({{"cmd", "plan"}, {"dataset", "d"}, {"epoch", 3}, {"world_size", 4}, {"rank", 1}, {"show", 5}})},
      {"shuffle_report", line({{"cmd", "shuffle-report"}, {"epochs", 10}})},
      {"unmount", line({{"cmd", "unmount"}})},
      {"unknown", line({{"cmd", "reboot"}})},
      {"cmd_not_string", line({{"cmd", json::array({"status"})}})},
      {"not_an_object", line(json::array({1, 2}))},
      {"two_lines", line({{"cmd", "status"}}) + line({{"cmd", "unmount"}})},
      {"no_newline", json({{"cmd", "status"}}).dump()},
      {"escapes", "{\"cmd\": \"st\\u0061tus\", \"x\": \"\\ud83d\\ude00\"}\n"},
  };
}
