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

void RoundPipeline::Pin::note_read(uint64_t n) const {
  p_->slots_[slot_].read_local.fetch_add(n, std::memory_order_relaxed);
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

namespace {
// Rounds in the order they are loaded: epoch by epoch, round by round.
bool before(uint64_t e1, uint32_t r1, uint64_t e2, uint32_t r2) { return e1 < e2 || (e1 == e2 && r1 < r2); }

const char* release_name(int why) {
  static const char* const names[] = {"", "read", "idle", "held"};
  return names[why];
}
}  // namespace

RoundPipeline::Release RoundPipeline::release_state(int i) {
  Slot& s = slots_[i];
  if (s.state == Slot::State::empty) return Release::read;
  if (s.state == Slot::State::loading || s.pins > 0) return Release::no;
  if (!spread_ || s.state == Slot::State::failed) return Release::read;
  const uint64_t got = s.read_local.load(std::memory_order_relaxed) +
                       (s.served && slot_events_.served_bytes ? slot_events_.served_bytes(i) : 0);
  if (got >= s.expected) return Release::read;  // every rank read its samples of it
  const double now = now_s();
  if (got != s.seen_read) {
    s.seen_read = got;
    s.progress_s = now;
  }
  if (now - std::max(s.progress_s, s.ready_s) >= kReleaseIdle) return Release::idle;
  if (now - s.ready_s >= kHoldMax) return Release::held;
  return Release::no;
}

int RoundPipeline::victim(uint64_t epoch, uint32_t round, Release* why) {
  // Prefer an empty slot, then the unpinned, settled slot holding the
  // earliest round (the one readers have most likely left behind). Spread
  // rounds: only a round before this one, once released (rounds move together).
  int best = -1;
  Release best_why = Release::read;
  for (int i = 0; i < 2; ++i) {
    const Slot& s = slots_[i];
    if (s.state == Slot::State::empty) {
      best = i;
      best_why = Release::read;
      break;
    }
    if (s.epoch == epoch && s.round == round) continue;
    if (spread_ && !before(s.epoch, s.round, epoch, round)) continue;
    // Spread: only the older of the two rounds held may go (the newer one
    // is the next to be read: idle only because nobody has reached it).
    if (spread_ && i != oldest()) continue;
    if (best >= 0 && !before(s.epoch, s.round, slots_[best].epoch, slots_[best].round)) continue;
    const Release r = release_state(i);
    if (r == Release::no) continue;
    best = i;
    best_why = r;
  }
  if (why) *why = best_why;
  return best;
}

bool RoundPipeline::held_for_others(uint64_t epoch, uint32_t round) const {
  for (const Slot& s : slots_)
    if (s.state == Slot::State::ready && s.pins == 0 && before(s.epoch, s.round, epoch, round)) return true;
  return false;
}

bool RoundPipeline::behind(uint64_t epoch, uint32_t round) const {
  if (!spread_) return false;
  for (const Slot& s : slots_)
    if (s.state != Slot::State::empty && before(epoch, round, s.epoch, s.round)) return true;
  return false;
}

int RoundPipeline::held(bool latest) const {
  int pick = -1;
  for (int i = 0; i < 2; ++i) {
    if (slots_[i].state == Slot::State::empty) continue;
    const Slot& s = slots_[i];
    if (pick < 0) {
      pick = i;
      continue;
    }
    const Slot& p = slots_[pick];
    if (latest ? before(p.epoch, p.round, s.epoch, s.round) : before(s.epoch, s.round, p.epoch, p.round)) pick = i;
  }
  return pick;
}

bool RoundPipeline::successor(std::shared_ptr<const EpochOrder>& order, uint32_t& round) const {
  const int n = newest();
  if (n < 0) return false;
  const Slot& s = slots_[n];
  if (s.round + 1 < s.order->rounds.size()) {
    order = s.order;
    round = s.round + 1;
    return true;
  }
  if (!next_epoch_order_ || next_epoch_order_->epoch != s.epoch + 1) return false;  // not built yet
  order = next_epoch_order_;
  round = 0;
  return true;
}

bool RoundPipeline::in_sequence(uint64_t epoch, uint32_t round) {
  const int n = newest();
  if (n < 0) return true;  // the first round loaded starts the sequence (a late joiner's: the current one)
  const Slot& s = slots_[n];
  const bool last = s.round + 1 >= s.order->rounds.size();
  if (last ? (epoch == s.epoch + 1 && round == 0) : (epoch == s.epoch && round == s.round + 1)) return true;
  // Within the epoch the sequence is in: after the rounds before it.
  if (epoch <= s.epoch + (last ? 1 : 0)) return false;
  // A jump (a reader opened a later epoch): only once nobody reads what is held.
  for (int i = 0; i < 2; ++i) {
    if (slots_[i].state == Slot::State::empty) continue;
    const Release r = release_state(i);
    if (r != Release::idle && r != Release::held) return false;
  }
  return true;
}

void RoundPipeline::load_wanted() {
  if (!wanted_order_) return;
  if (find(wanted_order_->epoch, wanted_round_) >= 0 || behind(wanted_order_->epoch, wanted_round_)) {
    wanted_order_ = nullptr;  // there already (or overtaken)
    return;
  }
  if (spread_ && !in_sequence(wanted_order_->epoch, wanted_round_)) {
    // Members load rounds in one sequence: the one after the newest first.
    std::shared_ptr<const EpochOrder> o;
    uint32_t r = 0;
    if (!successor(o, r)) return;
    wanted_order_ = std::move(o);
    wanted_round_ = r;
  }
  Release why;
  const int v = victim(wanted_order_->epoch, wanted_round_, &why);
  if (v < 0) return;  // not yet: the loader thread tries again
  start_load(v, std::move(wanted_order_), wanted_round_, why);
}

void RoundPipeline::want(const std::shared_ptr<const EpochOrder>& order, uint32_t round) {
  if (!wanted_order_ || before(order->epoch, round, wanted_order_->epoch, wanted_round_)) {
    wanted_order_ = order;  // the earliest round wanted: the sequence reaches it first
    wanted_round_ = round;
  }
}

void RoundPipeline::start_load(int i, std::shared_ptr<const EpochOrder> order, uint32_t round, Release why) {
  Slot& s = slots_[i];
  if (s.state == Slot::State::ready && spread_) {
    if (RoundEvent* ev = event(s.event)) {  // what the ranks had read of the round it held
      ev->read_bytes = s.read_local.load(std::memory_order_relaxed) +
                       (s.served && slot_events_.served_bytes ? slot_events_.served_bytes(i) : 0);
      ev->released_s = now_s();
      ev->release = release_name(static_cast<int>(why));
    }
  }
  retire(i);  // peers stop reading it before its bytes change
  if (s.order)
    for (uint32_t c : s.order->rounds[s.round].chunks) s.chunk_offset[c] = kNoOffset;
  s.state = Slot::State::loading;
  s.epoch = order->epoch;
  s.round = round;
  s.order = std::move(order);
  const Round& r = s.order->rounds[round];
  uint64_t own = 0;
  s.expected = 0;
  s.read_local.store(0, std::memory_order_relaxed);
  s.seen_read = 0;
  s.ready_s = s.progress_s = 0;
  if (!spread_) {
    for (uint32_t c : r.chunks) {
      s.chunk_offset[c] = own;
      s.chunk_member[c] = members_.self;
      own += shape_.chunk_bytes[c];
      s.expected += shape_.chunk_payload[c];
    }
  } else if (auto placed = plan::place_round(shape_, r, members_.slot_bytes); placed) {
    for (size_t k = 0; k < r.chunks.size(); ++k) {
      s.chunk_offset[r.chunks[k]] = placed->offset[k];
      s.chunk_member[r.chunks[k]] = placed->member[k];
      if (placed->member[k] == members_.self) s.expected += shape_.chunk_payload[r.chunks[k]];
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
  ev.samples = r.samples;
  ev.chunks = static_cast<uint32_t>(r.chunks.size());
  ev.expected_bytes = s.expected;
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
  using clock = std::chrono::steady_clock;
  const auto wait_start = clock::now();
  bool waited = false;
  double held_s = 0;  // of the wait: no slot free because other ranks still read theirs
  int slot = -1;
  for (;;) {
    if (stop_) return Pin();
    slot = find(order->epoch, round);
    if (slot >= 0 && slots_[slot].state == Slot::State::ready) break;
    if (slot >= 0 && slots_[slot].state == Slot::State::failed) return Pin();
    if (slot < 0) {
      // A round the members have moved past: its late reads go to the backend.
      if (behind(order->epoch, round)) return Pin();
      // The first round a member loads starts its sequence. A read past an
      // epoch's first round before anything was loaded is most often the
      // kernel's read-ahead overtaking the first read: wait for that a moment.
      const bool first_wait = spread_ && newest() < 0 && round > 0 && clock::now() - wait_start < kFirstRoundWait;
      if (first_wait || (spread_ && !in_sequence(order->epoch, round))) {
        // Ahead of the members' sequence: wait for the rounds before it.
        want(order, round);
        load_wanted();
        if (!may_wait_for_slot) return Pin();
        waited = true;
        const auto t0 = clock::now();
        cv_.wait_for(lk, std::chrono::milliseconds(10));
        held_s += std::chrono::duration<double>(clock::now() - t0).count();
        if (clock::now() - wait_start >= std::chrono::seconds(60)) return Pin();
        continue;
      }
      Release why;
      int v = victim(order->epoch, round, &why);
      if (v >= 0) {
        start_load(v, order, round, why);
        continue;
      }
      // A reply holding pins may still wait for a spread slot that only other
      // ranks' reads keep (they do not wait for this node's pins); a read
      // across rounds would otherwise send the next round's first samples
      // to the backend, and its holders would keep the round they miss.
      if (!may_wait_for_slot && !(spread_ && held_for_others(order->epoch, round))) return Pin();
    }
    waited = true;  // loading, or both slots busy: wait for a load or a release
    // Spread rounds are released by reads elsewhere and by time, which
    // signal nothing here: look again every few milliseconds.
    const auto step = spread_ ? std::chrono::milliseconds(10) : std::chrono::milliseconds(60000);
    const auto t0 = clock::now();
    cv_.wait_for(lk, step);
    if (slot < 0) held_s += std::chrono::duration<double>(clock::now() - t0).count();
    if (clock::now() - wait_start >= std::chrono::seconds(60)) {
      spdlog::warn("round {} of epoch {}: no round buffer after 60 s; reading from the backend", round, order->epoch);
      return Pin();
    }
  }
  Slot& s = slots_[slot];
  ++s.pins;
  if (RoundEvent* ev = event(s.event)) {
    if (ev->first_read_s == 0) ev->first_read_s = now_s();
    if (waited) ev->wait_s += std::chrono::duration<double>(clock::now() - wait_start).count();
    ev->held_s += held_s;
  }
  if (waited) ++stalls_;
  if (held_s > 0) ++stalls_held_;
  // Double buffering: the round after this one loads into the other slot.
  std::shared_ptr<const EpochOrder> next_order = order;
  uint32_t next = round + 1;
  if (next >= order->rounds.size()) {
    next = 0;
    next_order = nullptr;
    if (orders_ && find(order->epoch + 1, 0) < 0) {
      lk.unlock();  // building an epoch's order takes a while; not under the lock
      next_order = orders_(order->epoch + 1);
      lk.lock();
      if (next_order) next_epoch_order_ = next_order;
    }
  }
  if (!next_order || find(next_order->epoch, next) >= 0) return Pin(this, slot);
  if (spread_) {
    // Loaded as soon as a slot is released (load_wanted, here or by the
    // loader thread), unless a later round is wanted already.
    want(next_order, next);
    load_wanted();
    cv_.notify_all();
  } else if (int v = victim(next_order->epoch, next); v >= 0 && v != slot) {
    start_load(v, next_order, next);
  }
  return Pin(this, slot);
}

void RoundPipeline::follow(RoundSpan others) {
  {
    std::lock_guard lk(mu_);
    if (!spread_) return;
    const RoundAt& to = others.newest;
    if (follow_set_ && !before(follow_.newest.epoch, follow_.newest.round, to.epoch, to.round)) return;
    const int n = newest();
    if (n >= 0 && !before(slots_[n].epoch, slots_[n].round, to.epoch, to.round)) return;  // there already
    if (before(to.epoch, to.round, others.oldest.epoch, others.oldest.round)) others.oldest = to;
    follow_set_ = true;
    follow_ = others;
  }
  cv_.notify_all();
}

bool RoundPipeline::held_rounds(RoundSpan& held) const {
  std::lock_guard lk(mu_);
  const int n = newest(), o = oldest();
  if (n < 0) return false;
  held.oldest = {slots_[o].epoch, slots_[o].round};
  held.newest = {slots_[n].epoch, slots_[n].round};
  return true;
}

void RoundPipeline::take_follow(std::unique_lock<std::mutex>& lk) {
  if (!follow_set_) return;
  const RoundSpan f = follow_;
  follow_set_ = false;
  std::shared_ptr<const EpochOrder> from, to;
  if (orders_) {
    lk.unlock();  // building an epoch's order takes a while; not under the lock
    to = orders_(f.newest.epoch);
    from = f.oldest.epoch == f.newest.epoch ? to : orders_(f.oldest.epoch);
    lk.lock();
  }
  if (!to || !from || f.newest.round >= to->rounds.size() || f.oldest.round >= from->rounds.size()) return;
  const int n = newest();
  if (n >= 0 && !before(slots_[n].epoch, slots_[n].round, f.newest.epoch, f.newest.round)) return;  // caught up
  follow_order_ = to;
  follow_to_ = f.newest.round;
  // Holding nothing: start at the round the others still read, not the one
  // they load next (its part of that one is theirs to wait for otherwise).
  if (n < 0) want(from, f.oldest.round);
}

void RoundPipeline::load_thread() {
  std::unique_lock lk(mu_);
  for (;;) {
    // While a round waits for a slot, release conditions are looked at again
    // every few milliseconds (they change with peers' reads and with time).
    if ((wanted_order_ || follow_order_) && queue_.empty())
      cv_.wait_for(lk, std::chrono::milliseconds(10));
    else
      cv_.wait(lk, [&] { return stop_ || !queue_.empty() || wanted_order_ || follow_set_; });
    if (stop_) return;
    take_follow(lk);
    if (follow_order_) {
      // The other members are at a round this node has not loaded (its
      // readers have not asked, or it has none): load the rounds up to it
      // in sequence, or start there if nothing is held.
      const int n = newest();
      if (n >= 0 && !before(slots_[n].epoch, slots_[n].round, follow_order_->epoch, follow_to_))
        follow_order_ = nullptr;
      else if (!wanted_order_)
        want(follow_order_, follow_to_);
    }
    load_wanted();
    if (queue_.empty()) continue;
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
    s.ready_s = now_s();
    if (RoundEvent* ev = event(s.event)) {
      ev->load_end_s = s.ready_s;
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

uint64_t RoundPipeline::stalls_held() const {
  std::lock_guard lk(mu_);
  return stalls_held_;
}

}  // namespace dlfs::cache
