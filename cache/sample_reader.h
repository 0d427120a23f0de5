// SampleReader: the one read path of a dataset. Every byte a reader gets,
// from the raw tree or from any epoch view, is gathered here, from the first
// of these that has it:
//
//   1. the pinned round buffer that holds the sample (epochs in rounds);
//   2. this node's resident extents (the storage buffer); while a Loader
//      with readers_load runs, a read that needs an absent extent of this
//      node claims it and loads it whole (cache/extent_fill.h), then serves
//      it from memory; one that finds it being loaded waits for it, up to
//      load_wait, then reads the backend (a stuck load never blocks a reader
//      for long). Without readers_load a miss goes straight to 4;
//   3. the stream's read-ahead ring (a view's samples fetched ahead in order);
//   4. the Fetcher: a peer's memory (one-sided get) or the backend.
//
// Memory is referenced in place (the FUSE reply makes the one copy); bytes
// from 3 and 4 land in the Gather's arena. A format whose reads are checked
// (lmdb: the page header before an overflow value) has its check bytes read
// the same way and checked before any byte of the sample is served; a failed
// check repairs the locations once and the read goes on from the corrected
// ones, bypassing round buffers and rings, which were filled from the old.
//
// No lock and no allocation when everything is resident (a round pin takes
// the pipeline's mutex once per round a reply touches). A view read that a
// read-ahead ring answers does not load extents (the ring read them already).
//
// Thread safety: all methods are const and may run concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>

#include "cache/fetcher.h"
#include "cache/gather.h"
#include "cache/read_ring.h"
#include "cache/round_pipeline.h"
#include "cache/round_remote.h"
#include "cache/storage_buffer.h"
#include "plan/round_plan.h"
#include "provenance/manifest.h"

namespace dlfs::cache {

// Where a sample is read for a view: its place in the epoch (which round
// buffer holds it) and the stream's read-ahead ring. Empty for raw reads.
struct SampleContext {
  const std::shared_ptr<const plan::EpochOrder>* order = nullptr;  // rounds: the epoch's order
  uint64_t position = 0;    // the sample's global position in that order
  ReadRing* ring = nullptr;  // the open stream's read-ahead, if any
  uint64_t k = 0;           // the sample's position in the stream (the ring's index)
};

// Where served bytes came from (relaxed atomics: figures for stats).
struct ReadCounters {
  std::atomic<uint64_t> memory_bytes{0};   // resident extents or a round buffer, referenced in place
  std::atomic<uint64_t> ring_hits{0};      // pieces served from a read-ahead ring
  std::atomic<uint64_t> round_remote_bytes{0};  // of a round another member holds, from its memory
  std::atomic<uint64_t> fetched_reads{0};  // pieces the request fetched itself (peer or backend)
  std::atomic<uint64_t> fetched_bytes{0};
  std::atomic<uint64_t> extents_loaded{0};     // absent extents a read claimed and loaded (or failed)
  std::atomic<uint64_t> load_waits{0};         // reads that waited for an extent being loaded
  std::atomic<uint64_t> load_wait_timeouts{0};  // ... and gave up on it (read the backend)
};

// How long a read waits for an extent another thread is loading before it
// reads the backend instead.
inline constexpr std::chrono::milliseconds kDefaultLoadWait{2000};

class SampleReader {
 public:
  // `rounds` and `shape` only when the epochs run in rounds (else null).
  SampleReader(const provenance::Manifest& manifest, const StorageBuffer& buffer, const Fetcher& fetcher,
               RoundPipeline* rounds, const plan::PlanShape* shape)
      : m_(manifest), buffer_(buffer), fetcher_(fetcher), rounds_(rounds), shape_(shape) {}

  // Appends bytes [offset, offset + length) of the byte space (a raw file's
  // bytes). EINVAL outside the dataset; backend errors name the file.
  Status read_bytes(uint64_t offset, uint64_t length, Gather& out, ReadCounters& counters) const;
  // Appends bytes [from, from + n) of sample `sample`.
  Status read_sample(uint64_t sample, uint64_t from, uint64_t n, const SampleContext& at, Gather& out,
                     ReadCounters& counters) const;
  // Whether the sample is in memory now (its round loaded, or its extents
  // resident): a read-ahead ring skips it.
  bool in_memory(uint64_t sample, const SampleContext& at) const;
  // Whole samples for read-ahead rings: from a peer or the backend.
  Status fetch_sample(uint64_t sample, std::span<std::byte> dst) const;
  void fetch_samples(std::span<ReadRequest> requests) const { fetcher_.read_many(requests); }

  const provenance::Manifest& manifest() const { return m_; }
  const Fetcher& fetcher() const { return fetcher_; }

  // The wait for an extent being loaded by another thread (0: never wait,
  // read the backend). Set before reads start.
  void set_load_wait(std::chrono::nanoseconds wait) { load_wait_ = wait; }
  // Where chunks of a round that other members hold are read (rounds over
  // the job's memory); null: from the backend. Set with the cluster, or
  // cleared before the remote goes.
  void set_round_remote(RoundRemote* remote) { round_remote_.store(remote, std::memory_order_release); }

 private:
  // While a Loader with readers_load runs: loads the absent extents of this
  // node that [offset, offset + length) touches, or waits for those being
  // loaded. Otherwise returns at once.
  // Afterwards they are resident, failed, or (a wait timed out) loading.
  void load_on_miss(uint64_t offset, uint64_t length, ReadCounters& c) const;
  // The round pin covering the sample (held in `out`), or null: no rounds,
  // or the round cannot be had (then the backend serves it).
  const RoundPipeline::Pin* pin(const SampleContext& at, Gather& out) const;
  // Sources 1-4 for one piece of a sample; `placed`: round buffers and rings
  // hold the current locations' bytes.
  Status gather_piece(uint64_t sample, uint64_t from, uint64_t n, const SampleContext& at, bool placed, Gather& out,
                      ReadCounters& c) const;
  // Reads and checks the bytes the format checks before `sample`.
  Status check_sample(uint64_t sample, const SampleContext& at, bool placed, Gather& out) const;

  const provenance::Manifest& m_;
  const StorageBuffer& buffer_;
  const Fetcher& fetcher_;
  RoundPipeline* rounds_;
  const plan::PlanShape* shape_;
  std::chrono::nanoseconds load_wait_ = kDefaultLoadWait;
  std::atomic<RoundRemote*> round_remote_{nullptr};
};

}  // namespace dlfs::cache
