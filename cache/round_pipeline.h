// RoundPipeline: double-buffered rounds for datasets larger than memory
// (DeepIO's hybrid backend-memory pipeline).
//
// Two slots of slot_bytes each. A reader pins the round it reads; pinning
// round j of an epoch also starts loading the round after it (j+1, or round
// 0 of the next epoch) into the other slot, so the next round loads while
// this one is read. A round is loaded chunk by chunk with large sequential
// preads by `threads` threads. If a round cannot be had (its load failed,
// or readers are far apart and keep evicting each other), acquire() says so
// and the caller reads from the backend: slower, never wrong.
//
// Rounds over the job's memory (issue 37, plan/round_placement.h): with
// RoundMembers, a round is spread over the members' slots by place_round();
// this pipeline loads only the chunks placed on itself, and a Pin says for
// every chunk of its round which member holds it and where (a chunk held
// elsewhere is read from that member, or the backend). SlotEvents tell the
// transport when a slot's bytes may be served to peers and before they
// change.
//
// Rounds move together (spread rounds only). A member keeps a round until
// every rank has read its part of it: the bytes read from the slot (by this
// node's readers, Pin::note_read, and by peers, SlotEvents::served_bytes)
// reach the samples' bytes of its chunks. Or until nobody read it for
// kReleaseIdle (a rank that stopped, died or read those samples elsewhere),
// or it was held kHoldMax. Until then the next round cannot load into that
// slot: a fast rank waits for it (a stall "held", counted per round), a
// slow one never finds its round gone. The next round is loaded as soon as
// a slot is released, whether or not this node's readers asked yet; a round
// older than the ones held is never loaded again (its few late reads go to
// the backend).
//
// Lock order: mu_, then whatever SlotEvents' callbacks take (they run under
// mu_ and must not call back into the pipeline); loads run without mu_ and
// publish under it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "cache/backend_reader.h"
#include "cache/round_remote.h"
#include "plan/round_plan.h"

namespace dlfs::cache {

using plan::EpochOrder;
using plan::PlanShape;
using plan::Round;

// One round's life, for the per-round timeline in stats (seconds since start).
struct RoundEvent {
  uint64_t epoch = 0;
  uint32_t round = 0;
  uint64_t bytes = 0;        // loaded here
  uint64_t samples = 0;      // of the round (n_j), all members'
  uint32_t chunks = 0;       // of the round (c_j), all members'
  double load_start_s = 0, load_end_s = 0;  // load_end_s 0 while loading
  double first_read_s = 0;                  // first pin; 0 if never read
  double wait_s = 0;                        // time readers spent waiting for this load
  double held_s = 0;                        // of wait_s: for a slot other ranks still read
  bool failed = false;
  // Spread rounds: bytes of its samples this node holds, and read of them
  // (here and by peers) when the slot was released, and why: "read" (all of
  // them), "idle" (none for kReleaseIdle), "held" (kHoldMax), "" (not yet).
  uint64_t expected_bytes = 0, read_bytes = 0;
  double released_s = 0;
  const char* release = "";
};

// The job's members and their round slots, when rounds span their memory.
struct RoundMembers {
  std::vector<uint64_t> slot_bytes;  // per member (index = rank)
  uint32_t self = 0;
};

// A slot's bytes as peers may read them: `ready` once a round is loaded in
// it (its bytes stay put until `retired`), `retired` before the slot is
// reused or unmapped (after it returns, the caller must read none of it).
struct SlotEvents {
  std::function<void(int slot, uint64_t epoch, uint32_t round, const std::byte* base, uint64_t bytes)> ready;
  std::function<void(int slot)> retired;
  // Bytes peers have read from the slot since `ready` (0 if unknown).
  std::function<uint64_t(int slot)> served_bytes;
};

class RoundPipeline {
 public:
  using OrderSource = std::function<std::shared_ptr<const EpochOrder>(uint64_t epoch)>;

  // members: null for a round held whole by this node.
  static Result<std::unique_ptr<RoundPipeline>> create(const PlanShape& shape, const BackendReader& backend,
                                                       OrderSource orders, unsigned threads,
                                                       const RoundMembers* members = nullptr);
  ~RoundPipeline();
  RoundPipeline(const RoundPipeline&) = delete;
  RoundPipeline& operator=(const RoundPipeline&) = delete;

  // A pinned, loaded round. Sample bytes stay valid while the pin lives.
  class Pin {
   public:
    Pin() = default;
    Pin(Pin&& o) noexcept : p_(o.p_), slot_(o.slot_) { o.p_ = nullptr; }
    Pin& operator=(Pin&& o) noexcept;
    ~Pin() { release(); }
    explicit operator bool() const { return p_ != nullptr; }
    // Pointer to `sample`'s first byte (the sample must belong to the round,
    // its chunk held here: local()).
    const std::byte* sample_ptr(uint64_t sample_begin_offset, uint64_t chunk) const;
    // Where a chunk of the round is: whether this node holds it, which
    // member does, and a sample's first byte in that member's slot.
    bool local(uint64_t chunk) const;
    uint32_t holder(uint64_t chunk) const;
    uint64_t holder_offset(uint64_t sample_begin_offset, uint64_t chunk) const;
    uint64_t epoch() const;
    uint32_t round() const;
    int slot() const { return slot_; }
    // n bytes of a local chunk were read (when rounds move together, the
    // slot is kept until its bytes were all read).
    void note_read(uint64_t n) const;

   private:
    friend class RoundPipeline;
    Pin(RoundPipeline* p, int slot) : p_(p), slot_(slot) {}
    void release();
    RoundPipeline* p_ = nullptr;
    int slot_ = -1;
  };

  // Pins round `round` of `order`'s epoch, waiting while it loads. An empty
  // Pin means "read these samples from the backend". A caller that already
  // holds a pin passes may_wait_for_slot = false: it then never waits for
  // another reader to release a slot (two such waits would deadlock), and
  // reads from the backend instead when both slots are busy.
  Pin acquire(const std::shared_ptr<const EpochOrder>& order, uint32_t round, bool may_wait_for_slot = true);

  // Spread rounds: the other members hold rounds others.oldest through
  // others.newest (from their heartbeats). If this node is behind, its
  // rounds load up to theirs in sequence without waiting for its own readers
  // (a member whose readers are late, or who has none, or who restarted,
  // still holds its part of every round); holding none, it starts at their
  // oldest, the round their ranks still read.
  void follow(RoundSpan others);
  // The rounds held or loading (false if none): what peers follow.
  bool held_rounds(RoundSpan& held) const;
  // True if round `round` of `epoch` is loaded now (no pin: it may go soon).
  bool is_ready(uint64_t epoch, uint32_t round) const;
  // Before reads start (or with events that outlive the pipeline).
  void set_slot_events(SlotEvents events);
  uint64_t slot_bytes() const { return slot_bytes_; }
  bool spread() const { return spread_; }  // rounds over the job's members (RoundMembers)
  const std::byte* slot_base(int slot) const { return slots_[slot].base; }  // slot 0 or 1
  // Bytes of `round` of `order`'s epoch this node loads (all of it without members).
  uint64_t own_bytes(const EpochOrder& order, uint32_t round) const;
  std::vector<RoundEvent> timeline() const;  // oldest first, at most kTimeline
  uint64_t stalls() const;                   // acquires that had to wait for a load or a slot
  uint64_t stalls_held() const;              // of them: for a slot other ranks still read
  static constexpr size_t kTimeline = 256;
  // Rounds move together: a slot nobody read for kReleaseIdle is released
  // (its readers are gone or read elsewhere), one held kHoldMax as well.
  static constexpr double kReleaseIdle = 1.0;
  static constexpr double kHoldMax = 30.0;
  static constexpr std::chrono::milliseconds kFirstRoundWait{100};

 private:
  struct Slot {
    std::byte* base = nullptr;
    enum class State { empty, loading, ready, failed } state = State::empty;
    uint64_t epoch = 0;
    uint32_t round = 0;
    int pins = 0;
    std::shared_ptr<const EpochOrder> order;
    std::vector<uint64_t> chunk_offset;  // per chunk of the dataset: offset in its holder's slot, or ~0
    std::vector<uint32_t> chunk_member;  // per chunk of the round: its holder (members_.self without members)
    uint64_t own_bytes = 0;              // of the round, loaded into this slot
    bool served = false;                 // slot_events_.ready was called and retired not yet
    size_t event = 0;                    // index into events_ (absolute count)
    // Rounds move together (spread): the samples' bytes of its own chunks,
    // those read here, and when reads (here or by peers) last progressed.
    uint64_t expected = 0;
    std::atomic<uint64_t> read_local{0};
    double ready_s = 0, progress_s = 0;
    uint64_t seen_read = 0;
  };
  enum class Release { no, read, idle, held };

  RoundPipeline(const PlanShape& shape, const BackendReader& backend, OrderSource orders, unsigned threads);
  void retire(int slot);  // under mu_: tells events_ before the slot changes
  int find(uint64_t epoch, uint32_t round) const;   // under mu_
  // Under mu_: the slot to load round `round` of `epoch` into, and why it
  // may be reused; -1 if none may be now.
  int victim(uint64_t epoch, uint32_t round, Release* why = nullptr);
  Release release_state(int slot);                  // under mu_: may a spread slot be reused now?
  bool behind(uint64_t epoch, uint32_t round) const;  // under mu_: older than a round held (spread)
  // Under mu_: a slot for this round would be free once other ranks' reads
  // release it (no local pin keeps it).
  bool held_for_others(uint64_t epoch, uint32_t round) const;
  void load_wanted();                               // under mu_: starts wanted_ if a slot is free
  void want(const std::shared_ptr<const EpochOrder>& order, uint32_t round);  // under mu_
  void take_follow(std::unique_lock<std::mutex>& lk);  // under mu_ (released while an order is built)
  int held(bool latest) const;  // under mu_: the slot of the latest (else earliest) round held, or -1
  int newest() const { return held(true); }
  int oldest() const { return held(false); }
  // Under mu_: the round after the newest one (false if none is held, or
  // the next epoch's order is not built yet).
  bool successor(std::shared_ptr<const EpochOrder>& order, uint32_t& round) const;
  // Under mu_: may this round load now? Spread members load rounds in one
  // sequence (epoch by epoch, round by round), so that each holds its part of
  // every round; a reader that jumps ahead (another epoch) restarts it once
  // the rounds held are idle.
  bool in_sequence(uint64_t epoch, uint32_t round);
  void start_load(int slot, std::shared_ptr<const EpochOrder> order, uint32_t round,
                  Release why = Release::read);  // under mu_
  void load_thread();
  void load(int slot);  // without mu_
  RoundEvent* event(size_t abs);  // under mu_; nullptr if rotated out
  double now_s() const;

  const PlanShape& shape_;
  const BackendReader& backend_;
  OrderSource orders_;
  unsigned threads_;
  RoundMembers members_;  // one member, self, when the round is held whole here
  bool spread_ = false;   // rounds span the members
  SlotEvents slot_events_;
  uint64_t slot_bytes_ = 0;
  uint64_t map_len_ = 0;
  std::byte* map_ = nullptr;
  Slot slots_[2];

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> queue_;  // slots to load, in order
  bool stop_ = false;
  std::deque<RoundEvent> events_;
  size_t events_dropped_ = 0;
  uint64_t stalls_ = 0, stalls_held_ = 0;
  // Spread: the round to load next once a slot is released (the loader
  // thread retries while it is set).
  std::shared_ptr<const EpochOrder> wanted_order_;
  uint32_t wanted_round_ = 0;
  std::shared_ptr<const EpochOrder> next_epoch_order_;  // the last one acquire() built
  // follow(): the round asked for (set under mu_ by the message thread), and
  // once the loader thread built its order, the round loads go up to.
  bool follow_set_ = false;
  RoundSpan follow_;
  std::shared_ptr<const EpochOrder> follow_order_;
  uint32_t follow_to_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::thread loader_;
};

}  // namespace dlfs::cache
