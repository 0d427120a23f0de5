// The Prometheus text exposition writer (common/prometheus_text.h) and the
// latency histogram (common/latency_histogram.h): escaping, value formats,
// declaration order and sorted series, cumulative buckets, misuse refused,
// the histogram's buckets and its JSON.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/latency_histogram.h"
#include "common/prometheus_text.h"
#include "text_lines.h"

namespace dlfs {
namespace {

using nlohmann::json;
using prom::PrometheusText;
using prom::Type;

using dlfs::testing::lines_of;

TEST(PrometheusText, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(prom::escape_label_value(R"(a\b"c)" "\n" "d"), R"(a\\b\"c\nd)");
  EXPECT_EQ(prom::escape_label_value("plain ünïcode"), "plain ünïcode");  // UTF-8 as is
  EXPECT_EQ(prom::escape_help("line\none \\ \"quoted\""), "line\\none \\\\ \"quoted\"");  // quotes stay in HELP
  PrometheusText t;
  t.family("x_total", Type::counter, "Help with\na newline");
  t.add("x_total", {{"path", "C:\\dir\\\"f\"\n"}}, uint64_t{3});
  EXPECT_EQ(t.text(),
            "# HELP x_total Help with\\na newline\n"
            "# TYPE x_total counter\n"
            "x_total{path=\"C:\\\\dir\\\\\\\"f\\\"\\n\"} 3\n");
}

TEST(PrometheusText, FormatsValues) {
  EXPECT_EQ(prom::format_value(0), "0");
  EXPECT_EQ(prom::format_value(12345678), "12345678");
  EXPECT_EQ(prom::format_value(-3), "-3");
  EXPECT_EQ(prom::format_value(0.25), "0.25");
  EXPECT_EQ(prom::format_value(1e-05), "1e-05");
  EXPECT_EQ(std::stod(prom::format_value(0.1 + 0.2)), 0.1 + 0.2);  // reads back the same double
  EXPECT_EQ(prom::format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(prom::format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(prom::format_value(std::nan("")), "NaN");
  PrometheusText t;
  t.family("big_bytes", Type::gauge, "h");
  t.add("big_bytes", {}, uint64_t{18446744073709551615ull});  // every digit of a uint64
  EXPECT_NE(t.text().find("big_bytes 18446744073709551615\n"), std::string::npos) << t.text();
}

TEST(PrometheusText, FamiliesInDeclarationOrderSeriesSorted) {
  auto make = [](bool reversed) {
    PrometheusText t;
    t.family("b_total", Type::counter, "second declared first");
    t.family("a", Type::gauge, "a gauge");
    t.family("unused", Type::gauge, "no series: left out");
    std::vector<std::string> ds = {"zeta", "alpha", "mid"};
    if (reversed) std::reverse(ds.begin(), ds.end());
    for (const auto& d : ds) {
      t.add("a", {{"dataset", d}}, 1.5);
      t.add("b_total", {{"dataset", d}, {"source", "peer"}}, uint64_t{2});
      t.add("b_total", {{"dataset", d}, {"source", "backend"}}, uint64_t{1});
    }
    return t.text();
  };
  const std::string text = make(false);
  EXPECT_EQ(text, make(true));  // stable whatever the order samples came in
  const auto lines = lines_of(text);
  ASSERT_EQ(lines.size(), 2u + 6u + 2u + 3u);
  EXPECT_EQ(lines[0], "# HELP b_total second declared first");
  EXPECT_EQ(lines[1], "# TYPE b_total counter");
  EXPECT_EQ(lines[2], "b_total{dataset=\"alpha\",source=\"backend\"} 1");
  EXPECT_EQ(lines[3], "b_total{dataset=\"alpha\",source=\"peer\"} 2");
  EXPECT_EQ(lines[7], "b_total{dataset=\"zeta\",source=\"peer\"} 2");
  EXPECT_EQ(lines[8], "# HELP a a gauge");
  EXPECT_EQ(lines[9], "# TYPE a gauge");
  EXPECT_EQ(lines[10], "a{dataset=\"alpha\"} 1.5");
  EXPECT_EQ(lines[12], "a{dataset=\"zeta\"} 1.5");
  EXPECT_EQ(text.find("unused"), std::string::npos);
}

TEST(PrometheusText, HistogramBucketsAreCumulativeWithInfLast) {
  PrometheusText t;
  t.family("op_seconds", Type::histogram, "latency");
  prom::Histogram h;
  h.bounds = {0.001, 0.01, 0.1};
  h.cumulative = {1, 1, 4};
  h.count = 5;
  h.sum = 0.75;
  t.add_histogram("op_seconds", {{"op", "read"}}, h);
  t.add_histogram("op_seconds", {{"op", "lookup"}}, prom::Histogram{{0.001, 0.01, 0.1}, {0, 0, 0}, 0, 0});
  EXPECT_EQ(t.text(),
            "# HELP op_seconds latency\n"
            "# TYPE op_seconds histogram\n"
            "op_seconds_bucket{op=\"lookup\",le=\"0.001\"} 0\n"
            "op_seconds_bucket{op=\"lookup\",le=\"0.01\"} 0\n"
            "op_seconds_bucket{op=\"lookup\",le=\"0.1\"} 0\n"
            "op_seconds_bucket{op=\"lookup\",le=\"+Inf\"} 0\n"
            "op_seconds_sum{op=\"lookup\"} 0\n"
            "op_seconds_count{op=\"lookup\"} 0\n"
            "op_seconds_bucket{op=\"read\",le=\"0.001\"} 1\n"
            "op_seconds_bucket{op=\"read\",le=\"0.01\"} 1\n"
            "op_seconds_bucket{op=\"read\",le=\"0.1\"} 4\n"
            "op_seconds_bucket{op=\"read\",le=\"+Inf\"} 5\n"
            "op_seconds_sum{op=\"read\"} 0.75\n"
            "op_seconds_count{op=\"read\"} 5\n");
  // Without labels too.
  PrometheusText u;
  u.family("get_seconds", Type::histogram, "h");
  u.add_histogram("get_seconds", {}, prom::Histogram{{1}, {2}, 2, 0.5});
  EXPECT_NE(u.text().find("get_seconds_bucket{le=\"1\"} 2\nget_seconds_bucket{le=\"+Inf\"} 2\nget_seconds_sum 0.5\n"
                          "get_seconds_count 2\n"),
            std::string::npos)
      << u.text();
}

TEST(PrometheusText, RefusesMisuse) {
  PrometheusText t;
  EXPECT_THROW(t.family("9lives", Type::gauge, "h"), std::logic_error);
  EXPECT_THROW(t.family("has-dash", Type::gauge, "h"), std::logic_error);
  EXPECT_THROW(t.family("requests", Type::counter, "a counter without _total"), std::logic_error);
  EXPECT_THROW(t.family("level_total", Type::gauge, "a gauge with _total"), std::logic_error);
  t.family("ok_total", Type::counter, "h");
  EXPECT_THROW(t.family("ok_total", Type::counter, "twice"), std::logic_error);
  EXPECT_THROW(t.add("undeclared", {}, uint64_t{1}), std::logic_error);
  EXPECT_THROW(t.add("ok_total", {{"bad-label", "x"}}, uint64_t{1}), std::logic_error);
  EXPECT_THROW(t.add("ok_total", {{"__reserved", "x"}}, uint64_t{1}), std::logic_error);
  EXPECT_THROW(t.add("ok_total", {{"a", "x"}, {"a", "y"}}, uint64_t{1}), std::logic_error);
  EXPECT_THROW(t.add_histogram("ok_total", {}, prom::Histogram{}), std::logic_error);  // not a histogram
  t.family("h_seconds", Type::histogram, "h");
  EXPECT_THROW(t.add("h_seconds", {}, uint64_t{1}), std::logic_error);  // a histogram's single value
  EXPECT_THROW(t.add_histogram("h_seconds", {{"le", "1"}}, prom::Histogram{}), std::logic_error);
  EXPECT_THROW(t.add_histogram("h_seconds", {}, prom::Histogram{{2, 1}, {0, 0}, 0, 0}), std::logic_error);
  EXPECT_THROW(t.add_histogram("h_seconds", {}, prom::Histogram{{1, 2}, {3, 1}, 3, 0}), std::logic_error);
  EXPECT_THROW(t.add_histogram("h_seconds", {}, prom::Histogram{{1}, {3}, 2, 0}), std::logic_error);
  t.add("ok_total", {{"a", "x"}}, uint64_t{1});
  t.add("ok_total", {{"a", "x"}}, uint64_t{2});
  EXPECT_THROW((void)t.text(), std::logic_error);  // one series twice
}

TEST(LatencyHistogram, BucketsByUpperBoundInclusive) {
  LatencyHistogram h;
  h.observe_ns(0);
  h.observe_ns(10'000);       // exactly 10 us: the first bucket (le="1e-05")
  h.observe_ns(10'001);       // just above: the second
  h.observe_ns(1'000'000);    // 1 ms
  h.observe_ns(10'000'000'000ull);  // 10 s: the last finite bucket
  h.observe_ns(11'000'000'000ull);  // above every bound: +Inf only
  h.observe(std::chrono::milliseconds(-5));  // a clock that went back counts as 0
  const auto s = h.snapshot();
  EXPECT_EQ(s.count(), 7u);
  EXPECT_EQ(s.counts[0], 3u);
  EXPECT_EQ(s.counts[1], 1u);
  EXPECT_EQ(s.cumulative(6), 5u);  // le 0.001
  EXPECT_EQ(s.cumulative(LatencyHistogram::kBoundsNs.size() - 1), 6u);
  EXPECT_EQ(s.counts[LatencyHistogram::kBuckets - 1], 1u);
  EXPECT_EQ(s.sum_ns, 10'000 + 10'001 + 1'000'000 + 10'000'000'000ull + 11'000'000'000ull);
  EXPECT_DOUBLE_EQ(LatencyHistogram::bound_seconds(0), 1e-05);
  EXPECT_DOUBLE_EQ(LatencyHistogram::bound_seconds(LatencyHistogram::kBoundsNs.size() - 1), 10.0);
}

TEST(LatencyHistogram, JsonRoundTrip) {
  LatencyHistogram h;
  for (uint64_t ns : {5'000ull, 70'000ull, 70'000ull, 3'000'000ull, 20'000'000'000ull}) h.observe_ns(ns);
  const json j = histogram_json(h.snapshot());
  EXPECT_EQ(j["count"], 5);
  ASSERT_EQ(j["buckets"].size(), LatencyHistogram::kBoundsNs.size());
  EXPECT_EQ(j["buckets"][0], json::array({1e-05, 1}));
  EXPECT_EQ(j["buckets"].back(), json::array({10.0, 4}));  // the 20 s one is in count only
  const auto back = histogram_from_json(json::parse(j.dump()));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->counts, h.snapshot().counts);
  EXPECT_EQ(back->sum_ns, h.snapshot().sum_ns);
  // Not a histogram of these bounds: refused.
  json other = j;
  other["buckets"][3][0] = 0.5;
  EXPECT_FALSE(histogram_from_json(other));
  json decreasing = j;
  decreasing["buckets"][5][1] = 0;
  EXPECT_FALSE(histogram_from_json(decreasing));
  json short_count = j;
  short_count["count"] = 1;
  EXPECT_FALSE(histogram_from_json(short_count));
  EXPECT_FALSE(histogram_from_json(json::object()));
  EXPECT_FALSE(histogram_from_json(json("x")));
}

}  // namespace
}  // namespace dlfs
