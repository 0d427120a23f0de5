// The SampleReader's raw path (bytes of the byte space: what raw/ files
// read), the Fetcher, and the BackendReader under them. The view path
// (samples, rounds, rings, checked reads) is tested through the Namespace in
// fs_views_test.cc.
#include "cache/sample_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "cache/loader.h"
#include "cache_test_util.h"

namespace dlfs::cache {
namespace {

namespace fs = std::filesystem;
using test::Dataset;
using test::TempDir;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The reader with no rounds and no views: reads of raw files.
struct RawReader {
  RawReader(const provenance::Manifest& m, const StorageBuffer& b, const Fetcher& f) : reader(m, b, f, nullptr, nullptr) {}
  Status read(uint64_t off, uint64_t len, Gather& g) {
    g.reset(std::min(len, reader.manifest().total_bytes()));
    return reader.read_bytes(off, len, g, counters);
  }
  SampleReader reader;
  ReadCounters counters;
};

uint32_t nonempty_file(const Dataset& d, uint32_t from) {
  while (d.manifest.file_size(from) == 0) ++from;
  return from;
}

// ---- BackendReader ----

TEST(BackendReader, ReadsAcrossFileBoundaries) {
  TempDir dir;
  test::make_dataset(dir.path(), 200, 3000, 11);
  auto d = test::scan(dir.path());
  ASSERT_TRUE(d && d->reader);
  const uint64_t total = d->manifest.total_bytes();
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200; ++i) {
    uint64_t off = rng() % total;
    uint64_t len = std::min<uint64_t>(total - off, rng() % 20000);
    std::vector<std::byte> out(len);
    ASSERT_TRUE(d->reader->read(off, out)) << off << "+" << len;
    ASSERT_TRUE(std::equal(out.begin(), out.end(), d->bytes.begin() + static_cast<long>(off))) << off;
  }
  std::vector<std::byte> all(total);
  ASSERT_TRUE(d->reader->read(0, all));
  EXPECT_EQ(all, d->bytes);
}

TEST(BackendReader, ReadPastEndIsRefused) {
  TempDir dir;
  test::make_dataset(dir.path(), 10, 1000, 1);
  auto d = test::scan(dir.path());
  ASSERT_TRUE(d && d->reader);
  std::vector<std::byte> out(10);
  Status s = d->reader->read(d->manifest.total_bytes() - 5, out);
  EXPECT_FALSE(s);
  EXPECT_EQ(s.err(), EINVAL);
}

TEST(BackendReader, MissingRootIsNamed) {
  TempDir dir;
  test::make_dataset(dir.path() + "/ds", 5, 100, 1);
  auto m = provenance::Manifest::build(dir.path() + "/ds", {});
  ASSERT_TRUE(m.is_ok());
  fs::rename(dir.path() + "/ds", dir.path() + "/moved");
  auto r = BackendReader::open(*m);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().err(), ENOENT);
  EXPECT_TRUE(contains(r.status().message(), dir.path() + "/ds")) << r.status().message();
}

TEST(BackendReader, RefusesFileReplacedBySymlink) {
  TempDir dir;
  test::make_dataset(dir.path() + "/ds", 50, 2000, 2);
  auto d = test::scan(dir.path() + "/ds");
  ASSERT_TRUE(d && d->reader);
  uint32_t f = nonempty_file(*d, 10);
  const std::string rel = d->manifest.file_path(f);
  // Same size, outside the root: following it would leak a foreign file.
  auto outside = fs::path(dir.path()) / "outside.bin";
  std::vector<std::byte> foreign(d->manifest.file_size(f), std::byte{0x5a});
  test::write_file(outside, foreign);
  fs::remove(d->path_of(f));
  fs::create_symlink(outside, d->path_of(f));

  std::vector<std::byte> out(d->manifest.file_size(f));
  Status s = d->reader->read_file(f, 0, out);
  ASSERT_FALSE(s);
  EXPECT_TRUE(contains(s.message(), "'" + rel + "'")) << s.message();
  EXPECT_TRUE(contains(s.message(), "symlink")) << s.message();
  // And through the byte-space path too.
  EXPECT_FALSE(d->reader->read(d->manifest.file_data_offset(f), out));
}

TEST(BackendReader, RefusesDirectoryReplacedBySymlink) {
  TempDir dir;
  test::make_dataset(dir.path() + "/ds", 50, 2000, 2);
  auto d = test::scan(dir.path() + "/ds");
  ASSERT_TRUE(d && d->reader);
  // Find a file below a/b and swap "a/b" for a symlink to an identical copy.
  uint32_t f = 0;
  while (f < d->manifest.file_count() &&
         (d->manifest.file_path(f).rfind("a/b/", 0) != 0 || d->manifest.file_size(f) == 0))
    ++f;
  ASSERT_LT(f, d->manifest.file_count());
  fs::path ab = fs::path(d->manifest.root()) / "a" / "b";
  fs::path copy = fs::path(dir.path()) / "copy";
  fs::copy(ab, copy, fs::copy_options::recursive);
  fs::remove_all(ab);
  fs::create_directory_symlink(copy, ab);

  std::vector<std::byte> out(d->manifest.file_size(f));
  Status s = d->reader->read_file(f, 0, out);
  ASSERT_FALSE(s);
  EXPECT_TRUE(contains(s.message(), d->manifest.file_path(f))) << s.message();
}

TEST(BackendReader, TruncatedFileIsAnErrorNamingIt) {
  TempDir dir;
  test::make_dataset(dir.path(), 50, 5000, 3);
  auto d = test::scan(dir.path());
  ASSERT_TRUE(d && d->reader);
  uint32_t f = 0;
  while (d->manifest.file_size(f) < 100) ++f;
  const uint64_t size = d->manifest.file_size(f);
  fs::resize_file(d->path_of(f), size / 2);

  std::vector<std::byte> out(size);
  Status s = d->reader->read_file(f, 0, out);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.err(), EIO);
  EXPECT_TRUE(contains(s.message(), "backend file '" + d->manifest.file_path(f) + "' changed since the scan (size " +
                                        std::to_string(size) + " -> " + std::to_string(size / 2)))
      << s.message();
  // The part that is still there is another version of the file now: not
  // served either (tests/unit/backend_change_test.cc has the whole rule).
  std::vector<std::byte> head(size / 2);
  EXPECT_EQ(d->reader->read_file(f, 0, head).err(), EIO);
}

// ---- SampleReader::read_bytes ----

enum class Fill { all, budget, none };

struct Setup {
  TempDir dir;
  std::unique_ptr<Dataset> d;
  std::unique_ptr<StorageBuffer> b;
};

// ~600 files up to 20 KiB, extents of 16 KiB, loaded fully, in part (a third
// of the extents fit the budget) or not at all.
std::unique_ptr<Setup> setup(Fill fill, uint64_t seed = 17) {
  auto s = std::make_unique<Setup>();
  test::make_dataset(s->dir.path(), 600, 20 << 10, seed);
  s->d = test::scan(s->dir.path());
  if (!s->d || !s->d->reader) return nullptr;
  const uint64_t total = s->d->manifest.total_bytes();
  const uint64_t extent = 16 << 10;
  s->b = test::make_buffer(total, extent, fill == Fill::budget ? total / 3 : ~0ull);
  if (!s->b) return nullptr;
  if (fill != Fill::none) {
    Loader l(*s->b, *s->d->reader, LoaderOptions{.threads = 2, .log_interval_s = 0, .label = "test"});
    l.start();
    l.wait();
  }
  return s;
}

void random_reads(Fill fill) {
  auto s = setup(fill);
  ASSERT_TRUE(s);
  const StorageBuffer& b = *s->b;
  const uint64_t total = s->d->manifest.total_bytes();
  Fetcher fetcher(*s->d->reader, StripeMap(total, 1), 0);
  RawReader src(s->d->manifest, b, fetcher);
  const std::byte* mem_lo = b.extent_data(0);
  const std::byte* mem_hi = mem_lo + b.capacity_bytes();
  std::mt19937_64 rng(fill == Fill::all ? 1 : fill == Fill::budget ? 2 : 3);
  Gather g;
  uint64_t asked = 0;
  for (int i = 0; i < 1000; ++i) {
    uint64_t off = rng() % total;
    uint64_t len = std::min<uint64_t>(total - off, rng() % 3 == 0 ? rng() % 200000 : rng() % 5000);
    ASSERT_TRUE(src.read(off, len, g)) << off << "+" << len;
    ASSERT_EQ(g.bytes(), len);
    ASSERT_LE(g.count(), static_cast<int>(Gather::kMaxIov));
    const uint64_t fetched_before = src.counters.fetched_bytes.load();
    auto got = test::flatten(g.iov(), g.count());
    ASSERT_TRUE(std::equal(got.begin(), got.end(), s->d->bytes.begin() + static_cast<long>(off))) << off << "+" << len;
    asked += len;
    (void)fetched_before;
    if (fill == Fill::all) {
      EXPECT_EQ(src.counters.fetched_bytes.load(), 0u);
      if (len > 0) {
        EXPECT_EQ(g.count(), 1) << "consecutive resident extents are one segment";
        auto* p = static_cast<const std::byte*>(g.iov()[0].iov_base);
        EXPECT_TRUE(p >= mem_lo && p + len <= mem_hi) << "resident bytes are not copied";
      }
    }
  }
  const auto& c = src.counters;
  EXPECT_EQ(c.memory_bytes.load() + c.fetched_bytes.load(), asked);
  if (fill == Fill::all) {
    EXPECT_EQ(c.fetched_reads.load(), 0u);
  }
  if (fill == Fill::none) {
    EXPECT_EQ(c.fetched_bytes.load(), asked);
  }
  if (fill == Fill::none) {
    EXPECT_EQ(c.memory_bytes.load(), 0u);
  }
  if (fill == Fill::budget) {
    EXPECT_GT(c.memory_bytes.load(), 0u);
    EXPECT_GT(c.fetched_bytes.load(), 0u);
  }
}

TEST(SampleReaderBytes, RandomReadsFullyResident) { random_reads(Fill::all); }
TEST(SampleReaderBytes, RandomReadsPartlyResident) { random_reads(Fill::budget); }
TEST(SampleReaderBytes, RandomReadsNothingLoaded) { random_reads(Fill::none); }

TEST(SampleReaderBytes, ExtentAndFileBoundaries) {
  for (Fill fill : {Fill::all, Fill::budget, Fill::none}) {
    auto s = setup(fill, 23);
    ASSERT_TRUE(s);
    const StorageBuffer& b = *s->b;
    const uint64_t total = s->d->manifest.total_bytes();
    Fetcher fetcher(*s->d->reader, StripeMap(total, 1), 0);
    RawReader src(s->d->manifest, b, fetcher);
    Gather g;
    auto check = [&](uint64_t off, uint64_t len) {
      len = std::min(len, total - off);
      ASSERT_TRUE(src.read(off, len, g)) << off << "+" << len;
      auto got = test::flatten(g.iov(), g.count());
      auto want = test::slice(s->d->bytes, off, len);
      ASSERT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end())) << off << "+" << len;
    };
    for (uint64_t e = 1; e < b.extent_count(); ++e) {
      check(b.extent_begin(e) - 1, 2);
      check(b.extent_begin(e) - 100, b.extent_size() + 200);
    }
    if (b.cacheable_extents() > 0 && b.cacheable_extents() < b.extent_count())  // across the budget edge
      check(b.cacheable_extents() * b.extent_size() - 7, 3 * b.extent_size());
    for (uint32_t f = 1; f < s->d->manifest.file_count(); f += 7) {
      uint64_t o = s->d->manifest.file_data_offset(f);
      if (o >= 3 && o + 3 <= s->d->manifest.total_bytes()) check(o - 3, 6);
    }
    check(0, s->d->manifest.total_bytes());
    check(s->d->manifest.total_bytes(), 0);
  }
}

TEST(SampleReaderBytes, FragmentedResidencyCopiesPastTheIovecLimit) {
  TempDir dir;
  test::make_dataset(dir.path(), 300, 8 << 10, 31);
  auto d = test::scan(dir.path());
  ASSERT_TRUE(d && d->reader);
  const uint64_t extent = 512;
  auto b = test::make_buffer(d->manifest.total_bytes(), extent);
  ASSERT_TRUE(b);
  ASSERT_GT(b->extent_count(), 2 * Gather::kMaxIov + 2);
  // Every other extent resident: a read over them all needs ~one segment per extent.
  for (uint64_t e = 0; e < b->extent_count(); e += 2) {
    ASSERT_TRUE(b->try_mark_loading(e));
    std::span<std::byte> dst(b->extent_data(e), b->extent_length(e));
    ASSERT_TRUE(d->reader->read(b->extent_begin(e), dst));
    b->mark_resident(e, extent_checksum(dst));
  }
  Fetcher fetcher(*d->reader, StripeMap(d->manifest.total_bytes(), 1), 0);
  RawReader src(d->manifest, *b, fetcher);
  Gather g;
  const uint64_t len = (2 * Gather::kMaxIov + 2) * extent;
  ASSERT_TRUE(src.read(100, len, g));
  EXPECT_LE(g.count(), static_cast<int>(Gather::kMaxIov)) << "past the limit, pieces are copied, not referenced";
  EXPECT_GT(g.count(), static_cast<int>(Gather::kMaxIov) - 10);
  auto got = test::flatten(g.iov(), g.count());
  auto want = test::slice(d->bytes, 100, len);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end()));
  EXPECT_EQ(src.counters.memory_bytes + src.counters.fetched_bytes, len);
  EXPECT_GT(src.counters.memory_bytes.load(), 0u);

  // A shorter read over the same pattern gathers without copying memory.
  const uint64_t short_len = 10 * extent;
  ASSERT_TRUE(src.read(0, short_len, g));
  EXPECT_EQ(g.count(), 10);
  EXPECT_EQ(g.iov()[0].iov_base, b->extent_data(0));
  got = test::flatten(g.iov(), g.count());
  want = test::slice(d->bytes, 0, short_len);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end()));
}

TEST(SampleReaderBytes, OutOfRangeIsRefused) {
  auto s = setup(Fill::none);
  ASSERT_TRUE(s);
  const uint64_t total = s->d->manifest.total_bytes();
  Fetcher fetcher(*s->d->reader, StripeMap(total, 1), 0);
  RawReader src(s->d->manifest, *s->b, fetcher);
  Gather g;
  EXPECT_EQ(src.read(total - 1, 2, g).err(), EINVAL);
  EXPECT_EQ(src.read(total + 1, 0, g).err(), EINVAL);
  EXPECT_EQ(src.read(1, ~0ull, g).err(), EINVAL);
}

TEST(SampleReaderBytes, BackendErrorNamesTheFile) {
  auto s = setup(Fill::none);
  ASSERT_TRUE(s);
  uint32_t f = nonempty_file(*s->d, 5);
  fs::remove(s->d->path_of(f));
  Fetcher fetcher(*s->d->reader, StripeMap(s->d->manifest.total_bytes(), 1), 0);
  RawReader src(s->d->manifest, *s->b, fetcher);
  Gather g;
  Status st = src.read(s->d->manifest.file_data_offset(f), 1, g);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.err(), EIO);  // a file gone since the scan is a changed file (backend_change_test.cc)
  EXPECT_TRUE(contains(st.message(), s->d->manifest.file_path(f))) << st.message();
  EXPECT_TRUE(contains(st.message(), "vanished")) << st.message();
}

}  // namespace
}  // namespace dlfs::cache

namespace dlfs::cache {
namespace {

// A peer stand-in for the unit level (the real one is UCX, tested in the
// transport tests and the multi-node scenarios): serves other stripes from
// a copy of the dataset, or refuses every `refuse_every`-th call.
struct CopyRemote : RemoteFetch {
  const std::vector<std::byte>& bytes;
  uint32_t self;
  const StripeMap& map;
  int refuse_every;
  std::atomic<int> calls{0};
  bool wrong_owner = false;
  CopyRemote(const std::vector<std::byte>& b, uint32_t s, const StripeMap& m, int refuse)
      : bytes(b), self(s), map(m), refuse_every(refuse) {}
  bool fetch(uint32_t owner, uint64_t offset, std::span<std::byte> dst) override {
    if (owner == self || map.owner(offset) != owner || map.end(owner) < offset + dst.size()) wrong_owner = true;
    if (refuse_every && ++calls % refuse_every == 0) return false;
    std::memcpy(dst.data(), bytes.data() + offset, dst.size());
    return true;
  }
};

TEST(StripeMap, BalancedContiguousAndOwnerIsExact) {
  for (uint64_t total : {0ull, 1ull, 7ull, 1000ull, 1ull << 40, (1ull << 40) + 3}) {
    for (uint32_t nodes : {1u, 2u, 3u, 7u, 64u}) {
      StripeMap m(total, nodes);
      EXPECT_EQ(m.begin(0), 0u);
      EXPECT_EQ(m.end(nodes - 1), total);
      for (uint32_t i = 0; i < nodes; ++i) {
        uint64_t len = m.end(i) - m.begin(i);
        EXPECT_LE(len, total / nodes + 1) << total << "/" << nodes;
        EXPECT_GE(len, total / nodes) << total << "/" << nodes;
        if (len == 0) continue;
        EXPECT_EQ(m.owner(m.begin(i)), i);
        EXPECT_EQ(m.owner(m.end(i) - 1), i);
        EXPECT_EQ(m.owner(m.begin(i) + len / 2), i);
      }
    }
  }
}

// Node 1 of 3 holds only its stripe; everything else comes through the
// remote (or, when it refuses, the backend), and the bytes are always right.
TEST(SampleReaderBytes, StripedBufferReadsOtherStripesRemotelyOrFromTheBackend) {
  TempDir dir;
  test::make_dataset(dir.path(), 400, 10 << 10, 41);
  auto d = test::scan(dir.path());
  ASSERT_TRUE(d && d->reader);
  const uint64_t total = d->manifest.total_bytes();
  StripeMap map(total, 3);
  StorageOptions o;
  o.extent_size = 8192;
  auto b = StorageBuffer::create(map.begin(1), map.end(1), o);
  ASSERT_TRUE(b);
  Loader l(**b, *d->reader, LoaderOptions{.threads = 2, .log_interval_s = 0, .label = "stripe"});
  l.start();
  l.wait();
  for (int refuse : {0, 3}) {
    Fetcher fetcher(*d->reader, map, 1);
    CopyRemote remote(d->bytes, 1, map, refuse);
    fetcher.set_remote(&remote);
    RawReader src(d->manifest, **b, fetcher);
    Gather g;
    std::mt19937_64 rng(5 + refuse);
    uint64_t asked = 0;
    for (int i = 0; i < 400; ++i) {
      uint64_t off = rng() % total;
      uint64_t len = std::min<uint64_t>(total - off, rng() % 100000);
      ASSERT_TRUE(src.read(off, len, g)) << off << "+" << len;
      auto got = test::flatten(g.iov(), g.count());
      ASSERT_TRUE(std::equal(got.begin(), got.end(), d->bytes.begin() + static_cast<long>(off))) << off << "+" << len;
      asked += len;
    }
    ASSERT_TRUE(src.read(0, total, g));
    asked += total;
    EXPECT_FALSE(remote.wrong_owner) << "a remote part crossed a stripe edge or asked this node";
    const auto& fc = fetcher.counters();
    EXPECT_EQ(src.counters.memory_bytes + fc.remote_bytes + fc.backend_bytes, asked);
    EXPECT_EQ(src.counters.fetched_bytes, fc.remote_bytes + fc.backend_bytes);
    EXPECT_GT(src.counters.memory_bytes.load(), 0u);
    EXPECT_GT(fc.remote_bytes.load(), 0u);
    if (refuse == 0) EXPECT_EQ(fc.backend_bytes.load(), 0u) << "everything is resident somewhere";
    else EXPECT_GT(fc.backend_bytes.load(), 0u) << "refused gets go to the backend";
  }
}

// read_many: remote parts of a batch go to fetch_many grouped by owner, each
// request gets its own status, refusals fall back to the backend, bytes exact.
TEST(Fetcher, ReadManyBatchesRemotePartsByOwner) {
  TempDir dir;
  test::make_dataset(dir.path(), 300, 7 << 10, 43);
  auto d = test::scan(dir.path());
  ASSERT_TRUE(d && d->reader);
  const uint64_t total = d->manifest.total_bytes();
  StripeMap map(total, 3);
  struct Batching : CopyRemote {
    using CopyRemote::CopyRemote;
    std::atomic<int> batches{0};
    std::atomic<size_t> most{0};
    void fetch_many(uint32_t owner, std::span<Piece> pieces) override {
      batches.fetch_add(1);
      if (pieces.size() > most) most = pieces.size();
      for (Piece& p : pieces) p.ok = fetch(owner, p.offset, p.dst);
    }
  };
  for (int refuse : {0, 4}) {
    Fetcher fetcher(*d->reader, map, 0);
    Batching remote(d->bytes, 0, map, refuse);
    fetcher.set_remote(&remote);
    std::mt19937_64 rng(9 + refuse);
    std::vector<std::vector<std::byte>> bufs(16);
    std::vector<ReadRequest> reqs(16);
    for (size_t i = 0; i < reqs.size(); ++i) {
      const uint64_t len = 1 + rng() % 60000, off = rng() % (total - len);
      bufs[i].resize(len);
      reqs[i].offset = off;
      reqs[i].dst = bufs[i];
    }
    fetcher.read_many(reqs);
    uint64_t asked = 0, own = 0;  // own: bytes in node 0's stripe (not held here: the backend's)
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_TRUE(reqs[i].status) << reqs[i].status.message();
      const uint64_t end = reqs[i].offset + bufs[i].size();
      if (reqs[i].offset < map.end(0)) own += std::min(end, map.end(0)) - reqs[i].offset;
      ASSERT_TRUE(std::equal(bufs[i].begin(), bufs[i].end(), d->bytes.begin() + static_cast<long>(reqs[i].offset)));
      asked += bufs[i].size();
    }
    EXPECT_FALSE(remote.wrong_owner);
    EXPECT_LE(remote.batches.load(), 2) << "one fetch_many per owner";
    EXPECT_GT(remote.most.load(), 1u);
    const auto& fc = fetcher.counters();
    EXPECT_EQ(fc.remote_bytes + fc.backend_bytes, asked) << "node 0 holds nothing in memory here";
    if (refuse) EXPECT_GT(fc.backend_bytes.load(), own) << "refused gets go to the backend";
    else EXPECT_EQ(fc.backend_bytes.load(), own) << "only node 0's own stripe comes from the backend";
  }
  // A backend error is the request's own, named; the others still succeed.
  Fetcher fetcher(*d->reader, map, 0);
  std::vector<std::byte> a(100), b(100);
  std::vector<ReadRequest> reqs{{0, a}, {total - 50, b}};
  fetcher.read_many(reqs);
  EXPECT_TRUE(reqs[0].status);
  EXPECT_FALSE(reqs[1].status) << "a read past the end must fail";
}

}  // namespace
}  // namespace dlfs::cache
