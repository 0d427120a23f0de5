#include "common/prometheus_text.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace dlfs::prom {
namespace {

bool name_char(char c, bool first, bool colon) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
  return alpha || (!first && c >= '0' && c <= '9');
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

[[noreturn]] void misuse(const std::string& what) { throw std::logic_error("prometheus exposition: " + what); }

}  // namespace

const char* type_name(Type t) {
  switch (t) {
    case Type::counter: return "counter";
    case Type::gauge: return "gauge";
    case Type::histogram: return "histogram";
  }
  return "untyped";
}

bool valid_metric_name(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0, true)) return false;
  return true;
}

bool valid_label_name(std::string_view name) {
  if (name.empty() || name.substr(0, 2) == "__") return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0, false)) return false;
  return true;
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string escape_help(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Whole numbers below 2^53 print as integers (1e+06 would read back the
  // same, but counters read better as digits).
  if (value == std::floor(value) && std::fabs(value) < 9007199254740992.0)
    return fmt::format("{}", static_cast<int64_t>(value));
  return fmt::format("{}", value);  // the shortest text that reads back the same double
}

std::string label_text(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ',';
    out += labels[i].first;
    out += "=\"";
    out += escape_label_value(labels[i].second);
    out += '"';
  }
  out += '}';
  return out;
}

void PrometheusText::family(std::string name, Type type, std::string help) {
  if (!valid_metric_name(name)) misuse("'" + name + "' is not a valid metric name");
  if (type == Type::counter && !ends_with(name, "_total")) misuse("counter '" + name + "' must end in _total");
  if (type != Type::counter && ends_with(name, "_total")) misuse("only counters end in _total: '" + name + "'");
  if (index_.count(name)) misuse("family '" + name + "' declared twice");
  index_.emplace(name, families_.size());
  families_.push_back(Family{std::move(name), std::move(help), type, {}});
}

bool PrometheusText::declared(std::string_view family) const { return index_.find(family) != index_.end(); }

PrometheusText::Family& PrometheusText::find(std::string_view name, bool histogram) {
  auto it = index_.find(name);
  if (it == index_.end()) misuse("family '" + std::string(name) + "' was not declared");
  Family& f = families_[it->second];
  if ((f.type == Type::histogram) != histogram)
    misuse(std::string(histogram ? "a histogram of " : "a single value of ") + type_name(f.type) + " '" + f.name +
           "'");
  return f;
}

namespace {
void check_labels(const Labels& labels, bool histogram, const std::string& family) {
  for (size_t i = 0; i < labels.size(); ++i) {
    if (!valid_label_name(labels[i].first))
      misuse("'" + labels[i].first + "' is not a valid label name (family '" + family + "')");
    if (histogram && labels[i].first == "le") misuse("a histogram's own label 'le' given (family '" + family + "')");
    for (size_t k = 0; k < i; ++k)
      if (labels[k].first == labels[i].first)
        misuse("label '" + labels[i].first + "' given twice (family '" + family + "')");
  }
}
}  // namespace

void PrometheusText::add_line(std::string_view family, Labels labels, std::string value) {
  Family& f = find(family, false);
  check_labels(labels, false, f.name);
  std::string line = f.name + label_text(labels) + " " + value + "\n";
  f.series.push_back(Series{std::move(labels), std::move(line)});
}

void PrometheusText::add(std::string_view family, Labels labels, uint64_t value) {
  add_line(family, std::move(labels), std::to_string(value));
}

void PrometheusText::add(std::string_view family, Labels labels, double value) {
  add_line(family, std::move(labels), format_value(value));
}

void PrometheusText::add_histogram(std::string_view family, Labels labels, const Histogram& h) {
  Family& f = find(family, true);
  check_labels(labels, true, f.name);
  if (h.bounds.size() != h.cumulative.size()) misuse("histogram '" + f.name + "': as many bounds as counts needed");
  std::string lines;
  Labels with_le = labels;
  with_le.emplace_back("le", "");
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    if (i > 0 && !(h.bounds[i] > h.bounds[i - 1])) misuse("histogram '" + f.name + "': bounds must ascend");
    if (i > 0 && h.cumulative[i] < h.cumulative[i - 1]) misuse("histogram '" + f.name + "': counts must not decrease");
    with_le.back().second = format_value(h.bounds[i]);
    lines += f.name + "_bucket" + label_text(with_le) + " " + std::to_string(h.cumulative[i]) + "\n";
  }
  if (!h.cumulative.empty() && h.count < h.cumulative.back())
    misuse("histogram '" + f.name + "': count below its last bucket");
  with_le.back().second = "+Inf";
  lines += f.name + "_bucket" + label_text(with_le) + " " + std::to_string(h.count) + "\n";
  const std::string plain = label_text(labels);
  lines += f.name + "_sum" + plain + " " + format_value(h.sum) + "\n";
  lines += f.name + "_count" + plain + " " + std::to_string(h.count) + "\n";
  f.series.push_back(Series{std::move(labels), std::move(lines)});
}

std::string PrometheusText::text() const {
  std::string out;
  for (const Family& f : families_) {
    if (f.series.empty()) continue;
    std::vector<const Series*> sorted;
    for (const Series& s : f.series) sorted.push_back(&s);
    std::stable_sort(sorted.begin(), sorted.end(), [](const Series* a, const Series* b) { return a->labels < b->labels; });
    for (size_t i = 1; i < sorted.size(); ++i)
      if (sorted[i]->labels == sorted[i - 1]->labels)
        misuse("family '" + f.name + "' has the series " + label_text(sorted[i]->labels) + " twice");
    out += "# HELP " + f.name + " " + escape_help(f.help) + "\n";
    out += "# TYPE " + f.name + " " + type_name(f.type) + "\n";
    for (const Series* s : sorted) out += s->lines;
  }
  return out;
}

}  // namespace dlfs::prom
