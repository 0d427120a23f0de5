#include "fs/dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "common/units.h"

namespace dlfs::fs {

Result<std::unique_ptr<Dataset>> Dataset::open(const DatasetConfig& config, uint64_t memory_budget,
                                               const DaemonConfig& daemon) {
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

  auto backend = cache::BackendReader::open(ds->manifest_);
  if (!backend) return backend.status().with_context(what);
  ds->backend_ = std::move(backend).value();

  auto planner = Planner::create(config, ds->manifest_, memory_budget);
  if (!planner) return planner.status();
  ds->planner_ = std::move(planner).value();
  if (auto s = ds->planner_->start_rounds(*ds->backend_, daemon.loader_threads); !s) return s.with_context(what);

  // Read-ahead rings hold whole samples; larger ones bypass them.
  uint64_t largest = 0;
  for (uint64_t i = 0; i < ds->manifest_.sample_count(); ++i)
    largest = std::max(largest, ds->manifest_.sample(i).length);
  ds->ring_slot_bytes_ = static_cast<size_t>(std::clamp<uint64_t>(largest, 512, 1 << 20));
  ds->prefetcher_ = std::make_unique<cache::Prefetcher>(2);

  cache::StorageOptions so;
  so.extent_size = daemon.extent_size;
  so.memory_budget = ds->planner_->storage_budget();
  auto buffer = cache::StorageBuffer::create(0, ds->manifest_.total_bytes(), so);
  if (!buffer) return buffer.status().with_context(what);
  ds->buffer_ = std::move(buffer).value();

  cache::LoaderOptions lo;
  lo.threads = daemon.loader_threads;
  lo.read_size = daemon.read_size;
  lo.label = config.name;
  ds->loader_ = std::make_unique<cache::Loader>(*ds->buffer_, *ds->backend_, lo);
  ds->source_ = std::make_unique<cache::ByteSource>(*ds->buffer_, *ds->backend_);

  const auto& m = ds->manifest_;
  spdlog::info("[{}] {} format, {} samples in {} files, {} ({} fit the memory budget of {}); scanned in {:.2f}s, "
               "{:.1f} bytes of metadata per sample",
               config.name, provenance::format_name(config.format.format), m.sample_count(), m.file_count(),
               format_size(m.total_bytes()), format_size(ds->buffer_->capacity_bytes()), format_size(memory_budget),
               scan_s, m.sample_count() ? static_cast<double>(ds->metadata_bytes()) / m.sample_count() : 0.0);
  return ds;
}

Dataset::~Dataset() {
  if (loader_) loader_->stop();
}

uint64_t Dataset::metadata_bytes() const {
  // Manifest tables plus the per-extent state and checksum arrays.
  return manifest_.memory_bytes() + buffer_->extent_count() * (sizeof(uint8_t) + sizeof(uint64_t)) +
         sizeof(Dataset) + sizeof(cache::StorageBuffer) + sizeof(cache::Loader);
}

}  // namespace dlfs::fs
