// dlfsd's Prometheus families made from a stats snapshot (fs/daemon/metrics.h),
// and docs/metrics.md, which lists them (the writer and the histogram:
// prometheus_text_test.cc).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/latency_histogram.h"
#include "common/prometheus_text.h"
#include "text_lines.h"
#include "fs/daemon/metrics.h"

#ifndef DLFS_SOURCE_ROOT
#error "DLFS_SOURCE_ROOT (the source tree, for docs/metrics.md) must be defined"
#endif

namespace dlfs {
namespace {

using nlohmann::json;
using prom::Type;

using dlfs::testing::lines_of;

// A stats snapshot with every part the families read (docs/stats.md).
json full_stats() {
  LatencyHistogram read, get;
  read.observe_ns(40'000);
  read.observe_ns(2'000'000);
  get.observe_ns(120'000);
  return json::parse(R"({
    "version": "0.1.0", "pid": 7, "mountpoint": "/mnt/dlfs", "uptime_s": 100.5,
    "memory": {"resident_bytes": 300, "capacity_bytes": 400, "budget_bytes": 1000, "metadata_bytes": 50,
               "rss_bytes": 5000},
    "datasets": [
      {"name": "img\"net", "state": "ready", "samples": 10, "files": 10, "total_bytes": 600, "resident_bytes": 300,
       "load": {"state": "done", "bytes_total": 300, "bytes_loaded": 300, "extents_failed": 0, "rate_bps": 1.5e9},
       "bytes_by_source": {"local": 111, "remote": 222, "backend": 333},
       "views": {"raw": {"lookups": 4, "requests": 5, "bytes": 66},
                 "epochs": {"lookups": 1, "requests": 2, "bytes": 33}},
       "changed_files": {"count": 2, "files": []}, "backend_errors": 3},
      {"name": "later", "state": "scanning", "backend": "/b", "format": "files"}
    ],
    "fuse": {"requests": {"lookup": 9, "read": 2, "write": 0}},
    "cluster": {"self": 0, "size": 3,
                "members": [{"rank": 0, "address": "10.0.0.1:7710", "state": "self"},
                            {"rank": 1, "address": "10.0.0.2:7710", "state": "up"},
                            {"rank": 2, "address": "10.0.0.3:7710", "state": "down"}],
                "membership": {"sent": {"messages": 11, "bytes": 1100}, "received": {"messages": 12, "bytes": 1200}},
                "gets": {"failed": {"timeout": 1, "stale": 0, "error": 4}}},
    "client": {"open_connections": 2, "batches": 17},
    "metrics": {"address": "127.0.0.1:9567", "scrapes": 8}
  })")
      .patch(json::array({{{"op", "add"}, {"path", "/fuse/latency"}, {"value", {{"read", histogram_json(read.snapshot())}}}},
                          {{"op", "add"}, {"path", "/cluster/gets/latency"}, {"value", histogram_json(get.snapshot())}}}));
}

// name{labels} -> value, and name -> its TYPE, from an exposition.
struct Parsed {
  std::map<std::string, std::string> samples;
  std::map<std::string, std::string> types;
  std::vector<std::string> family_order;
};

Parsed parse(const std::string& text) {
  Parsed p;
  const std::regex type_line(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram))");
  const std::regex sample_line(R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+))");
  std::smatch m;
  for (const auto& line : lines_of(text)) {
    if (std::regex_match(line, m, type_line)) {
      EXPECT_FALSE(p.types.count(m[1])) << m[1] << " typed twice";
      p.types[m[1]] = m[2];
      p.family_order.push_back(m[1]);
    } else if (line.rfind("# HELP ", 0) == 0) {
      continue;
    } else if (std::regex_match(line, m, sample_line)) {
      EXPECT_FALSE(p.samples.count(m[1].str() + m[2].str())) << line << ": twice";
      p.samples[m[1].str() + m[2].str()] = m[3];
    } else {
      ADD_FAILURE() << "not an exposition line: '" << line << "'";
    }
  }
  return p;
}

TEST(Metrics, FromAStatsSnapshot) {
  const std::string text = fs::metrics_text(full_stats(), 1000.5);
  const Parsed p = parse(text);
  auto at = [&](const std::string& key) {
    auto it = p.samples.find(key);
    return it == p.samples.end() ? std::string("(missing)") : it->second;
  };
  EXPECT_EQ(at("dlfs_build_info{version=\"0.1.0\"}"), "1");
  EXPECT_EQ(at("process_start_time_seconds"), "900");
  EXPECT_EQ(at("dlfs_uptime_seconds"), "100.5");
  EXPECT_EQ(at("process_resident_memory_bytes"), "5000");
  EXPECT_EQ(at("dlfs_memory_budget_bytes"), "1000");
  // The dataset's name is a label value: escaped.
  const std::string ds = "dataset=\"img\\\"net\"";
  EXPECT_EQ(at("dlfs_read_bytes_total{" + ds + ",source=\"memory\"}"), "111");
  EXPECT_EQ(at("dlfs_read_bytes_total{" + ds + ",source=\"peer\"}"), "222");
  EXPECT_EQ(at("dlfs_read_bytes_total{" + ds + ",source=\"backend\"}"), "333");
  EXPECT_EQ(at("dlfs_view_reads_total{" + ds + ",view=\"raw\"}"), "5");
  EXPECT_EQ(at("dlfs_view_read_bytes_total{" + ds + ",view=\"epochs\"}"), "33");
  EXPECT_EQ(at("dlfs_memory_resident_bytes{" + ds + "}"), "300");
  EXPECT_EQ(at("dlfs_load_rate_bytes_per_second{" + ds + "}"), "1500000000");
  EXPECT_EQ(at("dlfs_load_complete{" + ds + "}"), "1");
  EXPECT_EQ(at("dlfs_backend_errors_total{" + ds + "}"), "3");
  EXPECT_EQ(at("dlfs_backend_changed_files{" + ds + "}"), "2");
  EXPECT_EQ(at("dlfs_dataset_state{" + ds + ",state=\"ready\"}"), "1");
  EXPECT_EQ(at("dlfs_dataset_state{" + ds + ",state=\"failed\"}"), "0");
  // A dataset still scanning: its state, nothing else.
  EXPECT_EQ(at("dlfs_dataset_state{dataset=\"later\",state=\"scanning\"}"), "1");
  EXPECT_EQ(at("dlfs_dataset_bytes{dataset=\"later\"}"), "(missing)");
  // FUSE: every kind the stats list, a histogram each (empty where none was timed).
  EXPECT_EQ(at("dlfs_fuse_requests_total{op=\"read\"}"), "2");
  EXPECT_EQ(at("dlfs_fuse_request_duration_seconds_bucket{op=\"read\",le=\"5e-05\"}"), "1");
  EXPECT_EQ(at("dlfs_fuse_request_duration_seconds_bucket{op=\"read\",le=\"0.0025\"}"), "2");
  EXPECT_EQ(at("dlfs_fuse_request_duration_seconds_bucket{op=\"read\",le=\"+Inf\"}"), "2");
  EXPECT_EQ(at("dlfs_fuse_request_duration_seconds_count{op=\"read\"}"), "2");
  EXPECT_EQ(at("dlfs_fuse_request_duration_seconds_sum{op=\"read\"}"), "0.00204");
  EXPECT_EQ(at("dlfs_fuse_request_duration_seconds_count{op=\"lookup\"}"), "0");
  // The cluster.
  EXPECT_EQ(at("dlfs_cluster_size"), "3");
  EXPECT_EQ(at("dlfs_cluster_members{state=\"up\"}"), "1");
  EXPECT_EQ(at("dlfs_cluster_members{state=\"down\"}"), "1");
  EXPECT_EQ(at("dlfs_cluster_members{state=\"self\"}"), "1");
  EXPECT_EQ(at("dlfs_cluster_members{state=\"refused\"}"), "0");
  EXPECT_EQ(at("dlfs_cluster_peer_up{rank=\"1\",address=\"10.0.0.2:7710\"}"), "1");
  EXPECT_EQ(at("dlfs_cluster_peer_up{rank=\"2\",address=\"10.0.0.3:7710\"}"), "0");
  EXPECT_EQ(at("dlfs_cluster_peer_up{rank=\"0\",address=\"10.0.0.1:7710\"}"), "(missing)");  // itself
  EXPECT_EQ(at("dlfs_peer_get_duration_seconds_bucket{le=\"0.00025\"}"), "1");
  EXPECT_EQ(at("dlfs_peer_get_duration_seconds_count"), "1");
  EXPECT_EQ(at("dlfs_peer_get_failures_total{reason=\"error\"}"), "4");
  EXPECT_EQ(at("dlfs_cluster_messages_total{direction=\"received\"}"), "12");
  EXPECT_EQ(at("dlfs_client_batches_total"), "17");
  EXPECT_EQ(at("dlfs_metrics_scrapes_total"), "8");

  // Every family of the table is exported from a full snapshot, in the table's order and type.
  std::vector<std::string> table;
  for (const auto& f : fs::metric_families()) {
    table.push_back(f.name);
    ASSERT_TRUE(p.types.count(f.name)) << f.name << " is in the table but not in the output";
    EXPECT_EQ(p.types.at(f.name), prom::type_name(f.type)) << f.name;
  }
  EXPECT_EQ(p.family_order, table);
  EXPECT_EQ(text, fs::metrics_text(full_stats(), 1000.5));  // stable
}

TEST(Metrics, AloneAndBeforeAnythingIsReady) {
  // A daemon of one node (no "cluster"), no client socket, no FUSE yet.
  const json stats = json::parse(R"({"version": "0.1.0", "uptime_s": 1,
      "memory": {"budget_bytes": 1}, "datasets": [{"name": "d", "state": "scanning"}]})");
  const Parsed p = parse(fs::metrics_text(stats, 10));
  EXPECT_EQ(p.samples.at("dlfs_cluster_size"), "1");
  EXPECT_EQ(p.samples.at("dlfs_cluster_members{state=\"self\"}"), "1");
  EXPECT_EQ(p.samples.at("dlfs_peer_get_duration_seconds_count"), "0");
  EXPECT_EQ(p.samples.at("dlfs_peer_get_failures_total{reason=\"timeout\"}"), "0");
  EXPECT_FALSE(p.types.count("dlfs_fuse_requests_total"));
  EXPECT_FALSE(p.types.count("dlfs_client_open_connections"));
  // Nothing at all is still a valid exposition.
  EXPECT_NO_THROW(parse(fs::metrics_text(json::object(), 0)));
  EXPECT_NO_THROW(parse(fs::metrics_text(json("not an object"), 0)));
}

TEST(Metrics, DocsListEveryFamily) {
  std::ifstream in(std::string(DLFS_SOURCE_ROOT) + "/docs/metrics.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  ASSERT_FALSE(doc.empty()) << "docs/metrics.md";
  for (const auto& f : fs::metric_families())
    EXPECT_NE(doc.find("| `" + std::string(f.name) + "` |"), std::string::npos)
        << f.name << ": add a row for it to docs/metrics.md";
}

}  // namespace
}  // namespace dlfs
