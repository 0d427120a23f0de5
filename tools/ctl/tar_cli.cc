#include "tools/ctl/tar_cli.h"

#include <fcntl.h>

#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "common/unique_fd.h"
#include "provenance/manifest.h"
#include "provenance/sample_groups.h"
#include "provenance/tar_shard_scan.h"
#include "tools/ctl/exit_codes.h"

namespace dlfs::ctl {
namespace {

namespace pv = provenance;

// One shard as dlfsd would load it: its members, samples (groups) and skipped entries.
nlohmann::json scan_one(const std::string& root, const std::string& rel, uint64_t size, pv::GroupRule rule) {
  nlohmann::json j = {{"shard", rel}, {"bytes", size}};
  UniqueFd fd(::open((root + "/" + rel).c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    j["error"] = Status::from_errno(errno, "tar shard '" + rel + "'").message();
    return j;
  }
  uint64_t samples = 0;
  std::string key;
  auto facts = pv::scan_tar_shard(fd.get(), size, rel, [&](pv::TarShardMember&& m) {
    const std::string_view k = pv::group_key(m.name, rule);
    if (samples == 0 || k != key) ++samples, key.assign(k);
  });
  if (!facts) {
    j["error"] = facts.status().message();
    return j;
  }
  j["members"] = facts->members;
  j["samples"] = samples;
  j["skipped"] = facts->skipped;
  j["end_offset"] = facts->end_offset;
  return j;
}

int run_show(const std::string& dir, const std::string& group_by, bool json_out) {
  const auto rule = enum_named<pv::GroupRule>(group_by);
  if (!rule || *rule == pv::GroupRule::none) {
    std::fprintf(stderr, "dlfs-ctl tar show: --group-by must be first-dot or last-dot\n");
    return kUsage;
  }
  auto tree = pv::Manifest::build(dir, pv::FormatOptions{});  // files: the tree in canonical order
  if (!tree) {
    std::fprintf(stderr, "dlfs-ctl tar show: %s\n", tree.status().message().c_str());
    return kFailed;
  }
  nlohmann::json shards = nlohmann::json::array();
  uint64_t members = 0, samples = 0, bad = 0;
  for (uint32_t f = 0; f < tree->file_count(); ++f) {
    if (!pv::is_tar_shard_name(tree->file_name(f))) continue;
    nlohmann::json s = scan_one(dir, tree->file_path(f), tree->file_size(f), *rule);
    if (s.contains("error")) {
      ++bad;
    } else {
      members += s["members"].get<uint64_t>();
      samples += s["samples"].get<uint64_t>();
    }
    shards.push_back(std::move(s));
  }
  const nlohmann::json total = {{"shards", shards.size()}, {"bad_shards", bad}, {"members", members},
                                {"samples", samples}, {"group_by", group_by}};
  if (json_out) {
    std::cout << nlohmann::json{{"dir", dir}, {"total", total}, {"shards", shards}}.dump(2) << "\n";
  } else {
    for (const auto& s : shards) {
      if (s.contains("error"))
        std::printf("BAD %s\n", s["error"].get<std::string>().c_str());
      else
        std::printf("%s: %llu bytes, %llu members, %llu samples, %llu other entries\n",
                    s["shard"].get<std::string>().c_str(), s["bytes"].get<unsigned long long>(),
                    s["members"].get<unsigned long long>(), s["samples"].get<unsigned long long>(),
                    s["skipped"].get<unsigned long long>());
    }
    std::printf("%zu shards (%llu bad): %llu members, %llu samples by %s\n", shards.size(),
                static_cast<unsigned long long>(bad), static_cast<unsigned long long>(members),
                static_cast<unsigned long long>(samples), group_by.c_str());
  }
  if (shards.empty()) std::fprintf(stderr, "dlfs-ctl tar show: no '.tar' shard under %s\n", dir.c_str());
  return bad || shards.empty() ? kFailed : kOk;
}

}  // namespace

void add_tar_commands(CLI::App& app, int& exit_code) {
  auto* tar = app.add_subcommand("tar", "WebDataset tar shards (format tar, docs/webdataset.md), on the files\n"
                                        "directly; no daemon or control socket needed.");
  tar->require_subcommand(1);
  tar->footer("Exit codes: 0 ok, 1 a bad shard (or none), 2 bad arguments.");
  auto dir = std::make_shared<std::string>();
  auto group_by = std::make_shared<std::string>("first-dot");
  auto json_out = std::make_shared<bool>(false);
  auto* show = tar->add_subcommand("show", "Scan DIR's shards as dlfsd does at load: members, samples and other\n"
                                           "entries per shard; every bad shard named with the byte offset at fault");
  show->add_option("DIR", *dir, "Dataset tree (its *.tar files are the shards)")->required()->check(CLI::ExistingDirectory);
  show->add_option("--group-by", *group_by, "first-dot (the WebDataset key) or last-dot");
  show->add_flag("--json", *json_out, "One JSON object (for scripts)");
  show->callback([=, &exit_code] {
    try {
      exit_code = run_show(*dir, *group_by, *json_out);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dlfs-ctl tar show: %s\n", e.what());
      exit_code = kFailed;
    }
  });
}

}  // namespace dlfs::ctl
