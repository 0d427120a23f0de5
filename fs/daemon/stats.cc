#include "fs/daemon/stats.h"

#include <unistd.h>

#include <fstream>

#include <spdlog/fmt/fmt.h>

#include "fs/daemon/plan_report.h"

namespace dlfs::fs {

uint64_t process_rss_bytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

nlohmann::json changed_files_json(uint64_t count, const std::vector<cache::ChangedFile>& files) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& f : files) list.push_back({{"path", f.path}, {"what", f.what}});
  return {{"count", count}, {"files", list}};
}

namespace {

nlohmann::json load_json(const cache::LoadProgress& p) {
  std::string state = !p.done ? "loading" : (p.extents_failed ? "failed" : "done");
  return {{"state", state},
          {"bytes_total", p.bytes_total},
          {"bytes_loaded", p.bytes_loaded},
          {"extents_total", p.extents_total},
          {"extents_loaded", p.extents_loaded},
          {"extents_failed", p.extents_failed},
          {"extents_background", p.extents_background},
          {"extents_staged", p.extents_staged},
          {"bytes_given", p.bytes_given},
          {"rate_bps", p.rate_bps},
          {"eta_s", p.eta_s},
          {"elapsed_s", p.elapsed_s}};
}

// Who may read the dataset's views, and why (fs/dataset/audience.h).
nlohmann::json access_json(const Audience& a) {
  return {{"owner", a.uid},
          {"group", a.gid},
          {"mode", fmt::format("{:04o}", a.file_mode())},
          {"readers", a.readers},
          {"why", a.why}};
}

nlohmann::json dataset_json(const Dataset& d, bool detailed, const ViewRegistry::Usage* ids) {
  const auto& m = d.manifest();
  const auto& sr = d.scan_report();
  nlohmann::json j = {
      {"name", d.name()},
      {"state", "ready"},
      {"backend", d.config().backend},
      {"format", d.config().format.format},
      {"samples", m.sample_count()},
      {"files", m.file_count()},
      {"dirs", m.dir_count()},
      {"total_bytes", m.total_bytes()},
      {"resident_bytes", d.buffer().resident_bytes()},
      {"capacity_bytes", d.buffer().capacity_bytes()},
      {"metadata_bytes", d.metadata_bytes()},
      {"scan_s", d.scan_seconds()},
      {"backend_fs", d.backend_fs()},
      {"passthrough", d.passthrough()},
      {"load_staging", d.load_staging()},
      {"skipped", {{"symlinks", sr.skipped_symlinks}, {"special", sr.skipped_special}, {"unreadable", sr.unreadable}}},
      {"load", load_json(d.load_progress())},
      {"access", access_json(d.audience())},
      {"plan", plan_summary_json(d)},
  };
  const BytesBySource by = bytes_by_source(d);
  j["bytes_by_source"] = {{"local", by.local}, {"remote", by.remote}, {"backend", by.backend}};
  j["stripe"] = {{"begin", d.buffer().range_begin()}, {"end", d.buffer().range_end()}};
  const auto& changed = d.backend().changed_files();
  j["changed_files"] = changed_files_json(changed.count(), changed.first(kStatusChangedListed));
  // Backend reads and opens that failed (a changed file's included), since start.
  j["backend_errors"] = d.backend().errors();
  const auto& gate = d.backend().gate();
  j["backend_requests"] = {{"limit", gate.limit()}, {"peak", gate.peak()}, {"waits", gate.waits()}};
  // Reads that bypass the page cache (cache/backend_reader.h, CacheUse::drop).
  j["backend_direct_io"] = {{"in_use", d.backend().direct_io()}, {"reads", d.backend().direct_reads()}};
  if (const provenance::LmdbInfo* l = m.lmdb()) {
    // Where the value locations came from, and how often a failed read check
    // made the daemon correct them from the tree (0 when the sidecar was right).
    j["lmdb"] = {{"locations_from", l->source},
                 {"why_walk", l->why_walk},
                 {"locate_s", l->seconds},
                 {"overflow_values", l->overflow_values},
                 {"value_size", m.fixed_record_size()},
                 {"repairs", m.samples_generation()}};
  }
  if (detailed) {
    const auto& rc = d.raw_counters();
    uint64_t mem = rc.reads.memory_bytes.load(std::memory_order_relaxed);
    uint64_t back = rc.reads.fetched_bytes.load(std::memory_order_relaxed);
    uint64_t requests = rc.requests.load(std::memory_order_relaxed);
    j["served"] = {{"requests", requests},
                   {"bytes", mem + back},
                   {"bytes_from_memory", mem},
                   {"bytes_from_backend", back}};
    j["views"] = {{"raw",
                   {{"lookups", rc.lookups.load(std::memory_order_relaxed)},
                    {"requests", requests},
                    {"bytes", rc.bytes.load(std::memory_order_relaxed)},
                    {"passthrough_files", rc.passthrough_files.load(std::memory_order_relaxed)},
                    {"prefetched_files", rc.prefetched_files.load(std::memory_order_relaxed)},
                    {"pushed_files", rc.pushed_files.load(std::memory_order_relaxed)},
                    {"pushed_bytes", rc.pushed_bytes.load(std::memory_order_relaxed)}}}};
    const auto& vc = d.view_counters();
    j["views"]["epochs"] = {{"lookups", vc.lookups.load(std::memory_order_relaxed)},
                            {"requests", vc.requests.load(std::memory_order_relaxed)},
                            {"bytes", vc.bytes.load(std::memory_order_relaxed)},
                            {"readahead_hits", vc.reads.ring_hits.load(std::memory_order_relaxed)},
                            {"backend_reads", vc.reads.fetched_reads.load(std::memory_order_relaxed)},
                            {"backend_bytes", vc.reads.fetched_bytes.load(std::memory_order_relaxed)},
                            // of rounds over the job's memory: chunks read from the member holding them
                            {"round_remote_bytes", vc.reads.round_remote_bytes.load(std::memory_order_relaxed)}};
    if (ids) j["views"]["ids"] = {{"in_use", ids->ids}, {"held_by_kernel", ids->pinned}, {"recycled", ids->recycled}};
    if (const cache::RoundPipeline* pipe = d.round_pipeline()) {
      nlohmann::json timeline = nlohmann::json::array();
      for (const auto& e : pipe->timeline()) {
        timeline.push_back({{"epoch", e.epoch}, {"round", e.round}, {"bytes", e.bytes},
                            {"samples", e.samples}, {"chunks", e.chunks},
                            {"load_start_s", e.load_start_s}, {"load_end_s", e.load_end_s},
                            {"first_read_s", e.first_read_s}, {"wait_s", e.wait_s}, {"held_s", e.held_s},
                            {"failed", e.failed}});
        if (pipe->spread()) {  // rounds move together: what the ranks read of it before it went, and why it went
          auto& ev = timeline.back();
          ev["expected_bytes"] = e.expected_bytes;
          ev["read_bytes"] = e.read_bytes;
          ev["released_s"] = e.released_s;
          ev["release"] = e.release;
        }
      }
      j["rounds"] = {{"slot_bytes", pipe->slot_bytes()}, {"stalls", pipe->stalls()},
                     {"stalls_held", pipe->stalls_held()}, {"timeline", timeline}};
    }
  }
  return j;
}

// A dataset that is not served yet (or failed): what the config says and why.
// Who may read it is known once it is scanned: until then its paths are for
// root and the daemon's user only.
nlohmann::json unready_json(const DatasetSlot& slot, const Reader* reader) {
  nlohmann::json j = {{"name", slot.name()}, {"state", state_name(slot.state())}, {"format", slot.format()}};
  if (reader && reader->uid != 0 && reader->uid != ::geteuid()) {
    j["restricted"] = "who may read this dataset is known once it is scanned";
    return j;
  }
  j["backend"] = slot.backend();
  if (slot.state() == DatasetSlot::State::failed) j["error"] = slot.error().message();
  return j;
}

// A dataset `reader` may not read: its name, state and who may read it; no
// path, name or figure of its backend (so not the `why`, which names a file).
nlohmann::json restricted_json(const Dataset& d) {
  nlohmann::json access = access_json(d.audience());
  access.erase("why");
  return {{"name", d.name()},
          {"state", "ready"},
          {"access", access},
          {"restricted", "this user may not read the dataset's views"}};
}

// Each seed's view traffic through the mount (the configured seed under
// epochs/, others under seeds/<s>/) with its plan's randomization level,
// and the seed and resume directory ids (docs/stats.md).
void add_seed_json(nlohmann::json& j, const Dataset& d, const Namespace& ns, size_t i) {
  const plan::Planner& p = d.planner();
  nlohmann::json seeds = nlohmann::json::array();
  for (const SeedStats::Row& r : ns.seed_rows(i, p.seed())) {
    nlohmann::json row = {{"lookups", r.lookups}, {"samples", r.samples}, {"requests", r.requests}, {"bytes", r.bytes}};
    if (r.seed) {
      row["seed"] = *r.seed;
      row["configured"] = *r.seed == p.seed();
      row["randomization_level"] = p.randomization_level(*r.seed);
      row["rounds_per_epoch"] = p.rounds_per_epoch(*r.seed);
    } else {
      row["seed"] = nullptr;  // the seeds past SeedStats::kMaxSeeds, together
    }
    seeds.push_back(std::move(row));
  }
  j["views"]["seeds"] = std::move(seeds);
  const DirContexts::Usage u = ns.dir_contexts(i).usage();
  j["views"]["contexts"] = {{"in_use", u.ids}, {"held_by_kernel", u.pinned}, {"recycled", u.recycled}};
}

}  // namespace

nlohmann::json build_stats(const DaemonFacts& facts, const std::vector<std::unique_ptr<Dataset>>& datasets,
                           bool detailed) {
  DatasetSlots slots;
  for (const auto& d : datasets) slots.push_back(DatasetSlot::borrowing(*d));
  return build_stats(facts, slots, detailed);
}

nlohmann::json build_stats(const DaemonFacts& facts, const DatasetSlots& datasets, bool detailed,
                           const Namespace* ns, const Reader* reader) {
  uint64_t resident = 0, capacity = 0, metadata = 0, samples = 0;
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < datasets.size(); ++i) {
    const DatasetSlot* slot = datasets[i].get();
    const Dataset* d = slot->get();
    if (!d) {
      list.push_back(unready_json(*slot, reader));
      continue;
    }
    if (reader && !d->audience().may_read(*reader)) {
      list.push_back(restricted_json(*d));
      continue;
    }
    resident += d->buffer().resident_bytes();
    capacity += d->buffer().capacity_bytes();
    metadata += d->metadata_bytes();
    samples += d->manifest().sample_count();
    ViewRegistry::Usage ids;
    if (ns) ids = ns->views(i).usage();
    list.push_back(dataset_json(*d, detailed, ns ? &ids : nullptr));
    if (ns && detailed) add_seed_json(list.back(), *d, *ns, i);
  }
  const uint64_t rss = process_rss_bytes();
  return {{"version", facts.version},
          {"pid", facts.pid},
          {"mountpoint", facts.mountpoint},
          {"uptime_s", facts.uptime_s},
          {"memory",
           {{"resident_bytes", resident},
            {"capacity_bytes", capacity},
            {"budget_bytes", facts.budget_bytes},
            {"metadata_bytes", metadata},
            {"metadata_bytes_per_sample", samples ? static_cast<double>(metadata) / static_cast<double>(samples) : 0.0},
            {"rss_bytes", rss},
            // Everything the process holds beyond the dataset bytes in memory.
            {"rss_beyond_resident_bytes", rss > resident ? rss - resident : 0},
            {"rss_beyond_resident_per_sample",
             samples && rss > resident ? static_cast<double>(rss - resident) / static_cast<double>(samples) : 0.0}}},
          {"datasets", list}};
}

}  // namespace dlfs::fs
