// dlfs-ctl: administer the local dlfsd over its control socket.
#include <glob.h>

#include <cstdio>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>

#include "common/control_protocol.h"
#include "tools/ctl/ctl_man.h"
#include "tools/ctl/exit_codes.h"
#include "tools/ctl/lmdb_cli.h"
#include "tools/ctl/render.h"
#include "tools/ctl/tfrecord_cli.h"
#include "tools/ctl/tar_cli.h"

namespace {

using dlfs::ctl::kFailed;
using dlfs::ctl::kOk;
using dlfs::ctl::kUsage;

constexpr const char* kDescription =
    "dlfs-ctl: administer the DLFS daemon (dlfsd) on this machine.\n\n"
    "Talks to dlfsd over its Unix control socket (mode 0600: root or the daemon's user).\n"
    "The socket is found from --socket, else from --mount (/run/dlfs/<mountpoint>.sock),\n"
    "else it is the only socket in /run/dlfs.\n"
    "Exit codes: 0 ok, 1 the command failed (e.g. verify found a mismatch), 2 usage or connection error.";

// Picks the socket: explicit, derived from the mountpoint, or the only one there is.
dlfs::Result<std::string> find_socket(const std::string& socket, const std::string& mount) {
  if (!socket.empty()) return socket;
  if (!mount.empty()) return dlfs::default_control_socket(mount);
  std::string dir = dlfs::default_control_dir();
  glob_t g{};
  std::vector<std::string> found;
  if (::glob((dir + "/*.sock").c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) found.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (found.empty())
    return dlfs::Status(ENOENT, "no dlfsd control socket found in " + dir + " (start dlfsd or pass --mount/--socket)");
  if (found.size() > 1) {
    std::string list;
    for (const auto& f : found) list += "\n  " + f;
    return dlfs::Status(EEXIST, "several dlfsd control sockets; pass --mount or --socket:" + list);
  }
  return found[0];
}

// What the daemon commands (all but `lmdb` and `tar`) are given.
struct DaemonArgs {
  std::string socket, mount, dataset;
  bool json_out = false;
  double timeout_s = 30;
  uint64_t epoch = 0, world_size = 0, rank = 0, show = 10, epochs = 10;
};

// The global options and the daemon commands, in the order --help lists them.
void add_daemon_commands(CLI::App& app, DaemonArgs& a) {
  app.add_option("--socket", a.socket, "Control socket path");
  app.add_option("--mount", a.mount, "Mountpoint of the daemon to talk to");
  app.add_flag("--json", a.json_out, "Print the daemon's JSON answer (for scripts)");
  app.add_option("--timeout", a.timeout_s, "Seconds to wait for an answer (verify: between progress lines)");
  auto* status = app.add_subcommand("status", "Datasets, load progress and memory");
  auto* stats = app.add_subcommand("stats", "Status plus bytes and requests served, memory vs backend, per view");
  auto* verify = app.add_subcommand("verify", "Check that every resident extent equals the backend (xxh3)");
  verify->add_option("--dataset", a.dataset, "Only this dataset");
  auto* plan = app.add_subcommand(
      "plan", "The epoch plan of a dataset: seed, remainder, rounds, shuffle ratio R and randomization level RL,\n"
              "and the first samples rank --rank of --world-size reads in --epoch");
  plan->add_option("--dataset", a.dataset, "Dataset (default: the first)");
  plan->add_option("--epoch", a.epoch, "Epoch (default 0)");
  plan->add_option("--world-size", a.world_size, "World size W (default: the dataset's world_size)")
      ->check(CLI::Range(1, 65535));
  plan->add_option("--rank", a.rank, "Rank (default 0)");
  plan->add_option("--show", a.show, "How many sample ids to print (default 10)");
  auto* report = app.add_subcommand(
      "shuffle-report", "Measure the orders this configuration produces over --epochs epochs against a full\n"
                        "shuffle and a constant order (position spread, neighbours kept, rank correlations)");
  report->add_option("--dataset", a.dataset, "Dataset (default: the first)");
  report->add_option("--epochs", a.epochs, "Epochs to measure (2..1000, default 10)")->check(CLI::Range(2, 1000));
  auto* unmount = app.add_subcommand("unmount", "Unmount and stop the daemon, and wait until it is gone");
  auto* ready = app.add_subcommand(
      "wait-ready", "Wait until every dataset is scanned and served (dlfsd mounts before it scans; reads\n"
                    "inside a dataset wait meanwhile). Waits for the daemon's socket too. Exit 0 ready,\n"
                    "1 a dataset failed or --timeout passed");
  for (auto* sub : {status, stats, verify, plan, report, unmount, ready}) sub->fallthrough();
}

nlohmann::json make_request(const std::string& cmd, const DaemonArgs& a) {
  nlohmann::json request = {{"cmd", cmd}};
  if (!a.dataset.empty()) request["dataset"] = a.dataset;
  if (cmd == "plan") {
    request["epoch"] = a.epoch;
    request["rank"] = a.rank;
    request["show"] = a.show;
    if (a.world_size) request["world_size"] = a.world_size;
  }
  if (cmd == "shuffle-report") request["epochs"] = a.epochs;
  return request;
}

// One progress line of verify or shuffle-report, overwritten by the next.
void print_progress(const std::string& cmd, const nlohmann::json& p) {
  if (cmd == "shuffle-report") {
    std::fprintf(stderr, "shuffle-report: %llu/%llu epochs\r",
                 static_cast<unsigned long long>(p.value("epochs_done", 0ull)),
                 static_cast<unsigned long long>(p.value("epochs_total", 0ull)));
    return;
  }
  std::fprintf(stderr, "verify %s: %llu/%llu extents\r", p.value("dataset", std::string("?")).c_str(),
               static_cast<unsigned long long>(p.value("extents_done", 0ull)),
               static_cast<unsigned long long>(p.value("extents_total", 0ull)));
}

// The daemon unmounts after answering; wait until its socket stops answering.
int wait_until_gone(const std::string& socket_path, const DaemonArgs& a, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto again = dlfs::control_call(socket_path, {{"cmd", "status"}}, nullptr, std::chrono::milliseconds(1000));
    if (!again) {
      std::printf("unmounted%s\n", a.mount.empty() ? "" : (" " + a.mount).c_str());
      return kOk;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::fprintf(stderr, "dlfs-ctl unmount: the daemon still answers after %.0f s\n", a.timeout_s);
  return kFailed;
}

// Polls status until no dataset is scanning or joining. The socket may not
// exist yet (dlfsd just started): that is retried too, until the deadline.
int wait_ready(const DaemonArgs& a, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last = "no answer from dlfsd";
  while (true) {
    auto path = find_socket(a.socket, a.mount);
    auto answer = path ? dlfs::control_call(*path, {{"cmd", "status"}}, nullptr, std::chrono::milliseconds(2000))
                       : dlfs::Result<nlohmann::json>(path.status());
    if (answer) {
      size_t ready = 0, total = 0;
      for (const auto& d : answer->value("datasets", nlohmann::json::array())) {
        ++total;
        const std::string state = d.value("state", std::string("ready"));
        if (state == "failed") {
          std::fprintf(stderr, "dlfs-ctl wait-ready: %s\n", d.value("error", std::string("a dataset failed")).c_str());
          return kFailed;
        }
        if (state == "ready") ++ready;
        else last = "dataset '" + d.value("name", std::string("?")) + "' is " + state;
      }
      if (ready == total) {
        if (a.json_out) std::cout << answer->dump(2) << "\n";
        else std::printf("ready: %zu dataset%s\n", total, total == 1 ? "" : "s");
        return kOk;
      }
    } else {
      last = answer.status().message();
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::fprintf(stderr, "dlfs-ctl wait-ready: not ready after %.0f s: %s\n", a.timeout_s, last.c_str());
  return kFailed;
}

// The answer as a person reads it (--json: as the daemon sent it).
void print_answer(const std::string& cmd, const nlohmann::json& answer, bool json_out) {
  if (json_out) {
    std::cout << answer.dump(2) << "\n";
  } else if (cmd == "status") {
    std::cout << dlfs::ctl::render_status(answer);
  } else if (cmd == "stats") {
    std::cout << dlfs::ctl::render_stats(answer);
  } else if (cmd == "verify") {
    std::cout << dlfs::ctl::render_verify(answer);
  } else if (cmd == "plan") {
    std::cout << dlfs::ctl::render_plan(answer);
  } else if (cmd == "shuffle-report") {
    std::cout << dlfs::ctl::render_shuffle_report(answer);
  }
}

int run_daemon_command(const std::string& cmd, const DaemonArgs& a) {
  if (cmd == "wait-ready") return wait_ready(a, std::chrono::milliseconds(static_cast<int64_t>(a.timeout_s * 1000)));
  auto path = find_socket(a.socket, a.mount);
  if (!path) {
    std::fprintf(stderr, "dlfs-ctl: %s\n", path.status().message().c_str());
    return kUsage;
  }
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(a.timeout_s * 1000));
  auto on_progress = [&](const nlohmann::json& p) {
    if (!a.json_out) print_progress(cmd, p);
  };
  auto result = dlfs::control_call(*path, make_request(cmd, a), on_progress, timeout);
  if ((cmd == "verify" || cmd == "shuffle-report") && !a.json_out) std::fprintf(stderr, "\n");
  if (!result) {
    std::fprintf(stderr, "dlfs-ctl %s: %s\n", cmd.c_str(), result.status().message().c_str());
    bool connection = result.status().message().rfind("cannot connect", 0) == 0;
    return connection ? kUsage : kFailed;
  }
  if (cmd == "unmount") return wait_until_gone(*path, a, timeout);
  print_answer(cmd, *result, a.json_out);
  if (cmd == "verify" && !result->value("ok", false)) return kFailed;
  return kOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{kDescription, "dlfs-ctl"};
  app.require_subcommand(1);
  DaemonArgs args;
  add_daemon_commands(app, args);
  int lmdb_exit = kOk;
  dlfs::ctl::add_lmdb_commands(app, lmdb_exit);
  int tfrecord_exit = kOk, tar_exit = kOk;
  dlfs::ctl::add_tfrecord_commands(app, tfrecord_exit);
  dlfs::ctl::add_tar_commands(app, tar_exit);
  // Hidden (no group): the build runs it to make dlfs-ctl(8) from this app
  // (docs/man/meson.build). On parse, so that no command is required.
  const auto print_man_page = [&app] {
    std::fputs(dlfs::ctl::ctl_man_page(app, DLFS_VERSION).c_str(), stdout);
    throw CLI::Success();
  };
  app.add_flag_callback("--man-page", print_man_page, "Print the manual page and exit")->trigger_on_parse()->group("");
  // CLI11_PARSE would exit 105..109 on bad arguments; the documented usage code is 2.
  try { app.parse(argc, argv); } catch (const CLI::ParseError& e) { return app.exit(e) == 0 ? kOk : kUsage; }
  if (app.got_subcommand("lmdb")) return lmdb_exit;
  if (app.got_subcommand("tfrecord")) return tfrecord_exit;
  if (app.got_subcommand("tar")) return tar_exit;
  return run_daemon_command(app.get_subcommands()[0]->get_name(), args);
}
