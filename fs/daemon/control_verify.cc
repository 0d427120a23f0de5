#include "fs/daemon/control_verify.h"

#include <spdlog/spdlog.h>

#include "cache/verifier.h"
#include "fs/daemon/stats.h"

namespace dlfs::fs {

nlohmann::json verify_dataset_json(const Dataset& d, const ProgressFn& progress) {
  auto report = cache::verify_buffer(d.buffer(), d.backend(), [&](uint64_t done, uint64_t total) {
    if (progress) progress({{"dataset", d.name()}, {"extents_done", done}, {"extents_total", total}});
  });
  nlohmann::json mismatches = nlohmann::json::array();
  for (const auto& m : report.mismatches)
    mismatches.push_back({{"extent", m.extent}, {"data_offset", m.data_offset}, {"length", m.length}, {"what", m.what}});
  if (!report.mismatches.empty())
    spdlog::error("[{}] verify found {} mismatching extent(s)", d.name(), report.mismatches.size());
  if (report.changed_count > 0)
    spdlog::warn("[{}] verify: {} backend file(s) changed since the scan (first: '{}'); memory holds the scanned "
                 "version", d.name(), report.changed_count, report.changed.empty() ? "?" : report.changed[0].path);
  return {{"name", d.name()},
          {"extents_checked", report.extents_checked},
          {"extents_skipped", report.extents_skipped},
          {"extents_changed", report.extents_changed},
          {"bytes_checked", report.bytes_checked},
          {"seconds", report.seconds},
          {"ok", report.ok()},
          {"mismatches", mismatches},
          {"changed_files", changed_files_json(report.changed_count, report.changed)}};
}

}  // namespace dlfs::fs
