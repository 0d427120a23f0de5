// ViewRegistry (fs/views/view_registry.h): one id per (epoch, W, rank), the views
// used most recently kept (16), clean errors for ids and keys that name no
// view; and the Namespace's answers for view names and inode numbers that are
// not views, names past NAME_MAX and entries of long member paths.
#include "fs/views/view_registry.h"

#include <fcntl.h>
#include <limits.h>

#include <set>
#include <thread>

#include "views_test_util.h"

namespace dlfs::fs::test {
namespace {

class ViewRegistryTest : public ViewsFixture {
 protected:
  void SetUp() override {
    g_ = make_files_dataset(tmp_, "data", 12, 3000, 9);
    PlanConfig p;
    p.seed = 3;
    p.world_size = 2;
    open("data", g_, p);
  }
  // The dataset's view ids, as the Namespace keeps them (destroyed before the dataset).
  ViewRegistry& reg() const { return reg_; }
  std::shared_ptr<const EpochView> get(const ViewKey& key) const {
    auto id = reg().id_of(key);
    EXPECT_TRUE(id.is_ok()) << id.status().message();
    auto v = reg().get(ds(), *id);
    EXPECT_TRUE(v.is_ok()) << v.status().message();
    return v ? *v : nullptr;
  }
  Generated g_;
  mutable ViewRegistry reg_;
};

TEST_F(ViewRegistryTest, OneIdPerKeyAndKeysRoundTrip) {
  const std::vector<ViewKey> keys = {{0, 1, 0}, {0, 2, 0}, {0, 2, 1}, {1, 2, 1}, {7, 3, 2}};
  std::set<uint32_t> ids;
  for (const auto& k : keys) {
    auto id = reg().id_of(k);
    ASSERT_TRUE(id.is_ok());
    EXPECT_EQ(*reg().id_of(k), *id) << "the same key twice";
    EXPECT_EQ(reg().key_of(*id), k);
    ids.insert(*id);
  }
  EXPECT_EQ(ids.size(), keys.size()) << "distinct keys, distinct ids";
  EXPECT_FALSE(reg().key_of(*ids.rbegin() + 1).has_value());
}

TEST_F(ViewRegistryTest, TheSameKeyGetsTheCachedViewOthersTheirOwn) {
  auto a = get({1, 2, 0});
  ASSERT_TRUE(a);
  EXPECT_EQ(get({1, 2, 0}), a) << "a cached view is shared, layouts and all";
  auto b = get({1, 2, 1}), c = get({2, 2, 0});
  ASSERT_TRUE(b && c);
  EXPECT_NE(b, a);
  EXPECT_NE(c, a);
  EXPECT_EQ(b->key(), (ViewKey{1, 2, 1}));
  EXPECT_EQ(c->key(), (ViewKey{2, 2, 0}));
  // Rank 0 and 1 of one epoch serve different samples; epochs differ in order.
  EXPECT_NE(a->sample_at(0), b->sample_at(0));
  std::vector<uint64_t> a_order, c_order;
  for (uint64_t k = 0; k < a->count(); ++k) a_order.push_back(a->sample_at(k)), c_order.push_back(c->sample_at(k));
  EXPECT_NE(a_order, c_order);
}

// 16 views are kept, most recently used first: a view used again stays, one
// left alone is dropped (its next get builds an equal one).
TEST_F(ViewRegistryTest, KeepsTheSixteenMostRecentlyUsedViews) {
  std::weak_ptr<const EpochView> first = get({0, 1, 0}), refreshed = get({1, 1, 0});
  for (uint32_t e = 10; e < 24; ++e) get({e, 1, 0});  // 14 more: 16 in all
  ASSERT_FALSE(first.expired());
  get({1, 1, 0});  // used again: now the most recent
  get({30, 1, 0});  // the 17th: the least recently used goes
  EXPECT_TRUE(first.expired()) << "view (0, 1, 0) should have been dropped";
  EXPECT_FALSE(refreshed.expired()) << "a view used again must not be dropped first";
  auto again = get({0, 1, 0});
  ASSERT_TRUE(again);
  const auto want = planned(3, 0, g_.samples.size(), 1, 0);
  ASSERT_EQ(again->count(), want.size());
  for (uint64_t k = 0; k < want.size(); ++k) EXPECT_EQ(again->sample_at(k), want[k]);
}

TEST_F(ViewRegistryTest, BadIdsAndKeysAreCleanErrors) {
  EXPECT_EQ(reg().get(ds(), 12345).status().err(), ENOENT);
  // A rank not below its world size gets an id, but no view: EINVAL naming both.
  auto id = reg().id_of({0, 2, 2});
  ASSERT_TRUE(id.is_ok());
  auto v = reg().get(ds(), *id);
  ASSERT_FALSE(v.is_ok());
  EXPECT_EQ(v.status().err(), EINVAL);
  EXPECT_NE(v.status().message().find("rank 2"), std::string::npos) << v.status().message();
  EXPECT_NE(v.status().message().find("world size 2"), std::string::npos) << v.status().message();
  auto zero = reg().id_of({0, 0, 0});
  ASSERT_TRUE(zero.is_ok());
  EXPECT_EQ(reg().get(ds(), *zero).status().err(), EINVAL);
}

// Every id pinned (the kernel holds all of them): the next new key is ENOSPC,
// never a wrap onto an id the kernel still names.
TEST_F(ViewRegistryTest, IdsAllPinnedRunOutWithEnospcNotWrap) {
  ViewRegistry r;
  for (uint32_t i = 0; i < ViewRegistry::kMaxViews; ++i) ASSERT_TRUE(r.id_of({i, 1, 0}).is_ok()) << i;
  EXPECT_EQ(*r.id_of({0, 1, 0}), 0u) << "known keys keep their ids when full";
  auto full = r.id_of({ViewRegistry::kMaxViews, 1, 0});
  EXPECT_EQ(full.status().err(), ENOSPC);
  EXPECT_NE(full.status().message().find("at once"), std::string::npos) << full.status().message();
  EXPECT_EQ(r.usage().recycled, 0u);
  EXPECT_EQ(r.usage().pinned, ViewRegistry::kMaxViews);
}

// Pins count lookups: an id is recycled only once every pin is released
// (the kernel forgot the inode as often as it was handed out).
TEST_F(ViewRegistryTest, PinsCountAndReleaseSaturates) {
  ViewRegistry r;
  const uint32_t id = *r.id_of({5, 2, 1});
  EXPECT_EQ(*r.id_of({5, 2, 1}), id);
  EXPECT_EQ(r.pins(id), 2u);
  r.release(id);
  EXPECT_EQ(r.pins(id), 1u);
  r.release(id, 7);  // a forget of more than was handed out must not wrap
  EXPECT_EQ(r.pins(id), 0u);
  r.release(id + 100);  // an id never handed out: ignored
  EXPECT_EQ(r.key_of(id), (ViewKey{5, 2, 1})) << "released ids keep their key until the table is full";
}

// A full table recycles the ids nobody pins, oldest first, and the views of a
// recycled id are built for its new key (the cache never answers for the old).
TEST_F(ViewRegistryTest, AFullTableRecyclesUnpinnedIds) {
  ViewRegistry& r = reg();
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < ViewRegistry::kMaxViews; ++i) ids.push_back(*r.id_of({i, 2, i % 2}));
  auto old_view = r.get(ds(), ids[3]);  // cached under id 3
  ASSERT_TRUE(old_view.is_ok());
  r.release(ids[3]);
  r.release(ids[9]);
  auto a = r.id_of({ViewRegistry::kMaxViews, 2, 0});
  auto b = r.id_of({ViewRegistry::kMaxViews + 1, 2, 1});
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(*a, ids[3]);
  EXPECT_EQ(*b, ids[9]);
  EXPECT_EQ(r.usage().recycled, 2u);
  EXPECT_EQ(r.id_of({ViewRegistry::kMaxViews + 2, 2, 0}).status().err(), ENOSPC) << "no unpinned id is left";
  auto v = r.get(ds(), *a);
  ASSERT_TRUE(v.is_ok());
  EXPECT_EQ((*v)->key(), (ViewKey{ViewRegistry::kMaxViews, 2, 0})) << "the cache answered for the old key";
  EXPECT_NE(*v, *old_view);
  // The old key is a new lookup now: it gets another id once one is free.
  r.release(ids[20]);
  EXPECT_EQ(*r.id_of({3, 2, 1}), ids[20]);
}

// The Namespace pins what it hands to the kernel: a lookup pins once, a
// forget releases, a plain listing pins nothing, a readdirplus entry pins.
TEST_F(ViewRegistryTest, LookupsPinForgetsReleaseListingsOnlyWhenKept) {
  auto world = resolve("ds/epochs/4/2");
  ASSERT_TRUE(world.is_ok());
  auto tar = ns_->lookup(world->ino, "1.tar");
  ASSERT_TRUE(tar.is_ok());
  const auto id = static_cast<uint32_t>(decode_ino(tar->ino)->index);
  const uint64_t after_lookup = ns_->views(0).pins(id);
  EXPECT_GE(after_lookup, 1u);
  ns_->forget(tar->ino, 1);
  EXPECT_EQ(ns_->views(0).pins(id), after_lookup - 1);
  auto count_entries = [&](bool plus) {
    uint64_t n = 0;
    Status s = ns_->readdir(world->ino, 0, [&](std::string_view, const Attr&, uint64_t) { return ++n, true; }, plus);
    EXPECT_TRUE(s.is_ok()) << s.message();
    return n;
  };
  const uint64_t before = ns_->views(0).pins(id);
  count_entries(false);
  EXPECT_EQ(ns_->views(0).pins(id), before) << "a plain listing hands the kernel no inode";
  count_entries(true);
  EXPECT_GT(ns_->views(0).pins(id), before) << "readdirplus entries are kept by the kernel";
}

TEST_F(ViewRegistryTest, ConcurrentLookupsAgreeOnIds) {
  std::vector<std::vector<uint32_t>> got(4, std::vector<uint32_t>(200));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (uint32_t i = 0; i < 200; ++i) {
        const uint32_t e = t % 2 ? i : 199 - i;  // two threads each way
        got[t][e] = *reg().id_of({e, 4, e % 4});
        EXPECT_TRUE(reg().get(ds(), got[t][e]).is_ok());
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 1; t < 4; ++t) EXPECT_EQ(got[t], got[0]);
  EXPECT_EQ(std::set<uint32_t>(got[0].begin(), got[0].end()).size(), 200u);
}

// What the Namespace says for names under epochs/ that are no view.
TEST_F(ViewRegistryTest, NamesThatAreNoViewAreNotFound) {
  auto world = resolve("ds/epochs/0/2");
  ASSERT_TRUE(world.is_ok());
  for (const char* bad : {"2.tar", "7", "0.zip", "0.tar.gz", "00.tar", "-1.tar", "+1.tar", "x.tar", ".tar", "0.bin"})
    EXPECT_EQ(ns_->lookup(world->ino, bad).status().err(), ENOENT) << bad;
  for (const char* bad : {"ds/epochs/01", "ds/epochs/x", "ds/epochs/0/0", "ds/epochs/0/65536", "ds/epochs/0/02"})
    EXPECT_EQ(resolve(bad).status().err(), ENOENT) << bad;
  EXPECT_EQ(resolve("ds/epochs/0/2/0.tar/x").status().err(), ENOTDIR);
  // A view name looked up twice is one inode; another rank, another.
  auto t0 = resolve("ds/epochs/0/2/0.tar"), again = resolve("ds/epochs/0/2/0.tar"), t1 = resolve("ds/epochs/0/2/1.tar");
  ASSERT_TRUE(t0.is_ok() && again.is_ok() && t1.is_ok());
  EXPECT_EQ(t0->ino, again->ino);
  EXPECT_NE(t0->ino, t1->ino);
}

// Inode numbers the kernel never got from DLFS, with a format number no
// format has: clean ENOENT from every operation (lookup and readdir threw
// std::out_of_range; found by tests/fuzz/namespace_fuzz.cc).
TEST_F(ViewRegistryTest, InodesOfUnregisteredFormatsAreNotFound) {
  ASSERT_TRUE(resolve("ds/epochs/0/2/0.tar").is_ok());  // view id 0 exists
  for (auto kind : {NodeKind::view, NodeKind::view_entry}) {
    for (size_t format = view_formats().size(); format <= kMaxFormatNumber; ++format) {
      const uint64_t ino = encode_ino(NodeId{kind, 0, 0, static_cast<uint8_t>(format)});
      EXPECT_EQ(ns_->getattr(ino).status().err(), ENOENT) << format;
      EXPECT_EQ(ns_->lookup(ino, "0").status().err(), ENOENT) << format;
      EXPECT_EQ(ns_->readdir(ino, 0, [](auto, auto&, auto) { return true; }).err(), ENOENT) << format;
      EXPECT_EQ(ns_->open(ino, O_RDONLY).err(), ENOENT) << format;
      EXPECT_FALSE(ns_->getxattr(ino, "user.dlfs.seed").is_ok()) << format;
    }
  }
}

// Names longer than NAME_MAX (which FUSE passes on, up to 1 KiB) are
// ENAMETOOLONG in every directory, as statfs's f_namemax says.
TEST_F(ViewRegistryTest, NamesLongerThanNameMaxAreTooLong) {
  for (const char* dir : {"", "ds", "ds/raw", "ds/epochs", "ds/epochs/0", "ds/epochs/0/2", "ds/epochs/0/2/0"}) {
    auto d = resolve(dir);
    ASSERT_TRUE(d.is_ok()) << dir;
    EXPECT_EQ(ns_->lookup(d->ino, std::string(NAME_MAX, '1')).status().err(), ENOENT) << dir;
    EXPECT_EQ(ns_->lookup(d->ino, std::string(NAME_MAX + 1, '1')).status().err(), ENAMETOOLONG) << dir;
    EXPECT_EQ(ns_->lookup(d->ino, std::string(1024, '1')).status().err(), ENAMETOOLONG) << dir;
  }
}

// Directory-view entries of samples whose paths are longer than one name may
// be: cut to NAME_MAX bytes at a character boundary, still unique, found by
// lookup and reading the sample (they were listed whole, and so could not be
// opened; found by scenario 18 and tests/fuzz/namespace_fuzz.cc).
TEST_F(ViewRegistryTest, LongMemberPathsGiveEntriesWithinNameMax) {
  Generated g;
  const std::string e_acute = "\xc3\xa9";  // two bytes of UTF-8
  std::string utf8;
  for (int i = 0; i < 120; ++i) utf8 += e_acute;
  const std::vector<std::string> paths = {
      std::string(250, 'a') + "/" + std::string(250, 'b') + "/" + std::string(250, 'c') + "/" + std::string(250, 'd') +
          "/x.bin",
      std::string(250, 'a') + "/" + std::string(250, 'b') + "/y.bin", "p%q/" + utf8 + "/" + utf8, "short.bin"};
  for (size_t i = 0; i < paths.size(); ++i) {
    std::string bytes(100 + i, static_cast<char>('0' + i));
    tmp_.write_file("long/" + paths[i], bytes);
    g.samples.push_back({paths[i], bytes});
  }
  std::sort(g.samples.begin(), g.samples.end(), [](const Sample& a, const Sample& b) { return a.member < b.member; });
  PlanConfig p;
  p.seed = 5;
  open("long", g, p);
  auto dir = resolve("ds/epochs/0/1/0");
  ASSERT_TRUE(dir.is_ok()) << dir.status().message();
  const auto order = planned(5, 0, g.samples.size(), 1, 0);
  const auto names = list(dir->ino);
  ASSERT_EQ(names.size(), order.size());
  for (size_t k = 0; k < names.size(); ++k) {
    std::string full = std::to_string(k) + "-";
    for (char c : g.samples[order[k]].member) full += c == '/' ? "%2F" : c == '%' ? "%25" : std::string(1, c);
    const std::string& name = names[k];
    EXPECT_LE(name.size(), size_t{NAME_MAX}) << full;
    EXPECT_EQ(full.compare(0, name.size(), name), 0) << name << " is not the start of " << full;
    if (full.size() > NAME_MAX) EXPECT_GE(name.size(), size_t{NAME_MAX - 3}) << "cut more than a character";
    else EXPECT_EQ(name, full);
    if (name.size() < full.size()) EXPECT_NE(static_cast<unsigned char>(full[name.size()]) & 0xC0, 0x80u)
        << "cut inside a UTF-8 character";
    auto a = ns_->lookup(dir->ino, name);
    ASSERT_TRUE(a.is_ok()) << name << ": " << a.status().message();
    ASSERT_TRUE(ns_->open(a->ino, O_RDONLY).is_ok());
    EXPECT_EQ(read_all(*a, 64), g.samples[order[k]].bytes) << name;
  }
}

}  // namespace
}  // namespace dlfs::fs::test
