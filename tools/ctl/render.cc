#include "tools/ctl/render.h"

#include <cstdio>
#include <sstream>
#include <vector>

#include "common/units.h"

namespace dlfs::ctl {
namespace {

using nlohmann::json;

template <typename T>
T get(const json& j, const char* key, T fallback) {
  return j.contains(key) && !j[key].is_null() ? j[key].get<T>() : fallback;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string duration(double s) {
  if (s < 60) return fmt("%.0fs", s);
  if (s < 3600) return fmt("%.0fm", s / 60);
  return fmt("%.1fh", s / 3600);
}

// A table: columns sized to their widest cell, first column left-aligned.
std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w;
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (w.size() <= i) w.push_back(0);
      w[i] = std::max(w[i], r[i].size());
    }
  std::ostringstream out;
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) {
      std::string cell = r[i];
      std::string pad(w[i] - cell.size(), ' ');
      out << (i == 0 ? cell + pad : pad + cell) << (i + 1 < r.size() ? "  " : "");
    }
    out << "\n";
  }
  return out.str();
}

std::string load_cell(const json& load) {
  std::string state = get<std::string>(load, "state", "?");
  auto total = get<uint64_t>(load, "bytes_total", 0), done = get<uint64_t>(load, "bytes_loaded", 0);
  if (state == "done") return "done in " + duration(get<double>(load, "elapsed_s", 0));
  if (state == "failed")
    return "done, " + std::to_string(get<uint64_t>(load, "extents_failed", 0)) + " extents failed (read from backend)";
  double pct = total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100;
  return fmt("%.0f%%", pct) + " at " + format_rate(get<double>(load, "rate_bps", 0)) + ", ETA " +
         duration(get<double>(load, "eta_s", 0));
}

// "name: N backend file(s) changed since the scan ...", then one line per
// listed file and how many more there are; "" when none changed.
std::string changed_files_lines(const std::string& name, const json& changed, const char* consequence) {
  const auto count = get<uint64_t>(changed, "count", 0);
  if (count == 0) return "";
  std::ostringstream out;
  out << name << ": " << count << " backend file(s) changed since the scan; " << consequence << ":\n";
  json files = changed.value("files", json::array());
  for (const auto& f : files)
    out << "  " << get<std::string>(f, "path", "?") << ": " << get<std::string>(f, "what", "?") << "\n";
  if (count > files.size()) out << "  (and " << count - files.size() << " more; the daemon's log names them)\n";
  return out.str();
}

}  // namespace

std::string render_status(const json& s) {
  std::ostringstream out;
  out << "dlfsd " << get<std::string>(s, "version", "?") << " pid " << get<int>(s, "pid", 0) << " at "
      << get<std::string>(s, "mountpoint", "?") << ", up " << duration(get<double>(s, "uptime_s", 0)) << "\n";
  if (s.contains("memory")) {
    const auto& m = s["memory"];
    out << "memory: " << format_size(get<uint64_t>(m, "resident_bytes", 0)) << " resident of "
        << format_size(get<uint64_t>(m, "capacity_bytes", 0)) << " mapped (budget "
        << format_size(get<uint64_t>(m, "budget_bytes", 0)) << "), metadata "
        << format_size(get<uint64_t>(m, "metadata_bytes", 0)) << " ("
        << fmt("%.1f", get<double>(m, "metadata_bytes_per_sample", 0)) << " B/sample), RSS "
        << format_size(get<uint64_t>(m, "rss_bytes", 0)) << "\n";
  }
  std::vector<std::vector<std::string>> rows = {{"DATASET", "FORMAT", "SAMPLES", "SIZE", "RESIDENT", "LOAD"}};
  json datasets = s.value("datasets", json::array());
  for (const auto& d : datasets)
    rows.push_back({get<std::string>(d, "name", "?"), get<std::string>(d, "format", "?"),
                    std::to_string(get<uint64_t>(d, "samples", 0)), format_size(get<uint64_t>(d, "total_bytes", 0)),
                    format_size(get<uint64_t>(d, "resident_bytes", 0)),
                    // Before its scan is done a dataset has only its state (docs/stats.md).
                    get<std::string>(d, "state", "ready") == "ready" ? load_cell(d.value("load", json::object()))
                                                                      : get<std::string>(d, "state", "?")});
  out << table(rows);
  for (const auto& d : datasets)
    if (d.contains("error")) out << get<std::string>(d, "name", "?") << ": " << get<std::string>(d, "error", "") << "\n";
  // Who may read each dataset's views, and why (fs/dataset/audience.h).
  for (const auto& d : datasets) {
    if (!d.contains("access") || !d["access"].is_object()) continue;
    const json& a = d["access"];
    out << get<std::string>(d, "name", "?") << ": views readable by " << get<std::string>(a, "readers", "?")
        << " (mode " << get<std::string>(a, "mode", "?") << ", owner " << get<uint64_t>(a, "owner", 0) << ", group "
        << get<uint64_t>(a, "group", 0) << "): " << get<std::string>(a, "why", "?") << "\n";
  }
  for (const auto& d : datasets)
    out << changed_files_lines(get<std::string>(d, "name", "?"), d.value("changed_files", json::object()),
                               "reads that need their backend bytes fail with EIO, resident bytes serve the "
                               "scanned version");
  for (const auto& d : datasets) {
    if (!d.contains("lmdb") || !d["lmdb"].is_object()) continue;
    const json& l = d["lmdb"];
    out << get<std::string>(d, "name", "?") << ": values located by " << get<std::string>(l, "locations_from", "?")
        << " in " << fmt("%.3f", get<double>(l, "locate_s", 0)) << " s";
    if (get<uint64_t>(l, "repairs", 0)) out << "; corrected from the tree " << get<uint64_t>(l, "repairs", 0) << "x after failed read checks";
    out << "\n";
    if (!get<std::string>(l, "why_walk", "").empty()) out << "  (sidecar not used: " << get<std::string>(l, "why_walk", "") << ")\n";
  }
  if (s.contains("metrics") && s["metrics"].is_object())  // the Prometheus endpoint (docs/metrics.md)
    out << "metrics: " << get<std::string>(s["metrics"], "url", "?") << " ("
        << get<uint64_t>(s["metrics"], "scrapes", 0) << " scrapes)\n";
  if (s.contains("cluster") && s["cluster"].is_object()) out << render_cluster(s["cluster"]);
  return out.str();
}

std::string render_cluster(const json& c) {
  std::ostringstream out;
  out << "\ncluster: rank " << get<uint64_t>(c, "self", 0) << " of " << get<uint64_t>(c, "size", 1) << " ("
      << get<std::string>(c, "source", "?") << "), port " << get<uint64_t>(c, "port", 0) << "; "
      << (get<bool>(c, "all_resident", false) ? "the whole dataset is resident" : "not all stripes resident yet")
      << "\n";
  if (c.contains("peers_up")) {
    const uint64_t peers = get<uint64_t>(c, "size", 1) - 1, up = get<uint64_t>(c, "peers_up", 0);
    out << "peers up: " << up << " of " << peers;
    if (c.contains("membership") && c["membership"].is_object()) {
      const json& mb = c["membership"];
      const json sent = mb.value("sent", json::object()), received = mb.value("received", json::object());
      out << "; membership messages since start: " << get<uint64_t>(sent, "messages", 0) << " sent ("
          << format_size(get<uint64_t>(sent, "bytes", 0)) << "), " << get<uint64_t>(received, "messages", 0)
          << " received (" << format_size(get<uint64_t>(received, "bytes", 0)) << ") in "
          << fmt("%.0f", get<double>(c, "up_s", 0)) << " s";
    }
    out << "\n";
  }
  std::vector<std::vector<std::string>> rows = {
      {"RANK", "ADDRESS", "STATE", "DATASET", "STRIPE", "LOADED", "LOCAL", "REMOTE", "BACKEND"}};
  json members = c.value("members", json::array());
  for (const auto& m : members) {
    std::string state = get<std::string>(m, "state", "?");
    if (state != "up" && state != "self" && m.contains("since_s")) state += fmt(" %.0f s", get<double>(m, "since_s", 0));
    if (m.contains("last_error") && state != "up") state += " (" + get<std::string>(m, "last_error", "") + ")";
    json b = m.value("bytes", json::object());
    json stripes = m.value("stripes", json::object());
    std::vector<std::string> first = {std::to_string(get<uint64_t>(m, "rank", 0)), get<std::string>(m, "address", "?"),
                                      state};
    if (stripes.empty()) stripes["-"] = json::object();
    for (const auto& [name, st] : stripes.items()) {
      uint64_t begin = get<uint64_t>(st, "begin", 0), end = get<uint64_t>(st, "end", 0);
      uint64_t ext = get<uint64_t>(st, "extents", 0), res = get<uint64_t>(st, "resident_extents", 0);
      rows.push_back({first[0], first[1], first[2], name,
                      name == "-" ? "-" : "[" + format_size(begin) + ", " + format_size(end) + ")",
                      ext ? fmt("%.0f%%", 100.0 * static_cast<double>(res) / static_cast<double>(ext)) : "-",
                      format_size(get<uint64_t>(b, "local", 0)), format_size(get<uint64_t>(b, "remote", 0)),
                      format_size(get<uint64_t>(b, "backend", 0))});
      first = {"", "", ""};
    }
  }
  out << table(rows);
  return out.str();
}

std::string render_stats(const json& s) {
  std::ostringstream out;
  out << render_status(s) << "\n";
  std::vector<std::vector<std::string>> rows = {
      {"DATASET", "VIEW", "LOOKUPS", "REQUESTS", "BYTES", "FROM MEMORY", "FROM BACKEND"}};
  json datasets = s.value("datasets", json::array());
  for (const auto& d : datasets) {
    json served = d.value("served", json::object());
    json views = d.value("views", json::object());  // items() must not outlive it
    for (const auto& [view, c] : views.items()) {
      if (!c.contains("requests")) continue;  // not a surface but about one ("ids": the view numbers)
      rows.push_back({get<std::string>(d, "name", "?"), view, std::to_string(get<uint64_t>(c, "lookups", 0)),
                      std::to_string(get<uint64_t>(c, "requests", 0)), format_size(get<uint64_t>(c, "bytes", 0)),
                      format_size(get<uint64_t>(served, "bytes_from_memory", 0)),
                      format_size(get<uint64_t>(served, "bytes_from_backend", 0))});
    }
  }
  out << table(rows);
  return out.str();
}

std::string render_verify(const json& r) {
  std::ostringstream out;
  json datasets = r.value("datasets", json::array());
  for (const auto& d : datasets) {
    std::string name = get<std::string>(d, "name", "?");
    if (get<bool>(d, "ok", false)) {
      out << "ok: " << name << ": " << get<uint64_t>(d, "extents_checked", 0) << " extents, "
          << format_size(get<uint64_t>(d, "bytes_checked", 0)) << " checked in "
          << fmt("%.2f", get<double>(d, "seconds", 0)) << "s";
      if (auto skipped = get<uint64_t>(d, "extents_skipped", 0)) out << " (" << skipped << " not resident, skipped)";
      out << "\n";
    } else {
      json mismatches = d.value("mismatches", json::array());
      if (!mismatches.empty()) out << "MISMATCH: " << name << ":\n";
      for (const auto& m : mismatches)
        out << "  extent " << get<uint64_t>(m, "extent", 0) << " (bytes " << get<uint64_t>(m, "data_offset", 0)
            << " +" << get<uint64_t>(m, "length", 0) << "): " << get<std::string>(m, "what", "?") << "\n";
      std::string changed = changed_files_lines(name, d.value("changed_files", json::object()),
                                                "memory keeps the scanned version (not corruption)");
      if (!changed.empty()) out << "CHANGED: " << changed;
    }
  }
  return out.str();
}

std::string render_plan(const json& p) {
  std::ostringstream out;
  out << "dataset " << get<std::string>(p, "name", "?") << ": " << get<uint64_t>(p, "samples", 0) << " samples\n";
  const double rl = get<double>(p, "randomization_level", 0);
  std::vector<std::vector<std::string>> rows = {
      {"seed", std::to_string(get<uint64_t>(p, "seed", 0))},
      {"remainder", get<std::string>(p, "remainder", "?")},
      {"order", get<std::string>(p, "order", "?")},
      {"shuffle ratio R", fmt("%.3f", get<double>(p, "shuffle_ratio", 0))},
      {"rounds per epoch", std::to_string(get<uint64_t>(p, "rounds", 0))},
      {"chunks", std::to_string(get<uint64_t>(p, "chunks", 0)) + " of " +
                     format_size(get<uint64_t>(p, "round_chunk_bytes", 0))},
      {"round memory", format_size(get<uint64_t>(p, "round_memory_bytes", 0))},
      {"randomization level", fmt("%.2f%%", rl * 100)},
      {"min randomization", fmt("%.2f%%", get<double>(p, "min_randomization", 0) * 100)},
      {"epoch / world size / rank", std::to_string(get<uint64_t>(p, "epoch", 0)) + " / " +
                                        std::to_string(get<uint64_t>(p, "world_size", 0)) + " / " +
                                        std::to_string(get<uint64_t>(p, "rank", 0))},
      {"samples per rank", std::to_string(get<uint64_t>(p, "samples_per_rank", 0))},
      {"view", get<std::string>(p, "view", "?") + ".tar (also .index, / and, fixed records, .bin)"},
  };
  for (const auto& r : rows) out << "  " << r[0] << std::string(28 - std::min<size_t>(27, r[0].size()), ' ') << r[1] << "\n";
  if (p.contains("first_samples") && !p["first_samples"].empty()) {
    out << "first samples:";
    for (const auto& id : p["first_samples"]) out << " " << id.get<uint64_t>();
    out << "\n";
  }
  return out.str();
}

std::string render_shuffle_report(const json& r) {
  std::ostringstream out;
  out << "dataset " << get<std::string>(r, "name", "?") << ": " << get<uint64_t>(r, "samples", 0) << " samples, "
      << get<uint64_t>(r, "epochs", 0) << " epochs measured, R = " << fmt("%.3f", get<double>(r, "shuffle_ratio", 0))
      << ", " << get<uint64_t>(r, "rounds_per_epoch", 0) << " rounds per epoch, RL (eq. 1-5) = "
      << fmt("%.2f%%", get<double>(r, "randomization_level", 0) * 100) << "\n";
  static const std::vector<std::pair<const char*, const char*>> metrics = {
      {"position_spread", "position spread (1 = uniform)"},
      {"neighbours_adjacent", "neighbours kept adjacent"},
      {"neighbours_within_1pct", "neighbours within 1% of the epoch"},
      {"rank_correlation_canonical", "|rank corr.| with canonical order"},
      {"rank_correlation_next_epoch", "|rank corr.| with next epoch"},
  };
  std::vector<std::vector<std::string>> rows = {{"metric", "this config", "full shuffle", "constant order"}};
  for (const auto& [key, label] : metrics) {
    auto cell = [&](const char* col) {
      return r.contains(col) && r[col].contains(key) ? fmt("%.4f", r[col][key].get<double>()) : std::string("?");
    };
    rows.push_back({label, cell("this_config"), cell("full_shuffle"), cell("constant_order")});
  }
  out << table(rows);
  return out.str();
}

}  // namespace dlfs::ctl
