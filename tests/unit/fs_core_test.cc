// The namespace core without a mount: lookups, attributes, listings, reads,
// EROFS, against a real dataset on disk served by real cache components.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "fs/config/config.h"
#include "fs/daemon/control_verify.h"
#include "fs/dataset/dataset.h"
#include "fs/dataset/dataset_slot.h"
#include "fs/namespace/generated_files.h"
#include "fs/namespace/inode.h"
#include "fs/namespace/namespace.h"
#include "fs/daemon/stats.h"
#include "temp_dir.h"

namespace dlfs::fs {
namespace {

namespace stdfs = std::filesystem;

class FsCoreTest : public ::dlfs::test::TempDirTest {
 protected:
  void SetUp() override {
    root_ = tmp_.path();
    std::mt19937 rng(7);
    // Sizes chosen to cross extents (extent_size 64 KiB below) and include empty files.
    write("a/b.txt", 5000, rng);
    write("a/b/x", 70000, rng);
    write("a/c", 0, rng);
    write("top.bin", 200000, rng);
    for (int i = 0; i < 50; ++i) write("many/f" + std::to_string(1000 + i), 1000 + i * 37, rng);
    stdfs::create_directories(root_ + "/empty_dir");
  }
  void write(const std::string& rel, size_t size, std::mt19937& rng) {
    stdfs::create_directories(stdfs::path(root_ + "/" + rel).parent_path());
    std::string data(size, '\0');
    for (auto& c : data) c = static_cast<char>(rng());
    std::ofstream(root_ + "/" + rel, std::ios::binary).write(data.data(), static_cast<std::streamsize>(size));
    contents_[rel] = data;
  }

  // shuffle_ratio 1: no rounds, the budget goes to the storage buffer.
  std::unique_ptr<Namespace> make(uint64_t budget, bool load, double shuffle_ratio = 0,
                                  Namespace::StatsText stats = [](const Reader*) { return std::string("{\"x\":1}\n"); }) {
    DatasetConfig dc;
    dc.name = "ds";
    dc.backend = root_;
    dc.plan.shuffle_ratio = shuffle_ratio;
    DaemonConfig daemon;
    daemon.extent_size = 64 << 10;
    daemon.loader_threads = 2;
    auto ds = Dataset::open(dc, budget, daemon);
    EXPECT_TRUE(ds.is_ok()) << ds.status().message();
    datasets_.clear();
    datasets_.push_back(std::move(ds).value());
    if (load) {
      datasets_[0]->start_loading();
      while (!datasets_[0]->load_progress().done) ::usleep(1000);
    }
    return std::make_unique<Namespace>(datasets_, std::move(stats), 1, 0, 0);
  }

  // Resolves a path below the mount root through lookups.
  Result<Attr> resolve(const Namespace& ns, const std::string& path) {
    Result<Attr> cur = ns.getattr(kRootIno);
    for (const auto& part : stdfs::path(path)) {
      if (!cur) return cur;
      cur = ns.lookup(cur->ino, part.string());
    }
    return cur;
  }

  std::string read_all(const Namespace& ns, uint64_t ino, uint64_t size, uint64_t chunk) {
    std::string out;
    cache::Gather g;
    for (uint64_t off = 0; off < size + chunk; off += chunk) {
      Status s = ns.read(ino, off, chunk, g);
      EXPECT_TRUE(s.is_ok()) << s.message();
      for (size_t i = 0; i < g.count(); ++i)
        out.append(static_cast<const char*>(g.iov()[i].iov_base), g.iov()[i].iov_len);
    }
    return out;
  }

  std::vector<std::string> list(const Namespace& ns, uint64_t ino, size_t batch) {
    std::vector<std::string> names;
    uint64_t off = 0;
    for (;;) {
      size_t added = 0;
      Status s = ns.readdir(ino, off, [&](std::string_view n, const Attr&, uint64_t next) {
        if (added == batch) return false;
        names.emplace_back(n);
        off = next;
        ++added;
        return true;
      });
      EXPECT_TRUE(s.is_ok());
      if (added == 0) break;
    }
    return names;
  }

  std::string root_;
  std::map<std::string, std::string> contents_;
  std::vector<std::unique_ptr<Dataset>> datasets_;
};

TEST_F(FsCoreTest, InodeEncodingRoundTrips) {
  for (auto kind : {NodeKind::dataset_dir, NodeKind::raw_dir, NodeKind::raw_file}) {
    for (uint32_t ds : {0u, 1u, 77u, kMaxDatasets - 1}) {
      for (uint64_t idx : {uint64_t{0}, uint64_t{1}, uint64_t{123456789}, kMaxIndex}) {
        NodeId n{kind, ds, idx};
        auto back = decode_ino(encode_ino(n));
        ASSERT_TRUE(back.has_value());
        EXPECT_EQ(back->kind, kind);
        EXPECT_EQ(back->dataset, ds);
        EXPECT_EQ(back->index, idx);
      }
    }
  }
  EXPECT_FALSE(decode_ino(0).has_value());
  EXPECT_FALSE(decode_ino(4).has_value());
  EXPECT_FALSE(decode_ino((1ull << 48) | (0xffull << 40)).has_value());
}

TEST_F(FsCoreTest, LookupAndAttributesMatchBackend) {
  auto ns = make(~0ull, true);
  for (const auto& [rel, data] : contents_) {
    auto a = resolve(*ns, "ds/raw/" + rel);
    ASSERT_TRUE(a.is_ok()) << rel << ": " << a.status().message();
    EXPECT_TRUE(S_ISREG(a->mode));
    EXPECT_EQ(a->size, data.size()) << rel;
    EXPECT_EQ(a->mode & 0222, 0u) << "write bits must be dropped";
    struct stat st {};
    ASSERT_EQ(::stat((root_ + "/" + rel).c_str(), &st), 0);
    EXPECT_EQ(a->mtime_ns, static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec);
  }
  auto dir = resolve(*ns, "ds/raw/a");
  ASSERT_TRUE(dir.is_ok());
  EXPECT_TRUE(S_ISDIR(dir->mode));
  EXPECT_EQ(dir->nlink, 3u);  // itself, ".", and subdirectory b
  EXPECT_EQ(resolve(*ns, "ds/raw/nope").status().err(), ENOENT);
  EXPECT_EQ(resolve(*ns, "nope").status().err(), ENOENT);
  EXPECT_EQ(resolve(*ns, "ds/raw/top.bin/x").status().err(), ENOTDIR);
  EXPECT_TRUE(resolve(*ns, ".dlfs/stats").is_ok());
}

// Special bits never reach raw/: a setuid, setgid file and a sticky
// directory show their read and execute bits only.
TEST_F(FsCoreTest, SetuidSetgidAndStickyBitsAreCleared) {
  ASSERT_EQ(::chmod((root_ + "/top.bin").c_str(), 06755), 0);
  ASSERT_EQ(::chmod((root_ + "/a").c_str(), 01777), 0);
  auto ns = make(~0ull, false);
  auto file = resolve(*ns, "ds/raw/top.bin");
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  EXPECT_EQ(file->mode & 07777, 0555u);
  auto dir = resolve(*ns, "ds/raw/a");
  ASSERT_TRUE(dir.is_ok()) << dir.status().message();
  EXPECT_EQ(dir->mode & 07777, 0555u);
}

TEST_F(FsCoreTest, InodeNumbersAreStableAcrossInstances) {
  auto ns1 = make(~0ull, false);
  auto a1 = resolve(*ns1, "ds/raw/many/f1030");
  auto ns2 = make(~0ull, false);
  auto a2 = resolve(*ns2, "ds/raw/many/f1030");
  ASSERT_TRUE(a1.is_ok() && a2.is_ok());
  EXPECT_EQ(a1->ino, a2->ino);
  EXPECT_TRUE(ns2->getattr(a1->ino).is_ok());
}

TEST_F(FsCoreTest, ReaddirListsEverythingAcrossSmallBatches) {
  auto ns = make(~0ull, false);
  auto raw = resolve(*ns, "ds/raw");
  ASSERT_TRUE(raw.is_ok());
  auto names = list(*ns, raw->ino, 2);
  std::vector<std::string> want = {".", "..", "a", "empty_dir", "many", "top.bin"};
  EXPECT_EQ(names, want);
  auto many = resolve(*ns, "ds/raw/many");
  auto m = list(*ns, many->ino, 3);
  EXPECT_EQ(m.size(), 52u);
  auto root_names = list(*ns, kRootIno, 1);
  EXPECT_EQ(root_names, (std::vector<std::string>{".", "..", "ds", ".dlfs"}));
  auto file = resolve(*ns, "ds/raw/top.bin");
  EXPECT_EQ(ns->readdir(file->ino, 0, [](auto, auto&, auto) { return true; }).err(), ENOTDIR);
}

TEST_F(FsCoreTest, ReadsEqualBackendResidentPartialAndUnloaded) {
  for (uint64_t budget : {~0ull, 128ull << 10, 0ull}) {
    for (bool load : {true, false}) {
      auto ns = make(budget, load);
      for (const auto& [rel, data] : contents_) {
        auto a = resolve(*ns, "ds/raw/" + rel);
        ASSERT_TRUE(a.is_ok());
        for (uint64_t chunk : {4096ull, 1ull << 20, 777ull})
          ASSERT_EQ(read_all(*ns, a->ino, data.size(), chunk), data)
              << rel << " budget " << budget << " load " << load << " chunk " << chunk;
      }
    }
  }
}

TEST_F(FsCoreTest, RandomReadsEqualBackend) {
  auto ns = make(~0ull, true);
  auto a = resolve(*ns, "ds/raw/top.bin");
  const std::string& data = contents_["top.bin"];
  std::mt19937_64 rng(42);
  cache::Gather g;
  for (int i = 0; i < 500; ++i) {
    uint64_t off = rng() % (data.size() + 10);
    uint64_t len = 1 + rng() % 150000;
    ASSERT_TRUE(ns->read(a->ino, off, len, g).is_ok());
    std::string got;
    for (size_t k = 0; k < g.count(); ++k) got.append(static_cast<const char*>(g.iov()[k].iov_base), g.iov()[k].iov_len);
    std::string want = off < data.size() ? data.substr(off, len) : "";
    ASSERT_EQ(got, want) << "offset " << off << " length " << len;
  }
}

TEST_F(FsCoreTest, WritesAreRefusedWithErofs) {
  auto ns = make(~0ull, false);
  auto a = resolve(*ns, "ds/raw/top.bin");
  EXPECT_EQ(ns->open(a->ino, O_WRONLY).err(), EROFS);
  EXPECT_EQ(ns->open(a->ino, O_RDWR).err(), EROFS);
  EXPECT_EQ(ns->open(a->ino, O_RDONLY | O_TRUNC).err(), EROFS);
  EXPECT_TRUE(ns->open(a->ino, O_RDONLY).is_ok());
  EXPECT_EQ(datasets_[0]->raw_counters().lookups.load(), 1u) << "resolve() looked top.bin up once";
}

// Each lookup of /.dlfs/stats generates a file with a new inode number, its
// size known to stat, whose entry expires at once (so the next open looks it
// up again) and whose bytes stay what they were for that number.
TEST_F(FsCoreTest, StatsIsGeneratedAtEachLookup) {
  int calls = 0;
  auto ns = make(~0ull, false, 0, [&](const Reader*) { return "{\"call\":" + std::to_string(++calls) + "}\n"; });
  auto first = resolve(*ns, ".dlfs/stats");
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  EXPECT_TRUE(first->fresh_each_lookup && first->lookup_only);
  EXPECT_EQ(first->size, std::string("{\"call\":1}\n").size());
  auto second = ns->lookup(kControlDirIno, "stats");
  ASSERT_TRUE(second.is_ok());
  EXPECT_NE(second->ino, first->ino);
  auto text = [&](uint64_t ino, uint64_t off) {
    cache::Gather g;
    Status s = ns->read(ino, off, 4096, g);
    EXPECT_TRUE(s.is_ok()) << s.message();
    std::string t;
    for (size_t i = 0; i < g.count(); ++i) t.append(static_cast<const char*>(g.iov()[i].iov_base), g.iov()[i].iov_len);
    return t;
  };
  EXPECT_EQ(text(first->ino, 0), "{\"call\":1}\n");
  EXPECT_EQ(text(second->ino, 0), "{\"call\":2}\n");
  EXPECT_EQ(text(second->ino, 3), "all\":2}\n");
  EXPECT_EQ(ns->getattr(second->ino)->size, second->size);
  EXPECT_EQ(ns->generated_live(), 2u);
  // Forgotten by the kernel: gone, and a late read says so.
  ns->forget(first->ino, 1);
  EXPECT_EQ(ns->generated_live(), 1u);
  cache::Gather g;
  EXPECT_EQ(ns->read(first->ino, 0, 10, g).err(), ESTALE);
  EXPECT_EQ(ns->getattr(first->ino).status().err(), ESTALE);
  EXPECT_EQ(ns->open(kRootIno, O_RDONLY).err(), EISDIR);
  EXPECT_EQ(ns->read(kRootIno, 0, 10, g).err(), EISDIR);
}

TEST_F(FsCoreTest, CountersAddUp) {
  auto ns = make(~0ull, true);
  uint64_t total = 0;
  for (const auto& [rel, data] : contents_) {
    auto a = resolve(*ns, "ds/raw/" + rel);
    read_all(*ns, a->ino, data.size(), 1 << 20);
    total += data.size();
  }
  const auto& src = datasets_[0]->raw_counters().reads;
  EXPECT_EQ(datasets_[0]->raw_counters().bytes.load(), total);
  EXPECT_EQ(src.memory_bytes.load() + src.fetched_bytes.load(), total);
  EXPECT_EQ(src.fetched_bytes.load(), 0u) << "fully loaded: nothing from the backend";
}

// A backend file changed after the load: the loaded one keeps serving its
// scanned bytes, one read from the backend fails with EIO; stats and verify
// name them (cache/changed_files.h has the rule).
TEST_F(FsCoreTest, ChangedBackendFilesAreNamedInStatsAndVerify) {
  auto ns = make(128ull << 10, true, 1);  // two extents: a/b.txt and a/b/x resident, top.bin not
  ASSERT_EQ(datasets_[0]->buffer().resident_bytes(), 128ull << 10);
  std::ofstream(root_ + "/a/b.txt", std::ios::binary | std::ios::app) << "more";
  std::ofstream(root_ + "/top.bin", std::ios::binary | std::ios::app) << "more";
  cache::Gather g;
  auto loaded = resolve(*ns, "ds/raw/a/b.txt");
  ASSERT_TRUE(loaded.is_ok());
  EXPECT_EQ(read_all(*ns, loaded->ino, 5000, 4096), contents_["a/b.txt"]);
  auto backend = resolve(*ns, "ds/raw/top.bin");
  ASSERT_TRUE(backend.is_ok());
  Status s = ns->read(backend->ino, 0, 4096, g);
  EXPECT_EQ(s.err(), EIO) << s.message();
  EXPECT_NE(s.message().find("'top.bin' changed since the scan (size 200000 -> 200004"), std::string::npos)
      << s.message();

  auto changed = build_stats(DaemonFacts{}, datasets_, false)["datasets"][0]["changed_files"];
  EXPECT_EQ(changed["count"], 1);
  EXPECT_EQ(changed["files"][0]["path"], "top.bin");

  auto verified = verify_dataset_json(*datasets_[0], {});
  EXPECT_FALSE(verified["ok"].get<bool>());
  EXPECT_TRUE(verified["mismatches"].empty()) << verified.dump();
  EXPECT_EQ(verified["changed_files"]["count"], 2);
  EXPECT_EQ(verified["changed_files"]["files"][1]["path"], "a/b.txt");
  EXPECT_EQ(read_all(*ns, loaded->ino, 5000, 4096), contents_["a/b.txt"]) << "resident bytes changed";
}

// More generated files than the kernel should ever hold: the one read least
// recently goes, not one a reader is using.
TEST(GeneratedFilesTest, OverTheCapTheLeastRecentlyReadGoes) {
  GeneratedFiles files;
  auto file = [] { return GeneratedFiles::File{std::make_shared<SnapshotFile>("x"), 1, nullptr}; };
  std::vector<uint64_t> numbers;
  for (size_t i = 0; i < GeneratedFiles::kMaxLive; ++i) numbers.push_back(files.add(file()));
  EXPECT_EQ(files.live(), GeneratedFiles::kMaxLive);
  ASSERT_TRUE(files.get(numbers[0]).is_ok());  // the oldest is being read
  const uint64_t newest = files.add(file());
  EXPECT_EQ(files.live(), GeneratedFiles::kMaxLive);
  EXPECT_TRUE(files.get(numbers[0]).is_ok()) << "read recently: kept";
  EXPECT_EQ(files.get(numbers[1]).status().err(), ESTALE) << "the least recently used goes";
  EXPECT_TRUE(files.get(newest).is_ok());
  EXPECT_EQ(std::set<uint64_t>(numbers.begin(), numbers.end()).size(), numbers.size()) << "numbers are unique";
  files.forget(newest);
  EXPECT_EQ(files.live(), GeneratedFiles::kMaxLive - 1);
}

// ---- mount before scan: a dataset slot gates every request inside it ----

class DatasetGateTest : public FsCoreTest {
 protected:
  std::unique_ptr<Dataset> open_ds() {
    DatasetConfig dc;
    dc.name = "ds";
    dc.backend = root_;
    DaemonConfig daemon;
    daemon.extent_size = 64 << 10;
    daemon.loader_threads = 1;
    auto ds = Dataset::open(dc, 64 << 20, daemon);
    EXPECT_TRUE(ds.is_ok()) << ds.status().message();
    return std::move(ds).value();
  }
  // One slot, scanning, and a Namespace over it, as dlfsd has right after mounting.
  void SetUp() override {
    FsCoreTest::SetUp();
    slots_.push_back(std::make_unique<DatasetSlot>("ds", root_, "files", 42));
    ns_ = std::make_unique<Namespace>(slots_, [](const Reader*) { return std::string("{}\n"); }, 1, 0, 0);
  }
  // Reads ds/raw/top.bin through lookups, on another thread: it waits for the slot.
  std::future<Result<std::string>> read_top_async() {
    return std::async(std::launch::async, [this]() -> Result<std::string> {
      auto a = resolve(*ns_, "ds/raw/top.bin");
      if (!a) return a.status();
      return read_all(*ns_, a->ino, a->size, 65536);
    });
  }
  DatasetSlots slots_;
  std::unique_ptr<Namespace> ns_;
};

TEST_F(DatasetGateTest, RootAndDatasetDirAnswerBeforeTheScan) {
  EXPECT_EQ(list(*ns_, kRootIno, 100), (std::vector<std::string>{".", "..", "ds", ".dlfs"}));
  auto dir = ns_->lookup(kRootIno, "ds");
  ASSERT_TRUE(dir.is_ok()) << dir.status().message();
  EXPECT_EQ(dir->mtime_ns, 42) << "the dataset directory's mtime comes from the root checked before the scan";
  // Its attributes need no scan; anything inside it does.
  EXPECT_EQ(ns_->unsettled_slot(dir->ino, true), nullptr);
  EXPECT_EQ(ns_->unsettled_slot(dir->ino, false), slots_[0].get());
  EXPECT_EQ(ns_->unsettled_slot(kRootIno, false), nullptr);
  EXPECT_EQ(ns_->totals().files, 0u) << "statfs counts only what is served";
  auto stats = build_stats(DaemonFacts{}, slots_, true);
  EXPECT_EQ(stats["datasets"][0]["state"], "scanning");
  EXPECT_FALSE(stats["datasets"][0].contains("samples")) << "no figure from a manifest that is not built";
  EXPECT_EQ(stats["datasets"][0]["backend"], root_);
}

TEST_F(DatasetGateTest, RequestsWaitThenAnswerFromTheWholeDataset) {
  auto reader = read_top_async();
  int replays = 0;
  ASSERT_TRUE(slots_[0]->park([&] { ++replays; }));
  EXPECT_EQ(reader.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
      << "a read inside a scanning dataset must wait";
  EXPECT_EQ(replays, 0);
  slots_[0]->publish(open_ds());
  EXPECT_EQ(replays, 1) << "publishing runs the parked replays";
  ASSERT_EQ(reader.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto got = reader.get();
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_EQ(*got, contents_["top.bin"]);
  EXPECT_FALSE(slots_[0]->park([&] { ++replays; })) << "a ready slot parks nothing";
  EXPECT_EQ(build_stats(DaemonFacts{}, slots_, false)["datasets"][0]["state"], "ready");
  EXPECT_EQ(ns_->unsettled_slot(resolve(*ns_, "ds/raw")->ino, false), nullptr);
}

TEST_F(DatasetGateTest, AFailedScanAnswersEioNamingTheDataset) {
  auto reader = read_top_async();
  int replays = 0;
  ASSERT_TRUE(slots_[0]->park([&] { ++replays; }));
  slots_[0]->set_joining();
  EXPECT_EQ(reader.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout) << "joining still waits";
  slots_[0]->fail(Status(EINVAL, "records do not divide"));
  EXPECT_EQ(replays, 1);
  ASSERT_EQ(reader.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto got = reader.get();
  ASSERT_FALSE(got.is_ok());
  EXPECT_EQ(got.status().err(), EIO);
  EXPECT_NE(got.status().message().find("dataset 'ds'"), std::string::npos) << got.status().message();
  EXPECT_NE(got.status().message().find("records do not divide"), std::string::npos) << got.status().message();
  slots_[0]->publish(open_ds());  // too late: a slot settles once
  EXPECT_EQ(slots_[0]->state(), DatasetSlot::State::failed);
  auto stats = build_stats(DaemonFacts{}, slots_, false);
  EXPECT_EQ(stats["datasets"][0]["state"], "failed");
  EXPECT_NE(stats["datasets"][0]["error"].get<std::string>().find("records do not divide"), std::string::npos);
}

}  // namespace
}  // namespace dlfs::fs
