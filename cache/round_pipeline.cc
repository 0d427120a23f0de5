#include "cache/round_pipeline.h"

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <spdlog/spdlog.h>

#include "common/units.h"
#include "plan/round_placement.h"

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
  return s.base + holder_offset(sample_begin_offset, chunk);
}

bool RoundPipeline::Pin::local(uint64_t chunk) const { return holder(chunk) == p_->members_.self; }

uint32_t RoundPipeline::Pin::holder(uint64_t chunk) const { return p_->slots_[slot_].chunk_member[chunk]; }

uint64_t RoundPipeline::Pin::holder_offset(uint64_t sample_begin_offset, uint64_t chunk) const {
  return p_->slots_[slot_].chunk_offset[chunk] + (sample_begin_offset - p_->shape_.chunk_begin[chunk]);
}

uint64_t RoundPipeline::Pin::epoch() const { return p_->slots_[slot_].epoch; }
uint32_t RoundPipeline::Pin::round() const { return p_->slots_[slot_].round; }

RoundPipeline::RoundPipeline(const PlanShape& shape, const BackendReader& backend, OrderSource orders,
                             unsigned threads)
    : shape_(shape), backend_(backend), orders_(std::move(orders)), threads_(threads ? threads : 1) {}

Result<std::unique_ptr<RoundPipeline>> RoundPipeline::create(const PlanShape& shape, const BackendReader& backend,
                                                             OrderSource orders, unsigned threads,
                                                             const RoundMembers* members) {
  std::unique_ptr<RoundPipeline> p(new RoundPipeline(shape, backend, std::move(orders), threads));
  uint64_t slot = round_slot_bytes(shape);
  if (members) {
    if (members->self >= members->slot_bytes.size())
      return Status(EINVAL, "round members: this node (" + std::to_string(members->self) + ") is not one of the " +
                                std::to_string(members->slot_bytes.size()));
    p->members_ = *members;
    p->spread_ = true;
    slot = members->slot_bytes[members->self];
  } else {
    p->members_.slot_bytes = {slot};
  }
  p->slot_bytes_ = (slot + 4095) & ~4095ull;
  p->map_len_ = 2 * p->slot_bytes_;
  void* m = ::mmap(nullptr, p->map_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED)
    return Status::from_errno(errno, "cannot map two round buffers of " + format_size(p->slot_bytes_));
  ::madvise(m, p->map_len_, MADV_HUGEPAGE);
  p->map_ = static_cast<std::byte*>(m);
  for (int i = 0; i < 2; ++i) {
    p->slots_[i].base = p->map_ + i * p->slot_bytes_;
    p->slots_[i].chunk_offset.assign(shape.chunk_count(), kNoOffset);
    p->slots_[i].chunk_member.assign(shape.chunk_count(), p->members_.self);
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
  {
    std::lock_guard lk(mu_);
    for (int i = 0; i < 2; ++i) retire(i);
  }
  if (map_) ::munmap(map_, map_len_);
}

void RoundPipeline::set_slot_events(SlotEvents events) {
  std::lock_guard lk(mu_);
  slot_events_ = std::move(events);
}

void RoundPipeline::retire(int i) {
  Slot& s = slots_[i];
  if (!s.served) return;
  s.served = false;
  if (slot_events_.retired) slot_events_.retired(i);
}

uint64_t RoundPipeline::own_bytes(const EpochOrder& order, uint32_t round) const {
  const Round& r = order.rounds[round];
  if (!spread_) return r.bytes;
  auto placed = plan::place_round(shape_, r, members_.slot_bytes);
  return placed ? placed->member_bytes[members_.self] : 0;
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
  retire(i);  // peers stop reading it before its bytes change
  if (s.order)
    for (uint32_t c : s.order->rounds[s.round].chunks) s.chunk_offset[c] = kNoOffset;
  s.state = Slot::State::loading;
  s.epoch = order->epoch;
  s.round = round;
  s.order = std::move(order);
  const Round& r = s.order->rounds[round];
  uint64_t own = 0;
  if (!spread_) {
    for (uint32_t c : r.chunks) {
      s.chunk_offset[c] = own;
      s.chunk_member[c] = members_.self;
      own += shape_.chunk_bytes[c];
    }
  } else if (auto placed = plan::place_round(shape_, r, members_.slot_bytes); placed) {
    for (size_t k = 0; k < r.chunks.size(); ++k) {
      s.chunk_offset[r.chunks[k]] = placed->offset[k];
      s.chunk_member[r.chunks[k]] = placed->member[k];
    }
    own = placed->member_bytes[members_.self];
  } else {  // the planner sizes rounds to fit: never here, but never an overrun either
    spdlog::error("round {} of epoch {}: {}; its samples will be read from the backend", round, s.epoch,
                  placed.status().message());
    s.state = Slot::State::failed;
  }
  RoundEvent ev;
  ev.epoch = s.epoch;
  ev.round = round;
  ev.bytes = own;
  s.own_bytes = own;
  ev.load_start_s = now_s();
  events_.push_back(ev);
  if (events_.size() > kTimeline) {
    events_.pop_front();
    ++events_dropped_;
  }
  s.event = events_dropped_ + events_.size() - 1;
  if (s.state == Slot::State::failed) {
    events_.back().failed = true;
    cv_.notify_all();
    return;
  }
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
      if (s.chunk_member[c] != members_.self) continue;  // another member loads it
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
    if (!failed && slot_events_.ready) {
      s.served = true;
      slot_events_.ready(i, s.epoch, s.round, s.base, s.own_bytes);
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
