#include "fs/daemon/metrics.h"

#include <map>
#include <string_view>

#include "common/latency_histogram.h"

namespace dlfs::fs {
namespace {

using nlohmann::json;
using prom::Labels;
using prom::Type;

const std::vector<MetricFamily> kMetricFamilies = {
    // The process.
    {"dlfs_build_info", Type::gauge, "version", "dlfsd's build: always 1, the version in a label"},
    {"process_start_time_seconds", Type::gauge, "", "When dlfsd started, in seconds since the Unix epoch"},
    {"dlfs_uptime_seconds", Type::gauge, "", "Seconds since dlfsd started"},
    {"process_resident_memory_bytes", Type::gauge, "", "dlfsd's resident set (its dataset memory included)"},
    // Memory for dataset bytes.
    {"dlfs_memory_budget_bytes", Type::gauge, "", "The configured memory budget for dataset bytes (memory_budget)"},
    {"dlfs_memory_capacity_bytes", Type::gauge, "", "Memory mapped for dataset bytes, all datasets"},
    {"dlfs_memory_resident_bytes", Type::gauge, "dataset", "Dataset bytes held in this node's memory"},
    {"dlfs_memory_metadata_bytes", Type::gauge, "", "Memory for manifests and tables, all datasets"},
    // Datasets and their load.
    {"dlfs_dataset_state", Type::gauge, "dataset,state",
     "1 for the dataset's state (scanning, joining, ready, failed), 0 for the others"},
    {"dlfs_dataset_bytes", Type::gauge, "dataset", "The dataset's size: every byte of its files"},
    {"dlfs_dataset_samples", Type::gauge, "dataset", "Samples in the dataset"},
    {"dlfs_dataset_files", Type::gauge, "dataset", "Files in the dataset"},
    {"dlfs_load_target_bytes", Type::gauge, "dataset", "Bytes this node loads into memory (its part, within the budget)"},
    {"dlfs_load_bytes", Type::gauge, "dataset", "Bytes loaded into memory so far"},
    {"dlfs_load_rate_bytes_per_second", Type::gauge, "dataset", "The load's rate since it started"},
    {"dlfs_load_complete", Type::gauge, "dataset", "1 once every extent to load is settled (resident or failed)"},
    {"dlfs_load_failed_extents", Type::gauge, "dataset",
     "Extents the load could not read (served from the backend; the log names the files)"},
    // Reads.
    {"dlfs_read_bytes_total", Type::counter, "dataset,source",
     "Bytes served (raw/, views, client socket) by where they came from: memory (this node's), peer, backend"},
    {"dlfs_view_reads_total", Type::counter, "dataset,view", "Read requests of raw/ files or epoch views"},
    {"dlfs_view_read_bytes_total", Type::counter, "dataset,view", "Bytes read from raw/ files or epoch views"},
    {"dlfs_view_lookups_total", Type::counter, "dataset,view",
     "Names of raw/ or epochs/ the kernel looked up (it caches them: not one per open)"},
    // The backend.
    {"dlfs_backend_errors_total", Type::counter, "dataset",
     "Backend reads and opens that failed (a file changed since the scan, an I/O error, a short read)"},
    {"dlfs_backend_changed_files", Type::gauge, "dataset", "Backend files found changed or gone since the scan"},
    // FUSE.
    {"dlfs_fuse_requests_total", Type::counter, "op", "FUSE requests by kind (write: every refused modifying request)"},
    {"dlfs_fuse_request_duration_seconds", Type::histogram, "op",
     "Time from a FUSE request's arrival in dlfsd to its reply (a request parked while its dataset scans included)"},
    // The cluster.
    {"dlfs_cluster_size", Type::gauge, "", "Daemons in the job, this one included (1: alone)"},
    {"dlfs_cluster_members", Type::gauge, "state",
     "Members of the job by state as this node sees them (self, connecting, up, down, refused)"},
    {"dlfs_cluster_peer_up", Type::gauge, "rank,address", "1 if this peer is up (its stripe read from its memory), else 0"},
    {"dlfs_peer_get_duration_seconds", Type::histogram, "",
     "Time of the gets from peers' memory that succeeded, from posting to the bytes in place"},
    {"dlfs_peer_get_failures_total", Type::counter, "reason",
     "Gets from peers' memory that failed (then read from the backend): timeout, stale (a round slot not holding "
     "that round), error"},
    {"dlfs_cluster_messages_total", Type::counter, "direction",
     "Membership messages (joins, heartbeats, down notices, refusals), sent or received"},
    {"dlfs_cluster_message_bytes_total", Type::counter, "direction", "Bytes of membership messages, sent or received"},
    // Local clients (the client socket).
    {"dlfs_client_open_connections", Type::gauge, "", "Client socket connections open now"},
    {"dlfs_client_batches_total", Type::counter, "", "Sample batches answered on the client socket"},
    // This endpoint.
    {"dlfs_metrics_scrapes_total", Type::counter, "", "Answers to GET /metrics (this one included)"},
};

const json& member(const json& j, std::string_view key) {
  static const json none;
  if (!j.is_object()) return none;
  auto it = j.find(key);
  return it == j.end() ? none : *it;
}

uint64_t u64(const json& j, std::string_view key) {
  const json& v = member(j, key);
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) return v.get<int64_t>() > 0 ? static_cast<uint64_t>(v.get<int64_t>()) : 0;
  if (v.is_number_float()) return v.get<double>() > 0 ? static_cast<uint64_t>(v.get<double>()) : 0;
  return 0;
}

double num(const json& j, std::string_view key) {
  const json& v = member(j, key);
  return v.is_number() ? v.get<double>() : 0.0;
}

std::string str(const json& j, std::string_view key) {
  const json& v = member(j, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

prom::Histogram to_prom(const LatencyHistogram::Snapshot& s) {
  prom::Histogram h;
  for (size_t i = 0; i < LatencyHistogram::kBoundsNs.size(); ++i) {
    h.bounds.push_back(LatencyHistogram::bound_seconds(i));
    h.cumulative.push_back(s.cumulative(i));
  }
  h.count = s.count();
  h.sum = s.sum_seconds();
  return h;
}

// A histogram of the stats, or an empty one (no observation yet).
prom::Histogram histogram_of(const json& j) {
  auto s = histogram_from_json(j);
  return to_prom(s ? *s : LatencyHistogram::Snapshot{});
}

void add_dataset(prom::PrometheusText& out, const json& d) {
  const std::string name = str(d, "name");
  if (name.empty()) return;
  const std::string state = str(d, "state");
  for (const char* s : {"scanning", "joining", "ready", "failed"})
    out.add("dlfs_dataset_state", {{"dataset", name}, {"state", s}}, uint64_t{state == s});
  if (state != "ready" || d.contains("restricted")) return;
  const Labels ds = {{"dataset", name}};
  out.add("dlfs_memory_resident_bytes", ds, u64(d, "resident_bytes"));
  out.add("dlfs_dataset_bytes", ds, u64(d, "total_bytes"));
  out.add("dlfs_dataset_samples", ds, u64(d, "samples"));
  out.add("dlfs_dataset_files", ds, u64(d, "files"));
  const json& load = member(d, "load");
  if (load.is_object()) {
    out.add("dlfs_load_target_bytes", ds, u64(load, "bytes_total"));
    out.add("dlfs_load_bytes", ds, u64(load, "bytes_loaded"));
    out.add("dlfs_load_rate_bytes_per_second", ds, num(load, "rate_bps"));
    out.add("dlfs_load_complete", ds, uint64_t{str(load, "state") != "loading"});
    out.add("dlfs_load_failed_extents", ds, u64(load, "extents_failed"));
  }
  const json& by = member(d, "bytes_by_source");
  if (by.is_object()) {
    out.add("dlfs_read_bytes_total", {{"dataset", name}, {"source", "memory"}}, u64(by, "local"));
    out.add("dlfs_read_bytes_total", {{"dataset", name}, {"source", "peer"}}, u64(by, "remote"));
    out.add("dlfs_read_bytes_total", {{"dataset", name}, {"source", "backend"}}, u64(by, "backend"));
  }
  const json& views = member(d, "views");
  for (const char* v : {"raw", "epochs"}) {
    const json& view = member(views, v);
    if (!view.is_object()) continue;
    const Labels l = {{"dataset", name}, {"view", v}};
    out.add("dlfs_view_reads_total", l, u64(view, "requests"));
    out.add("dlfs_view_read_bytes_total", l, u64(view, "bytes"));
    out.add("dlfs_view_lookups_total", l, u64(view, "lookups"));
  }
  out.add("dlfs_backend_errors_total", ds, u64(d, "backend_errors"));
  out.add("dlfs_backend_changed_files", ds, u64(member(d, "changed_files"), "count"));
}

void add_fuse(prom::PrometheusText& out, const json& fuse) {
  const json& requests = member(fuse, "requests");
  if (!requests.is_object()) return;
  const json& latency = member(fuse, "latency");
  for (const auto& [op, n] : requests.items()) {
    out.add("dlfs_fuse_requests_total", {{"op", op}}, n.is_number_unsigned() ? n.get<uint64_t>() : uint64_t{0});
    out.add_histogram("dlfs_fuse_request_duration_seconds", {{"op", op}}, histogram_of(member(latency, op)));
  }
}

void add_cluster(prom::PrometheusText& out, const json& c) {
  // Alone (no "cluster"): a cluster of one, so that dashboards show figures, not gaps.
  const bool alone = !c.is_object();
  out.add("dlfs_cluster_size", {}, alone ? uint64_t{1} : u64(c, "size"));
  std::map<std::string, uint64_t> states = {{"self", 0}, {"connecting", 0}, {"up", 0}, {"down", 0}, {"refused", 0}};
  if (alone) states["self"] = 1;
  for (const json& m : member(c, "members").is_array() ? member(c, "members") : json::array()) {
    const std::string state = str(m, "state");
    ++states[state];
    if (state == "self") continue;
    out.add("dlfs_cluster_peer_up", {{"rank", std::to_string(u64(m, "rank"))}, {"address", str(m, "address")}},
            uint64_t{state == "up"});
  }
  for (const auto& [state, n] : states) out.add("dlfs_cluster_members", {{"state", state}}, n);
  const json& gets = member(c, "gets");
  out.add_histogram("dlfs_peer_get_duration_seconds", {}, histogram_of(member(gets, "latency")));
  const json& failed = member(gets, "failed");
  for (const char* reason : {"timeout", "stale", "error"})
    out.add("dlfs_peer_get_failures_total", {{"reason", reason}}, u64(failed, reason));
  const json& membership = member(c, "membership");
  for (const char* direction : {"sent", "received"}) {
    const json& d = member(membership, direction);
    out.add("dlfs_cluster_messages_total", {{"direction", direction}}, u64(d, "messages"));
    out.add("dlfs_cluster_message_bytes_total", {{"direction", direction}}, u64(d, "bytes"));
  }
}

}  // namespace

const std::vector<MetricFamily>& metric_families() { return kMetricFamilies; }

std::string metrics_text(const json& stats, double now_unix_s) {
  prom::PrometheusText out;
  for (const MetricFamily& f : kMetricFamilies) out.family(f.name, f.type, f.help);

  out.add("dlfs_build_info", {{"version", str(stats, "version")}}, uint64_t{1});
  const double uptime = num(stats, "uptime_s");
  out.add("dlfs_uptime_seconds", {}, uptime);
  out.add("process_start_time_seconds", {}, now_unix_s - uptime);
  const json& memory = member(stats, "memory");
  if (memory.is_object()) {
    out.add("process_resident_memory_bytes", {}, u64(memory, "rss_bytes"));
    out.add("dlfs_memory_budget_bytes", {}, u64(memory, "budget_bytes"));
    out.add("dlfs_memory_capacity_bytes", {}, u64(memory, "capacity_bytes"));
    out.add("dlfs_memory_metadata_bytes", {}, u64(memory, "metadata_bytes"));
  }
  const json& datasets = member(stats, "datasets");
  if (datasets.is_array())
    for (const json& d : datasets) add_dataset(out, d);
  add_fuse(out, member(stats, "fuse"));
  add_cluster(out, member(stats, "cluster"));
  const json& client = member(stats, "client");
  if (client.is_object()) {
    out.add("dlfs_client_open_connections", {}, u64(client, "open_connections"));
    out.add("dlfs_client_batches_total", {}, u64(client, "batches"));
  }
  const json& metrics = member(stats, "metrics");
  if (metrics.is_object()) out.add("dlfs_metrics_scrapes_total", {}, u64(metrics, "scrapes"));
  return out.text();
}

}  // namespace dlfs::fs
