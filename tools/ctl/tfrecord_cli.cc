#include "tools/ctl/tfrecord_cli.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "common/unique_fd.h"
#include "provenance/tfrecord_tree.h"
#include "tools/ctl/exit_codes.h"

namespace dlfs::ctl {
namespace {

namespace tf = provenance::tfrecord;


// The TFRecord files of DIR as dlfsd would locate them (format tfrecord).
// With `bad`, files with a bad header are listed there instead of failing.
Result<std::vector<tf::File>> locate(const std::string& dir, bool use_indexes,
                                     std::vector<std::string>* bad = nullptr) {
  provenance::FormatOptions files;  // the tree only: every file as is
  DLFS_ASSIGN_OR_RETURN(auto tree, provenance::Manifest::build(dir, files));
  return tf::locate_files(tree, use_indexes, bad);
}

// Runs a command so that nothing escapes as a crash: errors and exceptions
// become one line on stderr and exit code 1.
int run(const char* cmd, const std::function<Status()>& body) {
  Status s;
  try {
    s = body();
  } catch (const std::exception& e) {
    s = Status(EIO, e.what());
  }
  if (s) return kOk;
  std::fprintf(stderr, "dlfs-ctl tfrecord %s: %s\n", cmd, s.message().c_str());
  return kFailed;
}

Status show(const std::string& dir, bool json_out) {
  DLFS_ASSIGN_OR_RETURN(auto files, locate(dir, true));
  nlohmann::json j = {{"dir", dir}, {"files", nlohmann::json::array()}};
  uint64_t records = 0, bytes = 0;
  for (const auto& f : files) {
    uint64_t data = 0;
    for (const auto& r : f.records) data += r.length;
    records += f.records.size();
    bytes += data;
    j["files"].push_back({{"path", f.path}, {"records", f.records.size()}, {"data_bytes", data},
                          {"located_by", f.indexed ? "index" : "scan"}, {"index_problem", f.why_scanned}});
    if (json_out) continue;
    std::printf("%s: %zu records, %llu data bytes, located by %s\n", f.path.c_str(), f.records.size(),
                static_cast<unsigned long long>(data), f.indexed ? "its .idx" : "a scan");
    if (!f.why_scanned.empty()) std::printf("  index not used: %s\n", f.why_scanned.c_str());
  }
  j["records"] = records;
  j["data_bytes"] = bytes;
  if (json_out)
    std::cout << j.dump(2) << "\n";
  else
    std::printf("%zu TFRecord files, %llu records, %llu data bytes\n", files.size(),
                static_cast<unsigned long long>(records), static_cast<unsigned long long>(bytes));
  return Status::ok();
}

// Checks every record's data CRC; each bad one (and each file whose headers
// cannot be followed) is a line naming file and offset.
Status verify(const std::string& dir) {
  std::vector<std::string> bad_files;
  DLFS_ASSIGN_OR_RETURN(auto files, locate(dir, true, &bad_files));
  for (const auto& why : bad_files) std::printf("%s\n", why.c_str());
  uint64_t records = 0, bad = bad_files.size();
  for (const auto& f : files) {
    UniqueFd fd(::open(f.path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return Status::from_errno(errno, "opening " + f.path);
    for (const auto& r : f.records) {
      ++records;
      auto crc = tf::check_data(fd.get(), r, f.path);
      if (crc) continue;
      if (crc.status().err() != EIO) return crc.status();
      std::printf("%s\n", crc.status().message().c_str());
      ++bad;
    }
  }
  if (bad)
    return Status(EIO, "files with a bad record header: " + std::to_string(bad_files.size()) +
                           "; records with a bad data CRC: " + std::to_string(bad - bad_files.size()) + " of " +
                           std::to_string(records));
  std::printf("%llu records in %zu TFRecord files: every length and data CRC matches\n",
              static_cast<unsigned long long>(records), files.size());
  return Status::ok();
}

// Writes "<file>.idx" for every TFRecord file (through a temporary and a
// rename, so a reader never sees half an index).
Status index(const std::string& dir) {
  DLFS_ASSIGN_OR_RETURN(auto files, locate(dir, false));
  for (const auto& f : files) {
    const std::string text = tf::index_text(f.records), path = tf::index_path(f.path), tmp = path + ".tmp";
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd.valid()) return Status::from_errno(errno, "creating " + tmp);
    if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()) || ::fsync(fd.get()) != 0)
      return Status::from_errno(errno, "writing " + tmp);
    if (::rename(tmp.c_str(), path.c_str()) != 0) return Status::from_errno(errno, "renaming " + tmp);
    std::printf("%s: %zu records\n", path.c_str(), f.records.size());
  }
  std::printf("wrote %zu indexes\n", files.size());
  return Status::ok();
}

}  // namespace

void add_tfrecord_commands(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "tfrecord", "TFRecord datasets (format tfrecord): show, check or index the TFRecord files under DIR\n"
                  "(every regular file but <file>.idx indexes). Works on the files directly; no daemon needed.");
  cmd->require_subcommand(1);
  cmd->footer("Exit codes: 0 ok, 1 the command failed (a bad record, an unreadable file), 2 bad arguments.");
  auto dir = std::make_shared<std::string>();
  auto json_out = std::make_shared<bool>(false);
  auto add_dir = [&](CLI::App* sub) {
    sub->add_option("DIR", *dir, "Dataset directory")->required()->check(CLI::ExistingDirectory);
  };
  auto* sh = cmd->add_subcommand("show", "Each file's records and data bytes, and whether its .idx locates them");
  add_dir(sh);
  sh->add_flag("--json", *json_out, "JSON for scripts");
  sh->callback([=, &exit_code] { exit_code = run("show", [&] { return show(*dir, *json_out); }); });
  auto* ve = cmd->add_subcommand("verify", "Read every record and check its length and data CRCs");
  add_dir(ve);
  ve->callback([=, &exit_code] { exit_code = run("verify", [&] { return verify(*dir); }); });
  auto* ix = cmd->add_subcommand(
      "index", "Scan every file and write <file>.idx (DALI tfrecord2idx format: \"<offset> <size>\" per\n"
               "record), which lets dlfsd locate the records without reading them");
  add_dir(ix);
  ix->callback([=, &exit_code] { exit_code = run("index", [&] { return index(*dir); }); });
}

}  // namespace dlfs::ctl
