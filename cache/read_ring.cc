#include "cache/read_ring.h"

#include <algorithm>
#include <cstring>

namespace dlfs::cache {

ReadRing::ReadRing(size_t slots, size_t slot_bytes, uint64_t count, Fetch fetch, Needs needs)
    : slot_bytes_(slot_bytes),
      count_(count),
      fetch_(std::move(fetch)),
      needs_(std::move(needs)),
      data_(std::make_unique_for_overwrite<std::byte[]>(slots * slot_bytes)),
      slots_(slots) {}

bool ReadRing::take(uint64_t k, uint64_t from, uint64_t n, std::byte* dst) {
  std::unique_lock lk(mu_);
  Slot& s = slots_[k % slots_.size()];
  if (s.k != k || s.tag == Tag::empty || s.tag == Tag::failed) {
    ++misses_;
    return false;
  }
  filled_.wait(lk, [&] { return s.k != k || s.tag != Tag::filling; });
  if (s.k != k || s.tag != Tag::ready || from + n > s.len) {
    ++misses_;
    return false;
  }
  std::memcpy(dst, data_.get() + (k % slots_.size()) * slot_bytes_ + from, n);
  ++hits_;
  if (from + n == s.len) s.tag = Tag::empty;  // consumed whole: the slot is free
  return true;
}

void ReadRing::advance(uint64_t k) {
  std::lock_guard lk(mu_);
  if (k < reader_) {  // a seek backwards: restart the window there
    next_ = k;
  }
  reader_ = k;
  if (next_ < k) next_ = k;
  for (Slot& s : slots_)  // slots behind the reader will not be read
    if (s.tag != Tag::filling && s.k != ~0ull && s.k < k) s.tag = Tag::empty;
}

bool ReadRing::claim(uint64_t& k, size_t& slot) {
  std::lock_guard lk(mu_);
  const uint64_t end = std::min(count_, reader_ + slots_.size());
  while (next_ < end) {
    const uint64_t p = next_;
    Slot& s = slots_[p % slots_.size()];
    if (s.tag != Tag::empty && s.k != p) return false;  // the ring is full: wait for the reader
    ++next_;
    if (s.k == p && s.tag != Tag::empty) continue;
    if (!needs_(p)) continue;  // resident: replied from memory, no slot needed
    s.k = p;
    s.tag = Tag::filling;
    k = p;
    slot = p % slots_.size();
    return true;
  }
  return false;
}

void ReadRing::fill(size_t slot) {
  uint64_t k;
  {
    std::lock_guard lk(mu_);
    k = slots_[slot].k;
  }
  size_t len = 0;
  Status st = fetch_(k, data_.get() + slot * slot_bytes_, slot_bytes_, len);
  {
    std::lock_guard lk(mu_);
    Slot& s = slots_[slot];
    s.len = len;
    s.tag = st ? Tag::ready : Tag::failed;  // failed: the reader reads it itself
  }
  filled_.notify_all();
}

void ReadRing::set_batch(FetchBatch fetch, size_t limit) {
  fetch_batch_ = std::move(fetch);
  batch_limit_ = fetch_batch_ ? std::max<size_t>(1, limit) : 1;
}

size_t ReadRing::claim_many(std::vector<size_t>& slots) {
  size_t n = 0;
  uint64_t k;
  size_t slot;
  while (n < batch_limit_ && claim(k, slot)) {
    slots.push_back(slot);
    ++n;
  }
  return n;
}

void ReadRing::fill_many(const std::vector<size_t>& slots) {
  if (!fetch_batch_) {
    for (size_t slot : slots) fill(slot);
    return;
  }
  std::vector<BatchItem> items(slots.size());
  {
    std::lock_guard lk(mu_);
    for (size_t i = 0; i < slots.size(); ++i)
      items[i] = BatchItem{slots_[slots[i]].k, data_.get() + slots[i] * slot_bytes_, slot_bytes_, 0, Status()};
  }
  fetch_batch_(items);
  {
    std::lock_guard lk(mu_);
    for (size_t i = 0; i < slots.size(); ++i) {
      Slot& s = slots_[slots[i]];
      s.len = items[i].len;
      s.tag = items[i].status ? Tag::ready : Tag::failed;  // failed: the reader reads it itself
    }
  }
  filled_.notify_all();
}

bool ReadRing::ready(uint64_t k) const {
  std::lock_guard lk(mu_);
  const Slot& s = slots_[k % slots_.size()];
  return s.k == k && s.tag == Tag::ready;
}

void ReadRing::wait_fill(std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  filled_.wait_for(lk, timeout);
}

uint64_t ReadRing::window_end() const {
  std::lock_guard lk(mu_);
  return reader_ + slots_.size();
}

uint64_t ReadRing::hits() const {
  std::lock_guard lk(mu_);
  return hits_;
}

uint64_t ReadRing::misses() const {
  std::lock_guard lk(mu_);
  return misses_;
}

Prefetcher::Prefetcher(unsigned threads) {
  for (unsigned i = 0; i < (threads ? threads : 1); ++i) threads_.emplace_back([this] { run(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void Prefetcher::add(const std::shared_ptr<ReadRing>& ring) {
  std::lock_guard lk(mu_);
  std::erase_if(rings_, [](const std::weak_ptr<ReadRing>& w) { return w.expired(); });
  rings_.push_back(ring);
}

void Prefetcher::wake() {
  {
    std::lock_guard lk(mu_);
    ++wakeups_;
  }
  cv_.notify_all();
}

void Prefetcher::run() {
  std::unique_lock lk(mu_);
  uint64_t seen = 0;
  std::vector<size_t> slots;
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || wakeups_ != seen; });
    if (stop_) return;
    seen = wakeups_;
    // Round-robin over the streams, one sample each turn, until none has work.
    for (size_t idle = 0; idle < rings_.size() && !stop_;) {
      auto ring = rings_[turn_++ % rings_.size()].lock();
      slots.clear();
      if (!ring || ring->claim_many(slots) == 0) {
        ++idle;
        continue;
      }
      idle = 0;
      lk.unlock();
      ring->fill_many(slots);
      lk.lock();
      if (rings_.empty()) break;
    }
  }
}

}  // namespace dlfs::cache
