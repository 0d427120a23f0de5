// PrometheusText: a writer of Prometheus's text exposition format 0.0.4
// (what /metrics answers; docs/metrics.md lists dlfsd's families).
//
//   # HELP dlfs_read_bytes_total Bytes served, by where they came from
//   # TYPE dlfs_read_bytes_total counter
//   dlfs_read_bytes_total{dataset="imagenet",source="memory"} 1048576
//
// Families come out in the order they were declared, each once, with their
// series sorted by label values (the output is stable from one scrape to
// the next); a family without series is left out. Label values and help
// texts are escaped as the format says (\\, \" and \n). A histogram's
// series is its cumulative `_bucket{le=...}` lines, `+Inf` last, then
// `_sum` and `_count`.
//
// Misuse is a programming error and throws std::logic_error: a name that is
// not a valid metric or label name, a counter whose name does not end in
// `_total`, a sample of a family not declared or of another type, a label
// `le` on a histogram, the same label set twice in one family.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlfs::prom {

enum class Type { counter, gauge, histogram };
const char* type_name(Type t);

// Label names and values, in the order they are written.
using Labels = std::vector<std::pair<std::string, std::string>>;

// Cumulative buckets: counts[i] observations at or below bounds[i] (both
// ascending); `count` is every observation (the +Inf bucket).
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> cumulative;
  uint64_t count = 0;
  double sum = 0;
};

class PrometheusText {
 public:
  void family(std::string name, Type type, std::string help);
  void add(std::string_view family, Labels labels, uint64_t value);
  void add(std::string_view family, Labels labels, double value);
  void add_histogram(std::string_view family, Labels labels, const Histogram& h);
  bool declared(std::string_view family) const;

  std::string text() const;

 private:
  struct Series {
    Labels labels;
    std::string lines;  // the series' sample lines, each ending in '\n'
  };
  struct Family {
    std::string name, help;
    Type type;
    std::vector<Series> series;
  };
  Family& find(std::string_view name, bool histogram);
  void add_line(std::string_view family, Labels labels, std::string value);

  std::vector<Family> families_;
  std::map<std::string, size_t, std::less<>> index_;
};

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool valid_metric_name(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved)
bool valid_label_name(std::string_view name);
// A label value with \, " and newline escaped.
std::string escape_label_value(std::string_view value);
// A HELP text with \ and newline escaped.
std::string escape_help(std::string_view help);
// A sample value: integers as digits, others in the shortest form that reads
// back the same; NaN, +Inf, -Inf as the format spells them.
std::string format_value(double value);
// {a="x",b="y"} (empty for no labels).
std::string label_text(const Labels& labels);

}  // namespace dlfs::prom
