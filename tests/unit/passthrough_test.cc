// FUSE passthrough without a mount: the per-inode rule of BackingFiles (the
// kernel refuses mixed or different backing files on one inode), and which
// raw files RawFiles hands to the kernel while a dataset loads. The
// wire side (INIT and OPEN replies) runs on a real mount:
// tests/integration/33_passthrough_while_loading.sh.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "fs/dataset/backend_fs.h"
#include "fs/config/config.h"
#include "fs/dataset/dataset.h"
#include "fs/kernel/backing_files.h"
#include "fs/kernel/raw_files.h"
#include "fs/namespace/namespace.h"
#include "temp_dir.h"

namespace dlfs::fs {
namespace {

namespace stdfs = std::filesystem;

// Stands in for the /dev/fuse ioctls: hands out ids, records closes.
struct FakeKernel {
  int32_t next = 1;
  std::set<int32_t> live;
  std::vector<int32_t> closed;
  bool refuse = false;
  BackingRegistrar registrar() {
    return {[this](int fd) -> Result<int32_t> {
              if (refuse) return Status(EPERM, "refused");
              EXPECT_GE(fd, 0);
              live.insert(next);
              return next++;
            },
            [this](int32_t id) {
              EXPECT_EQ(live.erase(id), 1u) << "closed an id that was not live: " << id;
              closed.push_back(id);
            }};
  }
};

UniqueFd some_fd() { return UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)); }

TEST(BackingFilesTest, OpensOfOneInodeShareOneBackingFileUntilTheLastRelease) {
  FakeKernel k;
  KernelInodes inodes;
  BackingFiles b(inodes);
  b.set_registrar(k.registrar());
  int sources = 0;
  auto source = [&] { ++sources; return some_fd(); };
  auto first = b.open_passthrough(7, source, nullptr);
  auto second = b.open_passthrough(7, source, nullptr);
  ASSERT_EQ(first.mode, OpenMode::passthrough);
  ASSERT_EQ(second.mode, OpenMode::passthrough);
  EXPECT_EQ(first.backing_id, second.backing_id);
  EXPECT_EQ(sources, 1) << "the second open must reuse the inode's backing file";
  // An ordinary open of an inode with passthrough opens must be passthrough too.
  auto third = b.open_cached(7);
  EXPECT_EQ(third.mode, OpenMode::passthrough);
  EXPECT_EQ(third.backing_id, first.backing_id);
  b.release(7, OpenMode::passthrough);
  b.release(7, OpenMode::passthrough);
  EXPECT_TRUE(k.closed.empty()) << "closed while an open file still uses it";
  EXPECT_EQ(b.live_ids(), 1u);
  b.release(7, OpenMode::passthrough);
  EXPECT_EQ(k.closed, std::vector<int32_t>{first.backing_id});
  EXPECT_EQ(b.live_ids(), 0u);
  // Afterwards a new open registers a new backing file.
  auto again = b.open_passthrough(7, source, nullptr);
  EXPECT_EQ(again.mode, OpenMode::passthrough);
  EXPECT_NE(again.backing_id, first.backing_id);
  EXPECT_EQ(b.registered(), 2u);
}

TEST(BackingFilesTest, AnInodeWithOrdinaryOpensIsNotPassedThrough) {
  FakeKernel k;
  KernelInodes inodes;
  BackingFiles b(inodes);
  b.set_registrar(k.registrar());
  int sources = 0;
  auto source = [&] { ++sources; return some_fd(); };
  EXPECT_EQ(b.open_cached(3).mode, OpenMode::cached);
  EXPECT_EQ(b.open_passthrough(3, source, nullptr).mode, OpenMode::cached);
  EXPECT_EQ(sources, 0);
  b.release(3, OpenMode::cached);
  EXPECT_EQ(b.open_passthrough(3, source, nullptr).mode, OpenMode::cached) << "one ordinary open is still live";
  b.release(3, OpenMode::cached);
  b.release(3, OpenMode::cached);
  EXPECT_EQ(b.open_passthrough(3, source, nullptr).mode, OpenMode::passthrough);
  // Other inodes are independent.
  EXPECT_EQ(b.open_cached(4).mode, OpenMode::cached);
  EXPECT_EQ(b.open_passthrough(5, source, nullptr).mode, OpenMode::passthrough);
  EXPECT_TRUE(k.closed.empty());
}

TEST(BackingFilesTest, NoBackendFileOrARefusalServesTheOpenOrdinarily) {
  FakeKernel k;
  KernelInodes inodes;
  BackingFiles b(inodes);
  b.set_registrar(k.registrar());
  Status why;
  auto none = b.open_passthrough(9, [] { return UniqueFd(); }, &why);
  EXPECT_EQ(none.mode, OpenMode::cached);
  EXPECT_TRUE(why.is_ok()) << "no backend file is not a refusal";
  k.refuse = true;
  auto refused = b.open_passthrough(10, some_fd, &why);
  EXPECT_EQ(refused.mode, OpenMode::cached);
  EXPECT_EQ(why.err(), EPERM);
  // Those opens count as ordinary ones: a later passthrough open of the
  // same inode must not be passthrough while they are open.
  k.refuse = false;
  EXPECT_EQ(b.open_passthrough(9, some_fd, nullptr).mode, OpenMode::cached);
  b.release(9, OpenMode::cached);
  b.release(9, OpenMode::cached);
  EXPECT_EQ(b.open_passthrough(9, some_fd, nullptr).mode, OpenMode::passthrough);
  // Without a registrar (no session) every registration fails.
  BackingFiles unset(inodes);
  Status unset_why;
  EXPECT_EQ(unset.open_passthrough(1, some_fd, &unset_why).mode, OpenMode::cached);
  EXPECT_FALSE(unset_why.is_ok());
}

TEST(BackingFilesTest, ReleasesOfUnknownInodesOrPlainOpensChangeNothing) {
  FakeKernel k;
  KernelInodes inodes;
  BackingFiles b(inodes);
  b.set_registrar(k.registrar());
  auto p = b.open_passthrough(1, some_fd, nullptr);
  b.release(2, OpenMode::passthrough);
  b.release(1, OpenMode::plain);
  b.release(1, OpenMode::cached);  // it has no ordinary opens
  EXPECT_TRUE(k.closed.empty());
  EXPECT_EQ(b.open_passthrough(1, some_fd, nullptr).backing_id, p.backing_id);
}

TEST(PrefetchedFilesTest, KeepsTheNewestFilesForTheirOpens) {
  KernelInodes inodes;
  PrefetchedFiles kept(inodes, 2);
  EXPECT_FALSE(kept.take(1).valid()) << "nothing kept yet";
  kept.put(1, some_fd());
  kept.put(2, some_fd());
  kept.put(3, some_fd());  // over capacity: the oldest (1) is closed
  EXPECT_EQ(kept.size(), 2u);
  EXPECT_FALSE(kept.take(1).valid());
  UniqueFd three = kept.take(3);
  EXPECT_TRUE(three.valid());
  EXPECT_FALSE(kept.take(3).valid()) << "taken once";
  kept.clear();
  EXPECT_FALSE(kept.take(2).valid());
  EXPECT_EQ(kept.size(), 0u);
}

// Each inode's kernel-side state is one entry: its open files, its backing
// id, a prefetched file and its push claim live together, and the entry
// goes once none of them is left.
TEST(KernelInodesTest, OneEntryPerInodeHoldsItsOpensPrefetchAndPushUntilNoneIsLeft) {
  FakeKernel k;
  KernelInodes inodes;
  BackingFiles b(inodes);
  b.set_registrar(k.registrar());
  PrefetchedFiles kept(inodes, 8);
  kept.put(7, some_fd());
  EXPECT_EQ(inodes.size(), 1u);
  auto open = b.open_passthrough(7, [&] { return kept.take(7); }, nullptr);
  ASSERT_EQ(open.mode, OpenMode::passthrough) << "the prefetched file became the backing file";
  inodes.with(7, [](KernelInode& e) { e.pushed = true; });
  EXPECT_EQ(inodes.size(), 1u) << "one inode, one entry";
  inodes.with(7, [&](KernelInode& e) {
    EXPECT_EQ(e.passthrough_opens, 1u);
    EXPECT_EQ(e.backing_id, open.backing_id);
    EXPECT_FALSE(e.prefetched.valid()) << "taken by the open";
    EXPECT_TRUE(e.pushed);
  });
  inodes.forget(7);
  inodes.with(7, [](KernelInode& e) { EXPECT_FALSE(e.pushed) << "the kernel dropped its pages with the inode"; });
  EXPECT_EQ(inodes.size(), 1u) << "an open file keeps the entry";
  b.release(7, OpenMode::passthrough);
  EXPECT_EQ(inodes.size(), 0u) << "nothing left of the inode: no entry";
  EXPECT_EQ(k.closed, std::vector<int32_t>{open.backing_id});
  inodes.with(8, [](KernelInode&) {});
  EXPECT_EQ(inodes.size(), 0u) << "looking at an inode leaves nothing behind";
}

TEST(BackendFsTest, NetworkFileSystemsAreToldFromLocalOnes) {
  EXPECT_EQ(backend_fs_of_type(0xEF53).type, "ext4");
  EXPECT_FALSE(backend_fs_of_type(0xEF53).network);
  EXPECT_FALSE(backend_fs_of_type(0x58465342).network);  // xfs
  for (long magic : {0x6969L, 0x0BD00BD0L, 0x47504653L, 0x65735546L, 0xFF534D42L, 0x00C36400L}) {
    EXPECT_TRUE(backend_fs_of_type(magic).network) << std::hex << magic;
  }
  EXPECT_EQ(backend_fs_of_type(0x6969).type, "nfs");
  EXPECT_EQ(backend_fs_of_type(0x12345678).type, "0x12345678");
  auto here = backend_fs(::testing::TempDir());
  ASSERT_TRUE(here.is_ok()) << here.status().message();
  EXPECT_FALSE(here->type.empty());
  EXPECT_EQ(backend_fs("/no/such/dir").status().err(), ENOENT);
}

class PassthroughNamespaceTest : public ::dlfs::test::TempDirTest {
 protected:
  void SetUp() override {
    root_ = tmp_.path();
    for (int i = 0; i < 8; ++i) {
      std::ofstream(root_ + "/f" + std::to_string(i), std::ios::binary) << std::string(100000, char('a' + i));
    }
    std::ofstream(root_ + "/empty", std::ios::binary);
    open_dataset(Toggle::on);
  }
  void open_dataset(Toggle passthrough) {
    DatasetConfig dc;
    dc.name = "ds";
    dc.backend = root_;
    DaemonConfig daemon;
    daemon.extent_size = 64 << 10;
    daemon.loader_threads = 2;
    daemon.passthrough = passthrough;
    auto ds = Dataset::open(dc, ~0ull, daemon);
    ASSERT_TRUE(ds.is_ok()) << ds.status().message();
    raw_.reset();
    ns_.reset();
    datasets_.clear();
    datasets_.push_back(std::move(ds).value());
    ns_ = std::make_unique<Namespace>(datasets_, [](const Reader*) { return std::string("{}\n"); }, 1, 0, 0);
    raw_ = std::make_unique<RawFiles>(*ns_, inodes_);
  }
  uint64_t ino(const std::string& name) {
    auto raw = ns_->lookup(ns_->lookup(kRootIno, "ds")->ino, "raw");
    auto a = ns_->lookup(raw->ino, name);
    EXPECT_TRUE(a.is_ok()) << name;
    return a ? a->ino : 0;
  }
  std::string root_;
  std::vector<std::unique_ptr<Dataset>> datasets_;
  std::unique_ptr<Namespace> ns_;
  KernelInodes inodes_;
  std::unique_ptr<RawFiles> raw_;  // the kernel side's view of ns_'s raw files
};

TEST_F(PassthroughNamespaceTest, RawFilesNotInMemoryGoToTheBackendOnlyWhileLoading) {
  // Not loaded yet: every non-empty raw file is wanted, with its backend
  // file opened for the kernel.
  EXPECT_TRUE(raw_->loading_with_passthrough());
  const uint64_t f3 = ino("f3");
  EXPECT_TRUE(raw_->wants_passthrough(f3));
  EXPECT_FALSE(raw_->wants_passthrough(ino("empty"))) << "nothing to read";
  EXPECT_FALSE(raw_->wants_passthrough(kStatsIno));
  EXPECT_FALSE(raw_->wants_passthrough(ns_->lookup(kRootIno, "ds")->ino)) << "a directory";
  UniqueFd fd = raw_->open_backend_file(f3);
  ASSERT_TRUE(fd.valid());
  char c = 0;
  ASSERT_EQ(::pread(fd.get(), &c, 1, 5), 1);
  EXPECT_EQ(c, 'd') << "the backend file of f3";
  EXPECT_EQ(datasets_[0]->raw_counters().passthrough_files.load(), 1u);
  EXPECT_NE(datasets_[0]->buffer().reader_misses().last_ns(), 0) << "the loader is told a reader reads the backend";

  // A prefetch reads the backend file's head into the page cache; only raw files have one.
  EXPECT_TRUE(raw_->prefetch_backend_file(ino("f4"), 1 << 20).valid());
  EXPECT_FALSE(raw_->prefetch_backend_file(kStatsIno, 1 << 20).valid());
  EXPECT_EQ(datasets_[0]->raw_counters().prefetched_files.load(), 1u);

  // Loaded: nothing is wanted, and the window is over.
  datasets_[0]->start_loading();
  while (!datasets_[0]->load_progress().done) ::usleep(1000);
  EXPECT_FALSE(raw_->loading_with_passthrough());
  EXPECT_FALSE(raw_->wants_passthrough(f3));
}

TEST_F(PassthroughNamespaceTest, OffMeansNoFileIsPassedThrough) {
  open_dataset(Toggle::off);
  EXPECT_FALSE(datasets_[0]->passthrough());
  EXPECT_TRUE(datasets_[0]->loading());
  EXPECT_FALSE(raw_->loading_with_passthrough()) << "no window: the first OPEN can be answered ENOSYS";
  EXPECT_FALSE(raw_->wants_passthrough(ino("f3")));
  // auto: this test's directory is on a local file system.
  open_dataset(Toggle::automatic);
  EXPECT_TRUE(datasets_[0]->passthrough()) << datasets_[0]->backend_fs();
}

// The push at isatty() (fs/kernel/raw_push.h): a raw file is pushed
// only once it is in memory, only when small enough, and only once.
TEST_F(PassthroughNamespaceTest, ARawFileIsClaimedForAPushOnceWhenInMemoryAndSmallEnough) {
  const uint64_t f1 = ino("f1"), f2 = ino("f2");
  auto claimed = [&](uint64_t i, uint64_t max) { return !raw_->claim_push(i, max).empty(); };
  EXPECT_FALSE(claimed(f1, 1 << 20)) << "not in memory yet";
  datasets_[0]->start_loading();
  while (!datasets_[0]->load_progress().done) ::usleep(1000);
  EXPECT_FALSE(claimed(f2, 99999)) << "100000 bytes is more than the limit";
  const std::span<const std::byte> f2_bytes = raw_->claim_push(f2, 100000);
  ASSERT_EQ(f2_bytes.size(), 100000u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f2_bytes.data()), f2_bytes.size()), std::string(100000, 'c'))
      << "the file's bytes, from memory";
  EXPECT_TRUE(claimed(f1, 1 << 20)) << "not claimed before loading: a refusal claims nothing";
  EXPECT_FALSE(claimed(f1, 1 << 20)) << "claimed already";
  inodes_.forget(f1);
  EXPECT_TRUE(claimed(f1, 1 << 20)) << "the kernel forgot the inode: its next one may be pushed";
  EXPECT_FALSE(claimed(ino("empty"), 1 << 20)) << "nothing to push";
  EXPECT_FALSE(claimed(kStatsIno, 1 << 20)) << "not a raw file";
  EXPECT_FALSE(claimed(ns_->lookup(kRootIno, "ds")->ino, 1 << 20)) << "a directory";
  const uint64_t requests = datasets_[0]->raw_counters().requests.load();
  raw_->count_push(f2, 100000);
  EXPECT_EQ(datasets_[0]->raw_counters().pushed_files.load(), 1u);
  EXPECT_EQ(datasets_[0]->raw_counters().pushed_bytes.load(), 100000u);
  EXPECT_EQ(datasets_[0]->raw_counters().requests.load(), requests + 1) << "a push is a request served from memory";
}

TEST_F(PassthroughNamespaceTest, AChangedBackendFileIsNotHandedToTheKernel) {
  const uint64_t f5 = ino("f5");
  std::ofstream(root_ + "/f5", std::ios::binary | std::ios::app) << "more";
  EXPECT_FALSE(raw_->open_backend_file(f5).valid()) << "the scan's pin no longer matches";
  EXPECT_FALSE(raw_->prefetch_backend_file(f5, 1 << 20).valid());
  EXPECT_EQ(datasets_[0]->raw_counters().passthrough_files.load(), 0u);
  // And dlfsd's own read of it fails instead of serving other bytes.
  cache::Gather g;
  Status s = ns_->read(f5, 0, 4096, g);
  g.release();
  EXPECT_EQ(s.err(), EIO) << s.message();
}

}  // namespace
}  // namespace dlfs::fs
