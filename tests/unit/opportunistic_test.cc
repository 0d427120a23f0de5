// OpportunisticStream (fs/views/opportunistic_stream.h) without a mount: within a
// window of the next planned samples the stream serves the earliest one that
// is ready, else the earliest planned one; every sample of the rank still
// comes exactly once, with its bytes, fewer than `window` positions from its
// planned place, and re-reads of the open stream repeat. Checked with a
// readiness the test chooses (deterministic) and with the daemon's own (half
// the dataset resident, as scenario 14 does through FUSE).
#include "fs/views/opportunistic_stream.h"

#include <fcntl.h>

#include <functional>
#include <set>

#include "views_test_util.h"

namespace dlfs::fs::test {
namespace {

constexpr uint64_t kSeed = 8, kRecord = 700;

class OpportunisticTest : public ViewsFixture {
 protected:
  void SetUp() override {
    g_ = make_fixed_dataset(tmp_, "data", {90, 70}, kRecord, 16, 4);
    ids_ = ids_by_member(g_);
  }
  void open_opportunistic(uint64_t window, bool readahead, uint64_t budget = ~0ull, bool load = false) {
    PlanConfig p;
    p.seed = kSeed;
    p.order = plan::Order::opportunistic;
    p.opportunistic_window = window;
    p.readahead = readahead;
    p.round_chunk = 16 << 20;  // one chunk: a small budget cannot mean rounds
    open("data", g_, p, budget, load, 8 << 10);
  }
  std::shared_ptr<const EpochView> view(uint32_t epoch, uint32_t w, uint32_t r) const {
    auto id = views_.id_of({epoch, w, r});
    EXPECT_TRUE(id.is_ok());
    auto v = views_.get(ds(), *id);
    EXPECT_TRUE(v.is_ok()) << v.status().message();
    return v ? *v : nullptr;
  }

  // Checks a served stream against the rank's plan: returns the planned
  // position of each member in stream order (empty on failure).
  std::vector<uint64_t> check_stream(const std::string& bytes, uint64_t epoch, uint32_t w, uint32_t r,
                                     uint64_t window) {
    const auto plan = planned(kSeed, epoch, g_.samples.size(), w, r);
    std::map<uint64_t, uint64_t> position_of;  // sample id -> planned position
    for (uint64_t k = 0; k < plan.size(); ++k) position_of[plan[k]] = k;
    EXPECT_EQ(position_of.size(), plan.size()) << "W divides N here: no sample twice in a rank";
    auto tar = parse_tar(bytes);
    std::vector<uint64_t> served;
    for (size_t j = 0; j < tar.size(); ++j) {
      auto id = ids_.find(tar[j].name);
      if (id == ids_.end() || !position_of.count(id->second)) {
        ADD_FAILURE() << "member " << tar[j].name << " is not in the rank's plan";
        return {};
      }
      EXPECT_EQ(tar[j].data, g_.samples[id->second].bytes) << tar[j].name;
      const uint64_t k = position_of[id->second];
      EXPECT_LT(j > k ? j - k : k - j, window) << "planned " << k << " served at " << j;
      served.push_back(k);
    }
    EXPECT_EQ(std::set<uint64_t>(served.begin(), served.end()).size(), plan.size())
        << "every planned sample exactly once";
    EXPECT_EQ(served.size(), plan.size());
    return served;
  }

  // The contract, step by step: member j is the earliest ready position not
  // yet served among the window after the earliest one not yet served; if
  // none is ready, that earliest one.
  static void expect_prefers_ready(const std::vector<uint64_t>& served, uint64_t window,
                                   const std::function<bool(uint64_t)>& ready) {
    std::vector<bool> taken(served.size(), false);
    uint64_t low = 0;
    for (size_t j = 0; j < served.size(); ++j) {
      uint64_t want = low;
      for (uint64_t k = low; k < std::min<uint64_t>(served.size(), low + window); ++k)
        if (!taken[k] && ready(k)) {
          want = k;
          break;
        }
      ASSERT_EQ(served[j], want) << "member " << j;
      taken[served[j]] = true;
      while (low < served.size() && taken[low]) ++low;
    }
  }

  Generated g_;
  std::map<std::string, uint64_t> ids_;
  mutable ViewRegistry views_;  // the dataset's view ids, as the Namespace keeps them
};

// Readiness chosen by the test: every third planned position.
TEST_F(OpportunisticTest, ServesReadySamplesFirstWithinTheWindow) {
  open_opportunistic(5, false);
  const uint64_t window = 5;
  auto ready = [](uint64_t k) { return k % 3 == 2; };
  auto v = view(0, 2, 1);
  ASSERT_TRUE(v);
  OpportunisticStream stream(v, nullptr, window, ready);
  const std::string bytes = read_all(stream, 1234);
  auto served = check_stream(bytes, 0, 2, 1, window);
  EXPECT_EQ(stream.served(), served) << "served() names the members in stream order";
  expect_prefers_ready(served, window, ready);
  uint64_t moved = 0;
  for (size_t j = 0; j < served.size(); ++j) moved += served[j] != j;
  EXPECT_GT(moved, served.size() / 3) << "ready samples move ahead";
  // The order is fixed once decided: re-reads of the open stream repeat.
  for (uint64_t off : {uint64_t{0}, bytes.size() / 3, bytes.size() - 5000})
    EXPECT_EQ(read_range(stream, off, 4096), bytes.substr(off, 4096)) << "re-read at " << off;
}

// Nothing ready: the planned order, byte for byte the ordered .tar.
TEST_F(OpportunisticTest, NothingReadyIsThePlannedOrder) {
  open_opportunistic(8, false);
  auto v = view(1, 1, 0);
  ASSERT_TRUE(v);
  OpportunisticStream stream(v, nullptr, 8, [](uint64_t) { return false; });
  auto served = check_stream(read_all(stream, 4096 + 3), 1, 1, 0, 8);
  for (size_t j = 0; j < served.size(); ++j) ASSERT_EQ(served[j], j);
}

// The daemon's own readiness: with about half the records resident and no
// read-ahead, the stream opened through the Namespace prefers the resident
// ones; each lookup makes a new stream (a generated file) since another
// reader may be served another order.
TEST_F(OpportunisticTest, ThroughTheNamespaceResidentSamplesGoFirst) {
  const uint64_t total = g_.samples.size() * kRecord, window = 16;
  open_opportunistic(window, false, total / 2, true);
  ASSERT_FALSE(ds().planner().rounds());
  auto f = open_view(view_path(0, 2, 0, ".tar"));
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->fresh_each_lookup) << "the next open must look the name up again";
  auto a = resolve(view_path(0, 2, 0, ".tar"));
  EXPECT_NE(a->ino, f->ino) << "a new stream for each lookup";
  EXPECT_EQ(a->size, f->size);
  EXPECT_EQ(*ns_->getxattr(a->ino, "user.dlfs.order"), "opportunistic");
  auto served = check_stream(read_all(*f, 3000), 0, 2, 0, window);
  auto v = view(0, 2, 0);
  uint64_t resident = 0;
  for (uint64_t k = 0; k < served.size(); ++k) resident += v->in_memory(k);
  ASSERT_GT(resident, 0u);
  ASSERT_LT(resident, served.size()) << "half the dataset should be resident, not all";
  expect_prefers_ready(served, window, [&](uint64_t k) { return v->in_memory(k); });
  const auto& reads = ds().view_counters().reads;
  EXPECT_GT(reads.memory_bytes.load(), 0u);
  EXPECT_GT(reads.fetched_bytes.load(), 0u);
}

// With read-ahead on, which samples are ready when is a race; the stream's
// promises (each once, right bytes, within the window) still hold.
TEST_F(OpportunisticTest, WithReadAheadEverySampleStillComesOnce) {
  const uint64_t total = g_.samples.size() * kRecord, window = 16;
  open_opportunistic(window, true, total / 2, true);
  for (uint32_t r = 0; r < 2; ++r) {
    auto f = open_view(view_path(3, 2, r, ".tar"));
    ASSERT_TRUE(f);
    check_stream(read_all(*f, 8191), 3, 2, r, window);
  }
}

}  // namespace
}  // namespace dlfs::fs::test
