// Epochs in rounds (R < 1) without a mount: a memory budget smaller than the
// dataset makes the planner cut each epoch into rounds that the
// RoundPipeline loads into two buffers. Checked through the views (every
// sample once per epoch with the right bytes, rounds within the budget,
// bytes served from the round buffers, as scenario 12 checks through FUSE)
// and on RoundPipeline itself (pins, double buffering, no wait for a slot
// while holding one).
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <functional>
#include <thread>

#include "cache_test_util.h"
#include "plan/planner.h"
#include "plan/round_plan.h"
#include "plan/round_placement.h"
#include "views_test_util.h"

namespace dlfs::fs::test {
namespace {

constexpr uint64_t kRecord = 1000, kHeader = 16, kSeed = 21;
constexpr uint64_t kBudget = 200 << 10;  // the dataset is ~600 KB: rounds of at most kBudget / 2

class RoundViewsTest : public ViewsFixture {
 protected:
  void SetUp() override {
    g_ = make_fixed_dataset(tmp_, "data", {200, 250, 150}, kRecord, kHeader, 3);
    ASSERT_GT(g_.samples.size() * kRecord, 2 * kBudget);
    PlanConfig p;
    p.seed = kSeed;
    p.round_chunk = 16 << 10;
    p.world_size = 2;
    open("data", g_, p, kBudget);
    ids_ = ids_by_member(g_);
  }
  uint64_t n() const { return g_.samples.size(); }
  Generated g_;
  std::map<std::string, uint64_t> ids_;
};

TEST_F(RoundViewsTest, RoundsFitTheBudgetAndOrderEachSampleOncePerEpoch) {
  const plan::Planner& p = ds().planner();
  ASSERT_TRUE(p.rounds()) << "a budget below the dataset must mean rounds";
  ASSERT_NE(ds().round_pipeline(), nullptr);
  EXPECT_GE(p.rounds_per_epoch(), 3u);
  EXPECT_LE(2 * ds().round_pipeline()->slot_bytes(), kBudget) << "two round buffers within the budget";
  EXPECT_EQ(p.storage_budget(), 0u) << "in rounds, the memory goes to the round buffers";
  for (uint64_t e : {0u, 1u}) {
    auto order = p.order(e);
    ASSERT_EQ(order->order.size(), n());
    EXPECT_EQ(std::set<uint64_t>(order->order.begin(), order->order.end()).size(), n()) << "a permutation";
    uint64_t next = 0;
    for (const auto& round : order->rounds) {
      EXPECT_EQ(round.first_position, next) << "rounds follow each other";
      EXPECT_LE(round.bytes, kBudget / 2);
      uint64_t sample_bytes = 0;  // from the test's own record sizes
      for (uint64_t k = 0; k < round.samples; ++k) sample_bytes += g_.samples[order->order[next + k]].bytes.size();
      EXPECT_LE(sample_bytes, kBudget / 2) << "epoch " << e << ": a round's samples exceed its buffer";
      next += round.samples;
    }
    EXPECT_EQ(next, n());
  }
  auto a = resolve(view_path(0, 2, 1, ".tar"));
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(*ns_->getxattr(a->ino, "user.dlfs.rounds"), std::to_string(p.rounds_per_epoch()));
}

// Both ranks of W = 2, two epochs, read in odd requests: each rank's members
// are its slice of the epoch's order, the bytes are the records the test
// wrote, and between them the ranks serve every sample exactly once.
TEST_F(RoundViewsTest, ViewsReadInRoundsServeEverySampleOnceWithItsBytes) {
  ASSERT_EQ(n() % 2, 0u) << "no padding: exactly once across ranks";
  for (uint64_t e : {0u, 1u}) {
    const auto order = ds().planner().order(e);
    std::vector<int> seen(n(), 0);
    for (uint32_t r = 0; r < 2; ++r) {
      auto tar = read_tar(e, 2, r, 4093);
      ASSERT_EQ(tar.size(), n() / 2);
      for (size_t k = 0; k < tar.size(); ++k) {
        auto it = ids_.find(tar[k].name);
        ASSERT_NE(it, ids_.end()) << tar[k].name;
        EXPECT_EQ(it->second, order->order[r + 2 * k]) << "rank " << r << " position " << k;
        ASSERT_EQ(tar[k].data, g_.samples[it->second].bytes) << tar[k].name;
        ++seen[it->second];
      }
    }
    for (uint64_t i = 0; i < n(); ++i) EXPECT_EQ(seen[i], 1) << "epoch " << e << " sample " << i;
  }
  const auto& reads = ds().view_counters().reads;
  EXPECT_GT(reads.memory_bytes.load(), 0u) << "no byte came from a round buffer";
  const auto timeline = ds().round_pipeline()->timeline();
  uint64_t loaded = 0;
  for (const auto& ev : timeline) {
    EXPECT_FALSE(ev.failed) << "round " << ev.round << " of epoch " << ev.epoch;
    EXPECT_LE(ev.bytes, kBudget / 2);
    loaded += ev.load_end_s > 0;
  }
  EXPECT_GE(loaded, ds().planner().rounds_per_epoch()) << "each round of an epoch was loaded";
}

// Two trainers reading their ranks at once share the two buffers; whatever
// they evict from each other, the bytes stay right.
TEST_F(RoundViewsTest, RanksReadConcurrentlyGetTheirBytes) {
  const auto order = ds().planner().order(2);
  std::vector<std::vector<TarMember>> tars(2);
  {
    std::vector<std::thread> readers;
    for (uint32_t r = 0; r < 2; ++r) readers.emplace_back([&, r] { tars[r] = read_tar(2, 2, r, 65536 + 7); });
    for (auto& t : readers) t.join();
  }
  for (uint32_t r = 0; r < 2; ++r) {
    ASSERT_EQ(tars[r].size(), n() / 2);
    for (size_t k = 0; k < tars[r].size(); ++k) {
      const Sample& s = g_.samples[order->order[r + 2 * k]];
      ASSERT_EQ(tars[r][k].name, s.member);
      ASSERT_EQ(tars[r][k].data, s.bytes);
    }
  }
}

// Rounds over the job's memory (issue 37): with three nodes whose budgets
// together hold less than the dataset, R is the aggregate's (three times a
// node's), every round fits the members' slots, and what
// members must agree on changes with the slots.
TEST_F(RoundViewsTest, ThreeNodesPlanRoundsOverTheirAggregateMemory) {
  const auto& m = ds().manifest();
  PlanConfig pc;
  pc.seed = kSeed;
  pc.round_chunk = 4 << 10;          // small against a slot: each member loses at most one chunk of it
  const uint64_t budget = 64 << 10;  // three nodes: 192 KiB of ~300 KB
  auto one = plan::Planner::create("ds", pc, m, budget, m.total_bytes(), 1);
  auto three = plan::Planner::create("ds", pc, m, budget, m.total_bytes() / 3 + 1, 3);
  ASSERT_TRUE(one.is_ok() && three.is_ok());
  EXPECT_FALSE((*one)->spread());
  ASSERT_TRUE((*three)->spread());
  EXPECT_EQ((*three)->member_slots(), std::vector<uint64_t>(3, budget / 2));
  EXPECT_EQ((*three)->round_memory(), budget) << "two slots of half the budget on each node";
  const uint64_t largest = plan::largest_chunk((*three)->shape());
  EXPECT_EQ((*three)->shape().round_bytes, 3 * (budget / 2 - largest));
  EXPECT_GT((*three)->ratio(), 2 * (*one)->ratio()) << "R of three nodes' memory, not one's";
  EXPECT_LT((*three)->rounds_per_epoch(), (*one)->rounds_per_epoch());
  for (uint64_t e : {0u, 1u}) {
    auto order = (*three)->order(e);
    EXPECT_EQ(std::set<uint64_t>(order->order.begin(), order->order.end()).size(), n()) << "a permutation";
    for (const auto& r : order->rounds)
      EXPECT_TRUE(plan::place_round((*three)->shape(), r, (*three)->member_slots()).is_ok()) << "epoch " << e;
  }
  auto other = plan::Planner::create("ds", pc, m, budget / 2, m.total_bytes() / 3 + 1, 3);
  ASSERT_TRUE(other.is_ok());
  EXPECT_NE((*three)->round_key(7), (*other)->round_key(7)) << "members with other budgets place rounds otherwise";
  EXPECT_EQ((*three)->round_key(7), (*three)->round_key(7));
  EXPECT_NE((*three)->round_key(7), (*three)->round_key(8)) << "another dataset";
  // An explicit R the aggregate cannot hold is refused, naming what would.
  pc.shuffle_ratio = 0.9;
  auto too_big = plan::Planner::create("ds", pc, m, budget, m.total_bytes() / 3 + 1, 3);
  ASSERT_FALSE(too_big.is_ok());
  EXPECT_NE(too_big.status().message().find("over 3 nodes, but their memory holds rounds of"), std::string::npos)
      << too_big.status().message();
}

// RoundPipeline on its own, over a `files` dataset scanned by the cache
// test helpers (expected bytes read with plain file reads).
class RoundPipelineTest : public ::dlfs::test::TempDirTest {
 protected:
  void SetUp() override {
    cache::test::make_dataset(tmp_.path(), 60, 8000, 11);
    d_ = cache::test::scan(tmp_.path());
    ASSERT_TRUE(d_ && d_->reader);
    const auto& m = d_->manifest;
    shape_ = plan::make_plan_shape(
        m.sample_count(), 16 << 10, 48 << 10, [&](uint64_t i) { return m.sample_data_offset(i); },
        [&](uint64_t i) { return m.sample(i).length; });
    ASSERT_FALSE(shape_.single_round());
    auto p = cache::RoundPipeline::create(shape_, *d_->reader, [this](uint64_t e) { return order(e); }, 2);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    pipe_ = std::move(p).value();
    order0_ = order(0);
    ASSERT_GE(order0_->rounds.size(), 3u);
  }
  std::shared_ptr<const plan::EpochOrder> order(uint64_t e) const { return plan::build_epoch_order(shape_, 5, e); }
  // Every sample of `round` read through the pin equals the byte space.
  void expect_round_bytes(const cache::RoundPipeline::Pin& pin, uint32_t round) {
    const auto& r = order0_->rounds[round];
    for (uint64_t k = r.first_position; k < r.first_position + r.samples; ++k) {
      const uint64_t s = order0_->order[k];
      const uint64_t off = d_->manifest.sample_data_offset(s), len = d_->manifest.sample(s).length;
      const std::byte* p = pin.sample_ptr(off, shape_.chunk_of(s));
      ASSERT_TRUE(std::equal(p, p + len, d_->bytes.begin() + static_cast<long>(off))) << "sample " << s;
    }
  }
  bool load_started(uint64_t epoch, uint32_t round) const {
    for (const auto& ev : pipe_->timeline())
      if (ev.epoch == epoch && ev.round == round) return true;
    return false;
  }

  std::unique_ptr<cache::test::Dataset> d_;
  plan::PlanShape shape_;
  std::unique_ptr<cache::RoundPipeline> pipe_;  // after shape_ and d_: refers to both
  std::shared_ptr<const plan::EpochOrder> order0_;
};

// Pinning round j serves its samples and starts loading the round after it
// (after the last round: round 0 of the next epoch).
TEST_F(RoundPipelineTest, PinningARoundServesItAndLoadsTheNext) {
  const auto rounds = static_cast<uint32_t>(order0_->rounds.size());
  for (uint32_t j = 0; j < rounds; ++j) {
    auto pin = pipe_->acquire(order0_, j);
    ASSERT_TRUE(pin) << "round " << j;
    EXPECT_TRUE(pipe_->is_ready(0, j));
    expect_round_bytes(pin, j);
    if (j + 1 < rounds) EXPECT_TRUE(load_started(0, j + 1)) << "round " << j + 1 << " not loading";
    else EXPECT_TRUE(load_started(1, 0)) << "the next epoch's first round not loading";
  }
  for (const auto& ev : pipe_->timeline()) EXPECT_LE(ev.bytes, pipe_->slot_bytes());
}

// A reader that holds a pin and finds both buffers pinned gets no pin (it
// reads the backend) instead of waiting for a slot; once a buffer is
// released the round loads there.
TEST_F(RoundPipelineTest, AReaderHoldingAPinNeverWaitsForASlot) {
  auto p0 = pipe_->acquire(order0_, 0);
  auto p1 = pipe_->acquire(order0_, 1);
  ASSERT_TRUE(p0 && p1);
  EXPECT_FALSE(pipe_->acquire(order0_, 2, /*may_wait_for_slot=*/false)) << "both buffers are pinned";
  p0 = cache::RoundPipeline::Pin();  // release round 0
  auto p2 = pipe_->acquire(order0_, 2, false);
  ASSERT_TRUE(p2);
  expect_round_bytes(p2, 2);
  expect_round_bytes(p1, 1);  // the other buffer was left alone
}

// Rounds over the job's memory (issue 37): three members with equal slots,
// this one member 1. The shape's rounds are sized for the three slots; the
// pipeline loads only the chunks placed on it, says who holds the others,
// and tells the transport when a slot may be served and before it changes.
class SpreadRoundPipelineTest : public RoundPipelineTest {
 protected:
  void SetUp() override {
    RoundPipelineTest::SetUp();
    pipe_.reset();
    members_.slot_bytes = {40 << 10, 40 << 10, 40 << 10};
    members_.self = 1;
    shape_.round_bytes = plan::aggregate_round_bytes(members_.slot_bytes, plan::largest_chunk(shape_));
    order0_ = order(0);
    ASSERT_GE(order0_->rounds.size(), 2u);
    auto p = cache::RoundPipeline::create(shape_, *d_->reader, [this](uint64_t e) { return order(e); }, 2, &members_);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    pipe_ = std::move(p).value();
    pipe_->set_slot_events({[this](int slot, uint64_t epoch, uint32_t round, const std::byte*, uint64_t bytes) {
                              std::lock_guard lk(mu_);
                              log_.push_back("ready " + std::to_string(slot) + " " + std::to_string(epoch) + "/" +
                                             std::to_string(round) + " " + std::to_string(bytes));
                            },
                            [this](int slot) {
                              std::lock_guard lk(mu_);
                              log_.push_back("retired " + std::to_string(slot));
                              served_[slot] = 0;
                            },
                            [this](int slot) { return served_[slot].load(); }});
  }
  // The pipeline's events write to the members below: it goes first.
  void TearDown() override { pipe_.reset(); }
  std::vector<std::string> log() {
    std::lock_guard lk(mu_);
    return log_;
  }
  const cache::RoundEvent* event(uint64_t epoch, uint32_t round) {
    timeline_ = pipe_->timeline();
    for (const auto& ev : timeline_)
      if (ev.epoch == epoch && ev.round == round) return &ev;
    return nullptr;
  }
  // Every byte of the pinned round this member holds was read.
  void note_all(const cache::RoundPipeline::Pin& pin) {
    const cache::RoundEvent* ev = event(pin.epoch(), pin.round());
    ASSERT_NE(ev, nullptr);
    pin.note_read(ev->expected_bytes);
  }
  // Waits up to `limit` for round `round` of epoch 0 to start loading.
  bool wait_load(uint32_t round, std::chrono::milliseconds limit) {
    for (auto end = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < end;) {
      if (load_started(0, round)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return load_started(0, round);
  }
  cache::RoundMembers members_;
  std::mutex mu_;
  std::vector<std::string> log_;
  std::atomic<uint64_t> served_[2] = {0, 0};  // what "peers" read of each slot (SlotEvents::served_bytes)
  std::vector<cache::RoundEvent> timeline_;
};

// Rounds move together: a round's slot is reused only once its samples'
// bytes were all read, here (Pin::note_read) and by peers (served_bytes),
// or after nobody read it for kReleaseIdle; the next round loads then
// without being asked again, and a round the member has moved past is
// never loaded again.
TEST_F(SpreadRoundPipelineTest, ARoundIsKeptUntilEveryRankReadItsPart) {
  ASSERT_GE(order0_->rounds.size(), 4u);
  auto p0 = pipe_->acquire(order0_, 0);
  ASSERT_TRUE(p0);
  const int slot0 = p0.slot();
  ASSERT_TRUE(wait_load(1, std::chrono::milliseconds(500))) << "round 1 loads into the empty slot";
  p0 = cache::RoundPipeline::Pin();
  auto p1 = pipe_->acquire(order0_, 1);
  ASSERT_TRUE(p1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(load_started(0, 2)) << "round 0 was released before its bytes were read";
  const cache::RoundEvent* ev0 = event(0, 0);
  ASSERT_NE(ev0, nullptr);
  const uint64_t expected = ev0->expected_bytes;
  ASSERT_GT(expected, 0u);
  {
    auto again = pipe_->acquire(order0_, 0);  // this node's ranks read half, peers the rest
    ASSERT_TRUE(again);
    again.note_read(expected / 2);
  }
  served_[slot0] = expected - expected / 2 - 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(load_started(0, 2)) << "one byte short of read, round 0 was released";
  served_[slot0] += 1;
  ASSERT_TRUE(wait_load(2, std::chrono::milliseconds(500))) << "round 0 read whole, round 2 did not load";
  ev0 = event(0, 0);
  ASSERT_NE(ev0, nullptr);
  EXPECT_STREQ(ev0->release, "read");
  EXPECT_EQ(ev0->read_bytes, expected);

  // Round 1: nobody reads it. Round 3 (wanted once round 2 is pinned) loads
  // after kReleaseIdle.
  p1 = cache::RoundPipeline::Pin();
  auto p2 = pipe_->acquire(order0_, 2);
  ASSERT_TRUE(p2);
  ASSERT_TRUE(wait_load(3, std::chrono::milliseconds(3000))) << "an unread round was kept forever";
  const cache::RoundEvent* ev1 = event(0, 1);
  ASSERT_NE(ev1, nullptr);
  EXPECT_GE(ev1->released_s - ev1->load_end_s, cache::RoundPipeline::kReleaseIdle) << "released before it was idle";
  EXPECT_STREQ(ev1->release, "idle");
  EXPECT_EQ(ev1->read_bytes, 0u);

  // Round 0 again, now behind the rounds held: the backend reads it.
  EXPECT_FALSE(pipe_->acquire(order0_, 0));
  int loads0 = 0;
  for (const auto& ev : pipe_->timeline()) loads0 += ev.epoch == 0 && ev.round == 0;
  EXPECT_EQ(loads0, 1) << "round 0 was loaded again";
}

// A member whose readers are not there (late, none, restarted) follows the
// others' newest round: with nothing held it starts there, then loads the
// rounds after it in sequence as the others move on.
TEST_F(SpreadRoundPipelineTest, AMemberWithoutReadersFollowsTheOthers) {
  ASSERT_GE(order0_->rounds.size(), 4u);
  pipe_->follow({{0, 1}, {0, 2}});  // the others read round 1 and load round 2
  ASSERT_TRUE(wait_load(2, std::chrono::milliseconds(1000))) << "rounds 1 and 2 not loaded on the others' word";
  EXPECT_FALSE(load_started(0, 0)) << "it starts at the round the others read, not at the epoch's first";
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
       std::chrono::steady_clock::now() < end && !pipe_->is_ready(0, 2);)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  cache::RoundSpan held;
  ASSERT_TRUE(pipe_->held_rounds(held));
  EXPECT_EQ(held, (cache::RoundSpan{{0, 1}, {0, 2}}));
  pipe_->follow({{0, 2}, {0, 3}});  // the others moved on: round 3 loads once round 1 is read
  // Round 1's slot goes once the others read its bytes (here: all at once).
  const cache::RoundEvent* ev1 = event(0, 1);
  ASSERT_NE(ev1, nullptr);
  for (int slot = 0; slot < 2; ++slot) served_[slot] = ev1->expected_bytes;
  ASSERT_TRUE(wait_load(3, std::chrono::milliseconds(1000))) << "round 3 not loaded after round 1 was read";
  std::vector<uint32_t> loaded;
  for (const auto& ev : pipe_->timeline())
    if (ev.epoch == 0) loaded.push_back(ev.round);
  EXPECT_EQ(loaded, (std::vector<uint32_t>{1, 2, 3}));
}

// Members load rounds in one sequence: a reader ahead of it waits for the
// rounds before its own instead of loading its round out of turn.
TEST_F(SpreadRoundPipelineTest, AReaderAheadWaitsForTheSequence) {
  ASSERT_GE(order0_->rounds.size(), 4u);
  auto p0 = pipe_->acquire(order0_, 0);
  ASSERT_TRUE(p0);
  note_all(p0);
  ASSERT_TRUE(wait_load(1, std::chrono::milliseconds(500)));
  auto p1 = pipe_->acquire(order0_, 1);
  ASSERT_TRUE(p1);
  note_all(p1);
  std::thread ahead([&] { EXPECT_TRUE(pipe_->acquire(order0_, 3)) << "round 3 never came"; });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(load_started(0, 3)) << "round 3 loaded before round 2";
  p0 = cache::RoundPipeline::Pin();
  p1 = cache::RoundPipeline::Pin();
  ahead.join();
  std::vector<uint32_t> loaded;
  for (const auto& ev : pipe_->timeline())
    if (ev.epoch == 0) loaded.push_back(ev.round);
  EXPECT_EQ(loaded, (std::vector<uint32_t>{0, 1, 2, 3})) << "rounds loaded out of their sequence";
}

TEST_F(SpreadRoundPipelineTest, LoadsOnlyItsPartAndKnowsWhoHoldsTheRest) {
  const auto rounds = static_cast<uint32_t>(order0_->rounds.size());
  for (uint32_t j = 0; j < rounds; ++j) {
    auto placed = plan::place_round(shape_, order0_->rounds[j], members_.slot_bytes);
    ASSERT_TRUE(placed.is_ok()) << placed.status().message();
    auto pin = pipe_->acquire(order0_, j);
    ASSERT_TRUE(pin) << "round " << j;
    EXPECT_EQ(pin.epoch(), 0u);
    EXPECT_EQ(pin.round(), j);
    const auto& r = order0_->rounds[j];
    uint64_t mine = 0;
    for (size_t k = 0; k < r.chunks.size(); ++k) {
      const uint32_t c = r.chunks[k];
      EXPECT_EQ(pin.holder(c), placed->member[k]) << "chunk " << c;
      EXPECT_EQ(pin.local(c), placed->member[k] == 1u);
      EXPECT_EQ(pin.holder_offset(shape_.chunk_begin[c], c), placed->offset[k]);
      if (!pin.local(c)) continue;
      mine += shape_.chunk_bytes[c];
      // Its own chunks hold the byte space's bytes.
      const std::byte* p = pin.sample_ptr(shape_.chunk_begin[c], c);
      ASSERT_TRUE(std::equal(p, p + shape_.chunk_bytes[c], d_->bytes.begin() + static_cast<long>(shape_.chunk_begin[c])))
          << "chunk " << c;
    }
    EXPECT_EQ(mine, placed->member_bytes[1]);
    EXPECT_EQ(pipe_->own_bytes(*order0_, j), mine);
    for (const auto& ev : pipe_->timeline())
      if (ev.epoch == 0 && ev.round == j) EXPECT_EQ(ev.bytes, mine) << "it loads its part, no more";
    EXPECT_LE(mine, pipe_->slot_bytes());
  }
}

TEST_F(SpreadRoundPipelineTest, SlotsAreRetiredBeforeTheyChangeAndAtTheEnd) {
  const auto rounds = static_cast<uint32_t>(order0_->rounds.size());
  for (uint32_t j = 0; j < rounds; ++j) ASSERT_TRUE(pipe_->acquire(order0_, j)) << "round " << j;
  pipe_.reset();
  const auto events = log();
  // Each slot alternates ready and retired, starting with ready and ending
  // retired: a slot is never reloaded while served.
  std::map<std::string, std::string> last;
  for (const auto& e : events) {
    const std::string kind = e.substr(0, e.find(' '));
    const std::string slot = e.substr(kind.size() + 1, 1);
    if (kind == "ready") EXPECT_NE(last[slot], "ready") << "slot " << slot << " served twice without retiring";
    else EXPECT_EQ(last[slot], "ready") << "slot " << slot << " retired while not served";
    last[slot] = kind;
  }
  ASSERT_FALSE(events.empty());
  for (const auto& [slot, kind] : last) EXPECT_EQ(kind, "retired") << "slot " << slot << " still served at the end";
  EXPECT_NE(events.front().find("ready"), std::string::npos);
}

// A stand-in for the members that hold the other chunks: answers from the
// byte space through the round's placement (as a member's slot would), or
// refuses everything.
class FakeMembers : public cache::RoundRemote {
 public:
  FakeMembers(const plan::PlanShape& shape, const cache::RoundMembers& members,
              const std::vector<std::byte>& bytes, std::function<std::shared_ptr<const plan::EpochOrder>(uint64_t)> order)
      : shape_(shape), members_(members), bytes_(bytes), order_(std::move(order)) {}
  bool fetch_round(uint32_t member, uint64_t epoch, uint32_t round, int, uint64_t offset,
                   std::span<std::byte> dst) override {
    ++asked;
    if (refuse) return false;
    EXPECT_NE(member, members_.self) << "asked for a chunk this node holds";
    const auto order = order_(epoch);
    const auto& r = order->rounds[round];
    auto placed = plan::place_round(shape_, r, members_.slot_bytes);
    EXPECT_TRUE(placed.is_ok());
    for (size_t k = 0; k < r.chunks.size(); ++k) {
      const uint32_t c = r.chunks[k];
      if (placed->member[k] != member || offset < placed->offset[k] ||
          offset + dst.size() > placed->offset[k] + shape_.chunk_bytes[c])
        continue;
      const uint64_t at = shape_.chunk_begin[c] + (offset - placed->offset[k]);
      std::copy(bytes_.begin() + static_cast<long>(at), bytes_.begin() + static_cast<long>(at + dst.size()), dst.begin());
      return true;
    }
    ADD_FAILURE() << "no chunk of member " << member << " holds [" << offset << ", +" << dst.size() << ")";
    return false;
  }
  bool refuse = false;
  int asked = 0;

 private:
  const plan::PlanShape& shape_;
  const cache::RoundMembers& members_;
  const std::vector<std::byte>& bytes_;
  std::function<std::shared_ptr<const plan::EpochOrder>(uint64_t)> order_;
};

// Every sample of every round read through a SampleReader: its own chunks
// from the slot, the others from their member, or (refused) from the backend:
// the same bytes every way.
TEST_F(SpreadRoundPipelineTest, ASampleHeldElsewhereIsReadFromItsMemberOrTheBackend) {
  const uint64_t total = d_->manifest.total_bytes();
  auto buffer = cache::test::make_buffer(total, 64 << 10);
  ASSERT_TRUE(buffer);
  cache::Fetcher fetcher(*d_->reader, cache::StripeMap(total, 1), 0);
  cache::SampleReader reader(d_->manifest, *buffer, fetcher, pipe_.get(), &shape_);
  FakeMembers others(shape_, members_, d_->bytes, [this](uint64_t e) { return order(e); });
  reader.set_round_remote(&others);
  for (bool refuse : {false, true}) {
    others.refuse = refuse;
    cache::ReadCounters c;
    for (uint64_t k = 0; k < order0_->order.size(); ++k) {
      const uint64_t s = order0_->order[k];
      const uint64_t off = d_->manifest.sample_data_offset(s), len = d_->manifest.sample(s).length;
      cache::Gather g;
      g.reset(len);
      cache::SampleContext at{&order0_, k, nullptr, 0};
      Status st = reader.read_sample(s, 0, len, at, g, c);
      ASSERT_TRUE(st.is_ok()) << st.message();
      auto got = cache::test::flatten(g.iov(), g.count());
      ASSERT_TRUE(got.size() == len && std::equal(got.begin(), got.end(), d_->bytes.begin() + static_cast<long>(off)))
          << "sample " << s << (refuse ? " (members refuse)" : "");
    }
    EXPECT_GT(c.memory_bytes.load(), 0u) << "its own chunks come from its slot";
    if (refuse) {
      EXPECT_EQ(c.round_remote_bytes.load(), 0u);
      EXPECT_GT(c.fetched_bytes.load(), 0u) << "refused chunks come from the backend";
    } else {
      EXPECT_GT(c.round_remote_bytes.load(), 0u) << "chunks held elsewhere come from their member";
      EXPECT_EQ(c.fetched_bytes.load(), 0u);
    }
  }
  reader.set_round_remote(nullptr);
}

TEST_F(RoundPipelineTest, AMemberOutsideTheMembersIsRefused) {
  cache::RoundMembers members{{4096, 4096}, 2};
  auto p = cache::RoundPipeline::create(shape_, *d_->reader, {}, 1, &members);
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("this node (2) is not one of the 2"), std::string::npos) << p.status().message();
}

}  // namespace
}  // namespace dlfs::fs::test
