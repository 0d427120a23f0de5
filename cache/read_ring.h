// ReadRing and Prefetcher: input pipelining for one open stream (DeepIO
// III-B, the read buffer).
//
// A stream knows the order it will be read in. Samples that are resident
// (storage buffer or round buffer) are replied from there directly and never
// pass through here. Samples that are not (the backend's, while loading or
// when memory is short; later a remote stripe's) are fetched ahead of the
// reader into a ring of slots, each with a state tag:
//
//   empty -> filling (a prefetch thread reads the sample) -> ready | failed
//   ready -> empty   (the reader copied it into its reply, or moved past it)
//
// The reader takes position k with take(); it never waits for a slot that is
// empty (it reads the backend itself), only for one already filling.
// The Prefetcher is a small pool of threads shared by all streams of a
// dataset; it serves the streams round-robin, one sample (or one batch, for a
// ring that batches) at a time, so that many clients (DataLoader workers,
// ranks on one node) progress fairly.
//
// Lock order: Prefetcher::mu_ before ReadRing::mu_.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "common/status.h"

namespace dlfs::cache {

class ReadRing {
 public:
  enum class Tag : uint8_t { empty, filling, ready, failed };
  // fetch(k, dst, capacity, &len): reads the sample at stream position k into
  // dst; needs(k) says whether position k must be fetched (not resident).
  using Fetch = std::function<Status(uint64_t k, std::byte* dst, size_t capacity, size_t& len)>;
  using Needs = std::function<bool(uint64_t k)>;

  ReadRing(size_t slots, size_t slot_bytes, uint64_t count, Fetch fetch, Needs needs);

  // Batches: a prefetch thread claims up to `limit` positions at once and
  // fetches them with one call (remote samples: every get in flight at once).
  struct BatchItem {
    uint64_t k = 0;
    std::byte* dst = nullptr;
    size_t capacity = 0;
    size_t len = 0;
    Status status;
  };
  using FetchBatch = std::function<void(std::span<BatchItem> items)>;
  void set_batch(FetchBatch fetch, size_t limit);  // before the ring is shared
  size_t batch_limit() const { return batch_limit_; }

  // Reader: copies bytes [from, from + n) of position k into dst if the ring
  // has (or is filling) it; false means "not here, read it yourself".
  bool take(uint64_t k, uint64_t from, uint64_t n, std::byte* dst);
  // Reader: it is at position k now; slots behind k are freed and the window
  // [k, k + slots) is what the prefetcher should fill.
  void advance(uint64_t k);

  // Prefetcher: claims the next position to fill (tag -> filling), or false.
  bool claim(uint64_t& k, size_t& slot);
  void fill(size_t slot);  // runs fetch() for a claimed slot, publishes the tag
  // Claims up to batch_limit() positions (appended to slots); fills them in one batch.
  size_t claim_many(std::vector<size_t>& slots);
  void fill_many(const std::vector<size_t>& slots);

  bool ready(uint64_t k) const;  // position k is fetched and waiting in the ring
  // Waits until a slot is filled or `timeout` passes (opportunistic streams).
  void wait_fill(std::chrono::milliseconds timeout);
  uint64_t window_end() const;   // the reader's position + slots: what may be prefetched
  uint64_t hits() const;    // takes served from the ring
  uint64_t misses() const;  // takes that read the backend themselves

 private:
  struct Slot {
    Tag tag = Tag::empty;
    uint64_t k = ~0ull;
    size_t len = 0;
  };
  const size_t slot_bytes_;
  const uint64_t count_;
  Fetch fetch_;
  Needs needs_;
  FetchBatch fetch_batch_;
  size_t batch_limit_ = 1;
  std::unique_ptr<std::byte[]> data_;
  std::vector<Slot> slots_;
  mutable std::mutex mu_;
  std::condition_variable filled_;
  uint64_t reader_ = 0;      // the reader's position
  uint64_t next_ = 0;        // next position to consider for prefetch
  uint64_t hits_ = 0, misses_ = 0;
};

class Prefetcher {
 public:
  explicit Prefetcher(unsigned threads);
  ~Prefetcher();  // stops and joins
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;
  // Streams register while open; the prefetcher keeps a weak reference.
  void add(const std::shared_ptr<ReadRing>& ring);
  void wake();  // a stream advanced: there may be work

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::weak_ptr<ReadRing>> rings_;
  size_t turn_ = 0;  // round-robin position
  uint64_t wakeups_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace dlfs::cache
