#include "fs/dataset/dataset.h"

#include "fs/dataset/backend_fs.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include <xxhash.h>

#include "common/units.h"

namespace dlfs::fs {

namespace {

// Files the load stager keeps in flight (cache/load_stager.h): of 4, 8 and
// 16, 8 read fastest here (docs/benchmark-notes.md, "Staging the load").
constexpr unsigned kStageFiles = 8;

// xxh3 over the format and every file's path and size: two nodes that scanned
// different trees (or the same tree under another format) disagree.
uint64_t manifest_fingerprint(const provenance::Manifest& m) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  auto add = [&](const void* p, size_t n) { XXH3_64bits_update(st, p, n); };
  const auto& o = m.options();
  add(o.format.data(), o.format.size() + 1);
  add(&o.record_size, sizeof o.record_size);
  add(&o.header_bytes, sizeof o.header_bytes);
  // The name and its NUL, as when group_by was text: fingerprints stay comparable.
  const std::string_view group_by = name_of(o.group_by);
  add(group_by.data(), group_by.size() + 1);
  // Directory paths once (a parent's id is below its children's: ids follow
  // path order), not once per file as file_path() would.
  std::vector<std::string> dir_paths(m.dir_count());
  for (uint32_t d = 1; d < m.dir_count(); ++d) {
    const std::string& parent = dir_paths[m.dir_parent(d)];
    dir_paths[d].reserve(parent.size() + 1 + m.dir_name(d).size());
    dir_paths[d].append(parent).append(parent.empty() ? "" : "/").append(m.dir_name(d));
  }
  std::string path;
  for (uint32_t f = 0; f < m.file_count(); ++f) {
    const std::string& dir = dir_paths[m.file_parent(f)];
    path.assign(dir).append(dir.empty() ? "" : "/").append(m.file_name(f));
    uint64_t size = m.file_size(f);
    add(path.data(), path.size() + 1);  // the same bytes as file_path(f) and its NUL
    add(&size, sizeof size);
  }
  uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

}  // namespace

Result<std::unique_ptr<Dataset>> Dataset::open(const DatasetConfig& config, uint64_t memory_budget,
                                               const DaemonConfig& daemon, Placement placement) {
  const std::string what = "dataset '" + config.name + "'";
  provenance::ScanReport report;
  auto scan_start = std::chrono::steady_clock::now();
  auto manifest = provenance::Manifest::build(config.backend, config.format, &report);
  if (!manifest) return manifest.status().with_context(what);
  double scan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - scan_start).count();

  std::unique_ptr<Dataset> ds(new Dataset(config, std::move(manifest).value()));
  ds->scan_report_ = std::move(report);
  ds->scan_seconds_ = scan_s;
  struct stat st {};
  if (::stat(config.backend.c_str(), &st) == 0)
    ds->root_mtime_ns_ = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;

  const auto audience_start = std::chrono::steady_clock::now();
  auto audience = audience_of(config, ds->manifest_);
  if (!audience) return audience.status().with_context(what);
  ds->audience_ = std::move(audience).value();
  {
    const Audience& a = ds->audience_;
    const double audience_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - audience_start).count();
    auto line = fmt::format("[{}] views readable by {} (owner {}, group {}, mode {:04o}; {:.3f}s to derive): {}",
                            config.name, a.readers, a.uid, a.gid, a.file_mode(), audience_s, a.why);
    if (a.more_open_than_backend())
      spdlog::warn("{}", line);
    else
      spdlog::info("{}", line);
  }

  auto fs_kind = fs::backend_fs(config.backend);  // the free function, not the accessor
  ds->backend_fs_ = fs_kind ? fs_kind->type : "unknown";
  const bool local_fs = fs_kind && !fs_kind->network;
  ds->passthrough_ = enabled(daemon.passthrough, local_fs);
  ds->load_staging_ = enabled(daemon.load_staging, local_fs);

  auto backend = cache::BackendReader::open(ds->manifest_, daemon.backend_requests, config.name);
  if (!backend) return backend.status().with_context(what);
  ds->backend_ = std::move(backend).value();
  ds->fingerprint_ = manifest_fingerprint(ds->manifest_);
  const cache::StripeMap stripes(ds->manifest_.total_bytes(), placement.nodes);
  ds->fetcher_ = std::make_unique<cache::Fetcher>(*ds->backend_, stripes, placement.self);
  const uint64_t stripe_begin = stripes.begin(placement.self), stripe_end = stripes.end(placement.self);

  auto planner = plan::Planner::create(config.name, config.plan, ds->manifest_, memory_budget,
                                       stripe_end - stripe_begin, placement.nodes);
  if (!planner) return planner.status();
  ds->planner_ = std::move(planner).value();
  if (ds->planner_->rounds()) {
    const plan::Planner* p = ds->planner_.get();
    // Rounds over the job's memory: this node loads its part of each round.
    std::optional<cache::RoundMembers> members;
    if (p->spread()) members = cache::RoundMembers{p->member_slots(), placement.self};
    auto pipe = cache::RoundPipeline::create(
        p->shape(), *ds->backend_, [p](uint64_t epoch) { return p->order(epoch); }, daemon.loader_threads,
        members ? &*members : nullptr);
    if (!pipe) return pipe.status().with_context(what);
    ds->pipeline_ = std::move(pipe).value();
  }

  // Read-ahead rings hold whole samples; larger ones bypass them.
  uint64_t largest = 0;
  for (uint64_t i = 0; i < ds->manifest_.sample_count(); ++i)
    largest = std::max(largest, ds->manifest_.sample(i).length);
  ds->largest_sample_ = largest;
  ds->ring_slot_bytes_ = static_cast<size_t>(std::clamp<uint64_t>(largest, 512, 1 << 20));
  ds->prefetcher_ = std::make_unique<cache::Prefetcher>(2);

  cache::StorageOptions so;
  so.extent_size = daemon.extent_size;
  so.memory_budget = ds->planner_->storage_budget();
  auto buffer = cache::StorageBuffer::create(stripe_begin, stripe_end, so);
  if (!buffer) return buffer.status().with_context(what);
  ds->buffer_ = std::move(buffer).value();
  ds->fetcher_->set_local(ds->buffer_.get());

  cache::LoaderOptions lo;
  lo.threads = daemon.loader_threads;
  lo.read_size = daemon.read_size;
  lo.label = config.name;
  lo.stage_files = ds->load_staging_ ? kStageFiles : 0;
  ds->loader_ = std::make_unique<cache::Loader>(*ds->buffer_, *ds->backend_, lo);
  ds->reader_ = std::make_unique<cache::SampleReader>(ds->manifest_, *ds->buffer_, *ds->fetcher_, ds->pipeline_.get(),
                                                      ds->pipeline_ ? &ds->planner_->shape() : nullptr);

  const auto& m = ds->manifest_;
  spdlog::info("[{}] {} format, {} samples from {} files in raw/, {} ({} fit the memory budget of {}); scanned in {:.2f}s, "
               "{:.1f} bytes of metadata per sample",
               config.name, config.format.format, m.sample_count(), m.file_count(),
               format_size(m.total_bytes()), format_size(ds->buffer_->capacity_bytes()), format_size(memory_budget),
               scan_s, m.sample_count() ? static_cast<double>(ds->metadata_bytes()) / m.sample_count() : 0.0);
  return ds;
}

BytesBySource bytes_by_source(const Dataset& ds) {
  const auto& fc = ds.fetcher().counters();
  return {ds.raw_counters().reads.memory_bytes.load(std::memory_order_relaxed) +
              ds.view_counters().reads.memory_bytes.load(std::memory_order_relaxed) +
              fc.local_bytes.load(std::memory_order_relaxed),
          fc.remote_bytes.load(std::memory_order_relaxed) +
              ds.view_counters().reads.round_remote_bytes.load(std::memory_order_relaxed),
          fc.backend_bytes.load(std::memory_order_relaxed)};
}

Dataset::~Dataset() {
  if (loader_) loader_->stop();
}

uint64_t Dataset::metadata_bytes() const {
  // Manifest tables, the per-extent state and checksum arrays, the per-file changed flags.
  return manifest_.memory_bytes() + buffer_->extent_count() * (sizeof(uint8_t) + sizeof(uint64_t)) +
         backend_->changed_files().memory_bytes() +
         sizeof(Dataset) + sizeof(cache::StorageBuffer) + sizeof(cache::Loader);
}

}  // namespace dlfs::fs
