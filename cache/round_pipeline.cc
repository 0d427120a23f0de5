#include "cache/round_pipeline.h"

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <spdlog/spdlog.h>

#include "common/units.h"

namespace dlfs::cache {

constexpr uint64_t kNoOffset = ~0ull;

RoundPipeline::Pin& RoundPipeline::Pin::operator=(Pin&& o) noexcept {
  if (this != &o) {
    release();
    p_ = o.p_;
    slot_ = o.slot_;
    o.p_ = nullptr;
  }
  return *this;
}

void RoundPipeline::Pin::release() {
  if (!p_) return;
  {
    std::lock_guard lk(p_->mu_);
    --p_->slots_[slot_].pins;
  }
  p_->cv_.notify_all();
  p_ = nullptr;
}

const std::byte* RoundPipeline::Pin::sample_ptr(uint64_t sample_begin_offset, uint64_t chunk) const {
  const Slot& s = p_->slots_[slot_];
  return s.base + s.chunk_offset[chunk] + (sample_begin_offset - p_->shape_.chunk_begin[chunk]);
}

RoundPipeline::RoundPipeline(const PlanShape& shape, const BackendReader& backend, OrderSource orders,
                             unsigned threads)
    : shape_(shape), backend_(backend), orders_(std::move(orders)), threads_(threads ? threads : 1) {}

Result<std::unique_ptr<RoundPipeline>> RoundPipeline::create(const PlanShape& shape, const BackendReader& backend,
                                                             OrderSource orders, unsigned threads) {
  std::unique_ptr<RoundPipeline> p(new RoundPipeline(shape, backend, std::move(orders), threads));
  p->slot_bytes_ = (round_slot_bytes(shape) + 4095) & ~4095ull;
  p->map_len_ = 2 * p->slot_bytes_;
  void* m = ::mmap(nullptr, p->map_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED)
    return Status::from_errno(errno, "cannot map two round buffers of " + format_size(p->slot_bytes_));
  ::madvise(m, p->map_len_, MADV_HUGEPAGE);
  p->map_ = static_cast<std::byte*>(m);
  for (int i = 0; i < 2; ++i) {
    p->slots_[i].base = p->map_ + i * p->slot_bytes_;
    p->slots_[i].chunk_offset.assign(shape.chunk_count(), kNoOffset);
  }
  p->loader_ = std::thread([raw = p.get()] { raw->load_thread(); });
  return p;
}

RoundPipeline::~RoundPipeline() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (loader_.joinable()) loader_.join();
  if (map_) ::munmap(map_, map_len_);
}

double RoundPipeline::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

RoundEvent* RoundPipeline::event(size_t abs) {
  if (abs < events_dropped_) return nullptr;
  return &events_[abs - events_dropped_];
}

int RoundPipeline::find(uint64_t epoch, uint32_t round) const {
  for (int i = 0; i < 2; ++i) {
    const Slot& s = slots_[i];
    if (s.state != Slot::State::empty && s.epoch == epoch && s.round == round) return i;
  }
  return -1;
}

int RoundPipeline::victim(uint64_t epoch, uint32_t round) const {
  // Prefer an empty slot, then the unpinned, settled slot holding the
  // earliest round (the one readers have most likely left behind).
  int best = -1;
  for (int i = 0; i < 2; ++i) {
    const Slot& s = slots_[i];
    if (s.state == Slot::State::empty) return i;
    if (s.pins > 0 || s.state == Slot::State::loading) continue;
    if (s.epoch == epoch && s.round == round) continue;
    if (best < 0 || s.epoch < slots_[best].epoch || (s.epoch == slots_[best].epoch && s.round < slots_[best].round))
      best = i;
  }
  return best;
}

void RoundPipeline::start_load(int i, std::shared_ptr<const EpochOrder> order, uint32_t round) {
  Slot& s = slots_[i];
  if (s.order)
    for (uint32_t c : s.order->rounds[s.round].chunks) s.chunk_offset[c] = kNoOffset;
  s.state = Slot::State::loading;
  s.epoch = order->epoch;
  s.round = round;
  s.order = std::move(order);
  uint64_t off = 0;
  for (uint32_t c : s.order->rounds[round].chunks) {
    s.chunk_offset[c] = off;
    off += shape_.chunk_bytes[c];
  }
  RoundEvent ev;
  ev.epoch = s.epoch;
  ev.round = round;
  ev.bytes = off;
  ev.load_start_s = now_s();
  events_.push_back(ev);
  if (events_.size() > kTimeline) {
    events_.pop_front();
    ++events_dropped_;
  }
  s.event = events_dropped_ + events_.size() - 1;
  queue_.push_back(i);
  cv_.notify_all();
}

RoundPipeline::Pin RoundPipeline::acquire(const std::shared_ptr<const EpochOrder>& order, uint32_t round,
                                          bool may_wait_for_slot) {
  std::unique_lock lk(mu_);
  const auto wait_start = std::chrono::steady_clock::now();
  bool waited = false;
  int slot = -1;
  for (;;) {
    if (stop_) return Pin();
    slot = find(order->epoch, round);
    if (slot >= 0 && slots_[slot].state == Slot::State::ready) break;
    if (slot >= 0 && slots_[slot].state == Slot::State::failed) return Pin();
    if (slot < 0) {
      int v = victim(order->epoch, round);
      if (v >= 0) {
        start_load(v, order, round);
        continue;
      }
      if (!may_wait_for_slot) return Pin();
    }
    waited = true;  // loading, or both slots busy: wait for a load or a release
    if (cv_.wait_for(lk, std::chrono::seconds(60)) == std::cv_status::timeout) {
      spdlog::warn("round {} of epoch {}: no round buffer after 60 s; reading from the backend", round, order->epoch);
      return Pin();
    }
  }
  Slot& s = slots_[slot];
  ++s.pins;
  if (RoundEvent* ev = event(s.event)) {
    if (ev->first_read_s == 0) ev->first_read_s = now_s();
    if (waited) ev->wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  }
  if (waited) ++stalls_;
  // Double buffering: the round after this one loads into the other slot.
  std::shared_ptr<const EpochOrder> next_order = order;
  uint32_t next = round + 1;
  if (next >= order->rounds.size()) {
    next_order = nullptr;
    next = 0;
  }
  if (next_order && find(next_order->epoch, next) < 0) {
    int v = victim(next_order->epoch, next);
    if (v >= 0 && v != slot) start_load(v, next_order, next);
  } else if (!next_order && orders_) {
    uint64_t e = order->epoch + 1;
    if (find(e, 0) < 0) {
      int v = victim(e, 0);
      if (v >= 0 && v != slot) {
        lk.unlock();  // building an epoch's order takes a while; not under the lock
        auto o = orders_(e);
        lk.lock();
        if (o && find(e, 0) < 0 && (v = victim(e, 0)) >= 0 && v != slot) start_load(v, o, 0);
      }
    }
  }
  return Pin(this, slot);
}

void RoundPipeline::load_thread() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    int i = queue_.front();
    queue_.pop_front();
    lk.unlock();
    load(i);
    lk.lock();
  }
}

void RoundPipeline::load(int i) {
  Slot& s = slots_[i];
  // The slot is `loading`: nobody else touches its memory or chunk table.
  const Round& r = s.order->rounds[s.round];
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto worker = [&] {
    for (size_t k = next++; k < r.chunks.size() && !failed; k = next++) {
      uint32_t c = r.chunks[k];
      Status st = backend_.read(shape_.chunk_begin[c],
                                std::span<std::byte>(s.base + s.chunk_offset[c], shape_.chunk_bytes[c]));
      if (!st) {
        spdlog::warn("round {} of epoch {}: {}; its samples will be read from the backend", s.round, s.epoch,
                     st.message());
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads_; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  {
    std::lock_guard lk(mu_);
    s.state = failed ? Slot::State::failed : Slot::State::ready;
    if (RoundEvent* ev = event(s.event)) {
      ev->load_end_s = now_s();
      ev->failed = failed;
    }
  }
  cv_.notify_all();
}

bool RoundPipeline::is_ready(uint64_t epoch, uint32_t round) const {
  std::lock_guard lk(mu_);
  int i = find(epoch, round);
  return i >= 0 && slots_[i].state == Slot::State::ready;
}

std::vector<RoundEvent> RoundPipeline::timeline() const {
  std::lock_guard lk(mu_);
  return {events_.begin(), events_.end()};
}

uint64_t RoundPipeline::stalls() const {
  std::lock_guard lk(mu_);
  return stalls_;
}

}  // namespace dlfs::cache
