// Dataset: one served dataset, composed from its parts in dependency order:
// manifest (what is there) -> backend reader (how to read it) -> fetcher
// (bytes this node does not hold: a peer's memory or the backend) -> planner
// and round buffers (epoch orders; memory when epochs run in rounds) ->
// storage buffer (this node's stripe in memory) -> loader (who fills it) ->
// sample reader (how every read is answered). Owns all of them; destroys in
// reverse order.
#pragma once

#include <atomic>
#include <vector>
#include <cstdint>
#include <memory>
#include <string>

#include "cache/backend_reader.h"
#include "cache/fetcher.h"
#include "cache/stripe_map.h"
#include "cache/loader.h"
#include "cache/read_ring.h"
#include "cache/round_pipeline.h"
#include "cache/sample_reader.h"
#include "cache/storage_buffer.h"
#include "fs/config/config.h"
#include "fs/dataset/audience.h"
#include "plan/planner.h"
#include "provenance/manifest.h"

namespace dlfs::fs {

// Request counters of one surface, raw/ or the epoch views (relaxed
// atomics: figures for stats, not sync).
struct ViewCounters {
  std::atomic<uint64_t> lookups{0};  // names the kernel looked up (it caches them: not one per open)
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> bytes{0};
  // Backend files handed to the kernel to read itself (FUSE passthrough,
  // while loading): reads of them never reach dlfsd, so they count here only.
  std::atomic<uint64_t> passthrough_files{0};
  // Backend files whose first MiB dlfsd started reading when the kernel
  // looked their name up (they were about to be passed through).
  std::atomic<uint64_t> prefetched_files{0};
  // Files whose bytes dlfsd put in the kernel's page cache when Python's
  // open() asked isatty() of them (fs/kernel/raw_push.h): the read
  // that followed reached no daemon, so they count here, not in requests.
  std::atomic<uint64_t> pushed_files{0};
  std::atomic<uint64_t> pushed_bytes{0};
  cache::ReadCounters reads;  // where the SampleReader found the bytes
};

// Where a dataset's served bytes came from: this node's memory, a peer's
// memory (one-sided gets), or the backend.
struct BytesBySource {
  uint64_t local = 0, remote = 0, backend = 0;
};

class Dataset;
BytesBySource bytes_by_source(const Dataset& ds);

// Where this node sits in the cluster: `nodes` stripes, this one `self`.
struct Placement {
  uint32_t nodes = 1;
  uint32_t self = 0;
};

class Dataset {
 public:
  // Scans the backend and maps memory for min(stripe, memory_budget) bytes.
  // Nothing is loaded until start_loading(). Errors name the dataset.
  static Result<std::unique_ptr<Dataset>> open(const DatasetConfig& config, uint64_t memory_budget,
                                               const DaemonConfig& daemon, Placement placement = Placement{});
  ~Dataset();

  const std::string& name() const { return config_.name; }
  const DatasetConfig& config() const { return config_; }
  const provenance::Manifest& manifest() const { return manifest_; }
  const provenance::ScanReport& scan_report() const { return scan_report_; }
  const cache::StorageBuffer& buffer() const { return *buffer_; }
  const cache::BackendReader& backend() const { return *backend_; }
  // The one read path: raw files and every epoch view read through it.
  const cache::SampleReader& reader() const { return *reader_; }
  cache::SampleReader& reader() { return *reader_; }  // to install the cluster's round reads
  const cache::Fetcher& fetcher() const { return *fetcher_; }
  cache::Fetcher& fetcher() { return *fetcher_; }
  // A digest of what the dataset is (names, sizes, format): peers must agree on it.
  uint64_t fingerprint() const { return fingerprint_; }
  cache::LoadProgress load_progress() const { return loader_->progress(); }
  int64_t root_mtime_ns() const { return root_mtime_ns_; }
  // Who may read its epoch views (fs/dataset/audience.h).
  const Audience& audience() const { return audience_; }
  double scan_seconds() const { return scan_seconds_; }  // time to build the manifest

  void start_loading() { loader_->start(); }
  // Whether raw files not in memory are passed through while it loads
  // (config `passthrough`; auto: the backend is on a local file system).
  bool passthrough() const { return passthrough_; }
  const std::string& backend_fs() const { return backend_fs_; }  // "ext4", "nfs", ...
  // Whether the load is read ahead into the page cache while readers miss
  // (config `load_staging`; auto: the backend is on a local file system).
  bool load_staging() const { return load_staging_; }
  // Some extent this node will hold is neither resident nor failed yet.
  bool loading() const { return buffer_->settled_extents() < buffer_->cacheable_extents(); }
  void stop_loading() { loader_->stop(); }

  ViewCounters& raw_counters() const { return raw_counters_; }
  ViewCounters& view_counters() const { return view_counters_; }
  const plan::Planner& planner() const { return *planner_; }
  // The round buffers when epochs run in rounds (R < 1), else null.
  cache::RoundPipeline* round_pipeline() const { return pipeline_.get(); }
  cache::Prefetcher& prefetcher() const { return *prefetcher_; }
  size_t ring_slot_bytes() const { return ring_slot_bytes_; }  // largest sample, at most 1 MiB
  uint64_t largest_sample() const { return largest_sample_; }  // bytes
  // Memory this dataset costs beyond the resident bytes (manifest and tables).
  uint64_t metadata_bytes() const;

 private:
  Dataset(DatasetConfig config, provenance::Manifest manifest) : config_(std::move(config)), manifest_(std::move(manifest)) {}
  DatasetConfig config_;
  provenance::Manifest manifest_;
  provenance::ScanReport scan_report_;
  int64_t root_mtime_ns_ = 0;
  Audience audience_;
  double scan_seconds_ = 0;
  bool passthrough_ = false;
  bool load_staging_ = false;
  std::string backend_fs_;
  std::unique_ptr<cache::BackendReader> backend_;
  std::unique_ptr<cache::Fetcher> fetcher_;
  std::unique_ptr<cache::StorageBuffer> buffer_;
  std::unique_ptr<cache::Loader> loader_;
  std::unique_ptr<cache::SampleReader> reader_;
  std::unique_ptr<plan::Planner> planner_;
  std::unique_ptr<cache::RoundPipeline> pipeline_;  // after backend_ and planner_: reads through one, plans from the other
  std::unique_ptr<cache::Prefetcher> prefetcher_;  // after planner_: stops first
  size_t ring_slot_bytes_ = 4096;
  uint64_t largest_sample_ = 0;
  uint64_t fingerprint_ = 0;
  mutable ViewCounters raw_counters_;
  mutable ViewCounters view_counters_;
};

}  // namespace dlfs::fs
