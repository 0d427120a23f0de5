// Metrics: dlfsd's Prometheus exposition (docs/metrics.md), made from the
// stats snapshot that `dlfs-ctl stats` prints (Daemon::snapshot, schema in
// docs/stats.md). Every figure is the stats' figure, renamed and relabelled
// as Prometheus wants (`dlfs_..._bytes_total`, seconds): the two always agree,
// and a scrape touches only what a stats request does (atomic counters and
// short-lived snapshots, never a FUSE thread's lock).
//
// kMetricFamilies is the one list of what is exported: metrics_text declares
// every family from it (a family left without a sample is left out of the
// text), and docs/metrics.md lists the same (tests/unit/metrics_test.cc
// checks both).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/prometheus_text.h"

namespace dlfs::fs {

struct MetricFamily {
  const char* name;
  prom::Type type;
  const char* labels;  // "dataset,source" (documentation; the samples carry them)
  const char* help;
};

const std::vector<MetricFamily>& metric_families();

// The exposition text of one stats snapshot (detailed: with "fuse").
// `now_unix_s` dates the process start (process_start_time_seconds =
// now - uptime_s). Missing parts are left out, never an error.
std::string metrics_text(const nlohmann::json& stats, double now_unix_s);

}  // namespace dlfs::fs
