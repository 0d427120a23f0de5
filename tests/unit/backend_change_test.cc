// A backend that changes under the daemon (cache/changed_files.h has the
// rule): files rewritten in place with the same size, resized, replaced by a
// rename (new inode) or deleted, before the load, after it, and during it.
// A reader gets the scanned bytes or EIO naming the file, never new bytes and
// never a mix; other files keep serving; verify names the changed files.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <sstream>
#include <thread>

#include "cache/fetcher.h"
#include "cache/loader.h"
#include "cache/sample_reader.h"
#include "cache/verifier.h"
#include "cache_test_util.h"

namespace dlfs::cache {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

constexpr uint64_t kFileSize = 16 << 10;  // one file an extent: a file's fate is its extent's
constexpr int kFiles = 12;
constexpr int64_t kOldMtime = 1600000000;  // every file's mtime before the scan: any write moves it

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void set_mtime(const std::string& path, int64_t seconds) {
  timespec t[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), t, 0), 0) << path << ": " << std::strerror(errno);
}

// Captures spdlog's output for the life of the object.
struct LogCapture {
  LogCapture() : previous(spdlog::default_logger()) {
    spdlog::set_default_logger(
        std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(text)));
  }
  ~LogCapture() { spdlog::set_default_logger(previous); }
  std::ostringstream text;
  std::shared_ptr<spdlog::logger> previous;
};

enum class Change { rewritten_same_size, resized, replaced_by_rename, deleted };

std::string change_name(const ::testing::TestParamInfo<Change>& info) {
  switch (info.param) {
    case Change::rewritten_same_size: return "RewrittenSameSize";
    case Change::resized: return "Resized";
    case Change::replaced_by_rename: return "ReplacedByRename";
    case Change::deleted: return "Deleted";
  }
  return "?";
}

// What the error and the reports must say about the change.
std::string expected_what(Change c) {
  switch (c) {
    case Change::rewritten_same_size: return "mtime";
    case Change::resized: return "size";
    case Change::replaced_by_rename: return "inode";
    case Change::deleted: return "vanished";
  }
  return "?";
}

// `kFiles` files of kFileSize random bytes, all with mtime kOldMtime, scanned,
// with a storage buffer of one extent per file holding the first
// `resident_files` files, and the read path over them.
class BackendChange : public ::testing::TestWithParam<Change> {
 protected:
  void make(int resident_files) {
    std::mt19937_64 rng(7);
    for (int i = 0; i < kFiles; ++i) {
      std::string p = dir_.file("f" + std::to_string(i / 10) + std::to_string(i % 10));
      test::write_file(p, test::random_bytes(rng, kFileSize));
      set_mtime(p, kOldMtime);
    }
    d_ = test::scan(dir_.path());
    ASSERT_TRUE(d_ && d_->reader);
    ASSERT_EQ(d_->manifest.file_count(), static_cast<uint32_t>(kFiles));
    b_ = test::make_buffer(d_->manifest.total_bytes(), kFileSize, resident_files * kFileSize);
    ASSERT_TRUE(b_);
    fetcher_ = std::make_unique<Fetcher>(*d_->reader, StripeMap(d_->manifest.total_bytes(), 1), 0);
    fetcher_->set_local(b_.get());
    reader_ = std::make_unique<SampleReader>(d_->manifest, *b_, *fetcher_, nullptr, nullptr);
  }
  void load() {
    Loader loader(*b_, *d_->reader, LoaderOptions{.threads = 2, .log_interval_s = 0, .label = "changes"});
    loader.start();
    loader.wait();
  }
  // Applies the change to file f (new bytes where there are bytes at all).
  void apply(Change c, uint32_t f) {
    const std::string path = d_->path_of(f);
    std::mt19937_64 rng(1000 + f);
    switch (c) {
      case Change::rewritten_same_size:
        test::write_file(path, test::random_bytes(rng, kFileSize));
        set_mtime(path, kOldMtime + 10);
        break;
      case Change::resized:
        test::write_file(path, test::random_bytes(rng, kFileSize + 100));
        break;
      case Change::replaced_by_rename: {
        // The very same bytes and mtime under a new inode: only the inode tells.
        std::string tmp = dir_.file("tmp");
        test::write_file(tmp, test::slice(d_->bytes, d_->manifest.file_data_offset(f), kFileSize));
        set_mtime(tmp, kOldMtime);
        fs::rename(tmp, path);
        break;
      }
      case Change::deleted:
        ASSERT_TRUE(fs::remove(path));
        break;
    }
  }
  // Reads file f whole through the read path (as raw/ does).
  Status read_file(uint32_t f, std::vector<std::byte>& got) {
    Gather g;
    g.reset(kFileSize);
    Status s = reader_->read_bytes(d_->manifest.file_data_offset(f), kFileSize, g, counters_);
    got = s ? test::flatten(g.iov(), g.count()) : std::vector<std::byte>{};
    return s;
  }
  std::vector<std::byte> scanned(uint32_t f) const {
    auto s = test::slice(d_->bytes, d_->manifest.file_data_offset(f), kFileSize);
    return {s.begin(), s.end()};
  }
  // The file reads back exactly as scanned.
  void expect_scanned_bytes(uint32_t f) {
    std::vector<std::byte> got;
    Status s = read_file(f, got);
    ASSERT_TRUE(s) << d_->manifest.file_path(f) << ": " << s.message();
    EXPECT_TRUE(got == scanned(f)) << d_->manifest.file_path(f) << " is not the scanned version";
  }
  // The read fails with EIO naming the file and the change.
  void expect_eio(uint32_t f, Change c) {
    std::vector<std::byte> got;
    Status s = read_file(f, got);
    ASSERT_FALSE(s) << d_->manifest.file_path(f) << " read " << got.size() << " bytes after it changed";
    EXPECT_EQ(s.err(), EIO) << s.message();
    EXPECT_TRUE(contains(s.message(), "'" + d_->manifest.file_path(f) + "'")) << s.message();
    EXPECT_TRUE(contains(s.message(), expected_what(c))) << s.message();
  }

  TempDir dir_;
  std::unique_ptr<test::Dataset> d_;
  std::unique_ptr<StorageBuffer> b_;
  std::unique_ptr<Fetcher> fetcher_;
  std::unique_ptr<SampleReader> reader_;
  ReadCounters counters_;
};

TEST_P(BackendChange, BeforeTheLoadFailsThatFileOnlyAndNamesIt) {
  make(kFiles);
  const uint32_t victim = 5;
  apply(GetParam(), victim);
  LogCapture log;
  load();
  const std::string name = d_->manifest.file_path(victim);
  for (uint32_t f = 0; f < kFiles; ++f)
    EXPECT_EQ(b_->state(f), f == victim ? ExtentState::failed : ExtentState::resident) << "extent " << f;
  EXPECT_TRUE(contains(log.text.str(), "backend file '" + name + "' changed since the scan")) << log.text.str();
  EXPECT_TRUE(contains(log.text.str(), expected_what(GetParam()))) << log.text.str();

  const uint64_t errors = d_->reader->errors();
  EXPECT_GE(errors, 1u) << "the load's failed read counts as a backend error";
  expect_eio(victim, GetParam());
  EXPECT_GT(d_->reader->errors(), errors) << "so does each failed read after it";
  for (uint32_t f = 0; f < kFiles; ++f)
    if (f != victim) expect_scanned_bytes(f);
  const auto& changed = d_->reader->changed_files();
  EXPECT_EQ(changed.count(), 1u);
  auto listed = changed.first(10);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].path, name);
  EXPECT_TRUE(contains(listed[0].what, expected_what(GetParam()))) << listed[0].what;
}

TEST_P(BackendChange, AfterTheLoadResidentBytesStayTheScannedVersion) {
  make(kFiles);
  load();
  ASSERT_EQ(b_->resident_extents(), static_cast<uint64_t>(kFiles));
  const uint32_t victim = 3;
  apply(GetParam(), victim);
  expect_scanned_bytes(victim);
  EXPECT_EQ(counters_.fetched_bytes.load(), 0u) << "a resident read touched the backend";
  EXPECT_EQ(d_->reader->changed_files().count(), 0u) << "nothing read the backend, nothing could know";

  // verify reads the backend: it names the file as changed, not as corrupt.
  VerifyReport r = verify_buffer(*b_, *d_->reader);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.mismatches.empty()) << r.mismatches[0].what;
  EXPECT_EQ(r.extents_changed, 1u);
  ASSERT_EQ(r.changed_count, 1u);
  ASSERT_EQ(r.changed.size(), 1u);
  EXPECT_EQ(r.changed[0].path, d_->manifest.file_path(victim));
  EXPECT_TRUE(contains(r.changed[0].what, expected_what(GetParam()))) << r.changed[0].what;
  // Known changed now, and still served from memory, as scanned.
  expect_scanned_bytes(victim);
}

TEST_P(BackendChange, AfterTheLoadNonResidentReadsFailAndStayFailed) {
  make(kFiles / 2);  // files [0, 6) resident, [6, 12) on the backend only
  load();
  const uint32_t loaded = 1, on_backend = 8;
  ASSERT_EQ(b_->state(loaded), ExtentState::resident);
  ASSERT_EQ(b_->state(on_backend), ExtentState::absent);
  apply(GetParam(), loaded);
  apply(GetParam(), on_backend);

  expect_scanned_bytes(loaded);
  expect_eio(on_backend, GetParam());
  for (uint32_t f = 0; f < kFiles; ++f)
    if (f != loaded && f != on_backend) expect_scanned_bytes(f);

  // Put the scanned bytes and mtime back (a new inode for some changes): the
  // file is known changed, so it keeps failing rather than trusting stat again.
  test::write_file(d_->path_of(on_backend), scanned(on_backend));
  set_mtime(d_->path_of(on_backend), kOldMtime);
  expect_eio(on_backend, GetParam());
  EXPECT_EQ(d_->reader->changed_files().count(), 1u) << "the resident file was never read from the backend";
}

INSTANTIATE_TEST_SUITE_P(Changes, BackendChange,
                         ::testing::Values(Change::rewritten_same_size, Change::resized, Change::replaced_by_rename,
                                           Change::deleted),
                         change_name);

// A sample that straddles the memory budget: its head is resident, its tail
// is not. After a change it fails whole (never resident old bytes glued to
// new backend bytes); the resident head alone still reads as scanned.
TEST(BackendChangeStraddling, NeverMixesResidentAndBackendBytes) {
  TempDir dir;
  std::mt19937_64 rng(3);
  const std::string a = dir.write_file("a", "0123456789");  // 10 bytes: "b" starts mid-extent
  test::write_file(dir.file("b"), test::random_bytes(rng, 3 * kFileSize));
  set_mtime(a, kOldMtime);
  set_mtime(dir.file("b"), kOldMtime);
  auto d = test::scan(dir.path());
  ASSERT_TRUE(d && d->reader);
  auto b = test::make_buffer(d->manifest.total_bytes(), kFileSize, 2 * kFileSize);
  ASSERT_TRUE(b);
  Loader loader(*b, *d->reader, LoaderOptions{.threads = 1, .log_interval_s = 0, .label = "straddle"});
  loader.start();
  loader.wait();
  ASSERT_EQ(b->resident_extents(), 2u);
  Fetcher fetcher(*d->reader, StripeMap(d->manifest.total_bytes(), 1), 0);
  fetcher.set_local(b.get());
  SampleReader reader(d->manifest, *b, fetcher, nullptr, nullptr);
  ReadCounters c;

  test::write_file(dir.file("b"), test::random_bytes(rng, 3 * kFileSize));  // same size, mtime now
  Gather g;
  const uint64_t begin = d->manifest.file_data_offset(1), size = d->manifest.file_size(1);
  g.reset(size);
  Status s = reader.read_bytes(begin, size, g, c);
  ASSERT_FALSE(s) << "a sample half in memory, half on a changed backend was served";
  EXPECT_EQ(s.err(), EIO);
  EXPECT_TRUE(contains(s.message(), "'b'")) << s.message();

  const uint64_t head = 2 * kFileSize - begin;  // the resident part of b
  g.reset(head);
  ASSERT_TRUE(reader.read_bytes(begin, head, g, c));
  auto got = test::flatten(g.iov(), g.count());
  auto want = test::slice(d->bytes, begin, head);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end()));
}

// A rewrite while the loader reads the file: every extent that became
// resident holds the scanned bytes; the rest failed; the file is named.
TEST(BackendChangeDuringLoad, ResidentExtentsHoldOnlyTheScannedVersion) {
  TempDir dir;
  const std::string path = dir.file("big.bin");
  constexpr uint64_t kSize = 256ull << 20, kExtent = 1 << 20;
  {
    int fd = ::open(path.c_str(), O_CREAT | O_WRONLY, 0644);  // sparse: the scanned bytes are zeros
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(kSize)), 0);
    ::close(fd);
  }
  set_mtime(path, kOldMtime);
  auto m = provenance::Manifest::build(dir.path(), {});
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  auto backend = BackendReader::open(*m);
  ASSERT_TRUE(backend.is_ok());
  auto b = test::make_buffer(kSize, kExtent);
  ASSERT_TRUE(b);
  Loader loader(*b, **backend, LoaderOptions{.threads = 2, .read_size = 4096, .log_interval_s = 0, .label = "during"});
  loader.start();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (loader.progress().extents_loaded < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_GE(loader.progress().extents_loaded, 2u);
  if (loader.progress().done) GTEST_SKIP() << "the load finished before the rewrite could start";
  {
    // Rewrite the whole file with 0xff, front to back, in place (same size, same inode).
    int fd = ::open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    std::vector<std::byte> ones(kExtent, std::byte{0xff});
    for (uint64_t off = 0; off < kSize; off += kExtent)
      ASSERT_EQ(::pwrite(fd, ones.data(), ones.size(), static_cast<off_t>(off)), static_cast<ssize_t>(kExtent));
    ::close(fd);
  }
  loader.wait();
  EXPECT_GT(loader.progress().extents_failed, 0u);
  std::vector<std::byte> zeros(kExtent);
  for (uint64_t e = 0; e < b->extent_count(); ++e) {
    if (b->state(e) != ExtentState::resident) continue;
    ASSERT_EQ(std::memcmp(b->extent_data(e), zeros.data(), kExtent), 0) << "extent " << e << " holds rewritten bytes";
  }
  EXPECT_EQ((*backend)->changed_files().count(), 1u);
  std::vector<std::byte> one(1);
  Status s = (*backend)->read_file(0, 0, one);
  EXPECT_EQ(s.err(), EIO) << s.message();
  EXPECT_TRUE(contains(s.message(), "'big.bin' changed since the scan")) << s.message();
}

TEST(DescribeChange, NamesEveryFieldThatDiffers) {
  provenance::FileIdentity pin{100, 5'000000001, 7, 9};
  struct stat st {};
  st.st_size = 100;
  st.st_mtim = {5, 1};
  st.st_ino = 7;
  st.st_dev = 9;
  EXPECT_EQ(describe_change(pin, st), "");
  st.st_size = 120;
  st.st_mtim = {6, 250000000};
  st.st_ino = 8;
  EXPECT_EQ(describe_change(pin, st),
            "size 100 -> 120, mtime 5.000000001 -> 6.250000000, inode 7 -> 8 (replaced)");
}

}  // namespace
}  // namespace dlfs::cache
