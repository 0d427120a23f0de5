// Manifest: canonical order, tree tables, skipped entries, formats, errors, cost.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "provenance/dataset_format.h"
#include "provenance/manifest.h"
#include "temp_dir.h"

namespace dlfs::provenance {
namespace {

namespace stdfs = std::filesystem;

class ManifestTest : public ::dlfs::test::TempDirTest {
 protected:
  void SetUp() override {
    base_ = tmp_.path();
    root_ = base_ + "/root";
    stdfs::create_directories(root_);
  }

  void write(const std::string& rel, size_t size) {
    stdfs::create_directories(stdfs::path(root_ + "/" + rel).parent_path());
    std::ofstream(root_ + "/" + rel, std::ios::binary) << std::string(size, 'x');
  }
  Manifest build(FormatOptions o = {}, ScanReport* r = nullptr) {
    auto m = Manifest::build(root_, o, r);
    EXPECT_TRUE(m.is_ok()) << m.status().message();
    return std::move(m).value();
  }
  std::string base_, root_;
};

TEST_F(ManifestTest, CanonicalOrderIsByteWiseSortedFullPath) {
  write("a/c", 3);
  write("a/b/x", 2);
  write("a/b.txt", 1);
  write("Z", 4);  // uppercase sorts before lowercase
  Manifest m = build();
  ASSERT_EQ(m.file_count(), 4u);
  std::vector<std::string> paths;
  for (uint32_t f = 0; f < m.file_count(); ++f) paths.push_back(m.file_path(f));
  EXPECT_EQ(paths, (std::vector<std::string>{"Z", "a/b.txt", "a/b/x", "a/c"}));
  // dir_files of "a": b.txt and c, by name; subdirs: b.
  auto a = m.find_subdir(kRootDir, "a");
  ASSERT_TRUE(a.has_value());
  std::vector<std::string> files;
  for (auto f : m.dir_files(*a)) files.emplace_back(m.file_name(f));
  EXPECT_EQ(files, (std::vector<std::string>{"b.txt", "c"}));
  ASSERT_EQ(m.dir_subdirs(*a).size(), 1u);
  EXPECT_EQ(m.dir_name(m.dir_subdirs(*a)[0]), "b");
  EXPECT_EQ(m.dir_path(m.dir_subdirs(*a)[0]), "a/b");
  EXPECT_EQ(m.dir_parent(*a), kRootDir);
  EXPECT_EQ(m.sample_name(2), "a/b/x");
}

TEST_F(ManifestTest, PinsWhatTheScanSawOfEveryFile) {
  write("a/one", 10);
  write("b", 0);
  write("c", 3);
  Manifest m = build();
  ASSERT_EQ(m.file_count(), 3u);
  for (uint32_t f = 0; f < m.file_count(); ++f) {
    struct stat st {};
    ASSERT_EQ(::stat((root_ + "/" + m.file_path(f)).c_str(), &st), 0);
    const FileIdentity id = m.file_identity(f);
    EXPECT_EQ(id.size, static_cast<uint64_t>(st.st_size)) << m.file_path(f);
    EXPECT_EQ(id.mtime_ns, static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec);
    EXPECT_EQ(id.inode, static_cast<uint64_t>(st.st_ino)) << m.file_path(f);
    EXPECT_EQ(id.device, static_cast<uint64_t>(st.st_dev)) << m.file_path(f);
  }
  EXPECT_NE(m.file_identity(0).inode, m.file_identity(2).inode);
}

TEST_F(ManifestTest, OffsetsSizesAndFileAtAcrossEmptyFiles) {
  write("f0", 10);
  write("f1", 0);
  write("f2", 0);
  write("f3", 5);
  write("f4", 0);
  Manifest m = build();
  EXPECT_EQ(m.total_bytes(), 15u);
  EXPECT_EQ(m.file_data_offset(3), 10u);
  EXPECT_EQ(m.file_size(1), 0u);
  for (uint64_t off = 0; off < 10; ++off) EXPECT_EQ(m.file_at(off), 0u) << off;
  for (uint64_t off = 10; off < 15; ++off) EXPECT_EQ(m.file_at(off), 3u) << off;
  auto s = m.sample(3);
  EXPECT_EQ(s.file, 3u);
  EXPECT_EQ(s.offset, 0u);
  EXPECT_EQ(s.length, 5u);
  EXPECT_EQ(m.sample_data_offset(3), 10u);
}

TEST_F(ManifestTest, ForEachFileInGivesTheOverlapOfEveryNonEmptyFile) {
  write("f0", 10);
  write("f1", 0);
  write("f2", 0);
  write("f3", 5);
  write("f4", 0);
  write("f5", 7);
  Manifest m = build();
  using Piece = std::tuple<uint32_t, uint64_t, uint64_t>;
  auto pieces = [&](uint64_t b, uint64_t e) {
    std::vector<Piece> out;
    m.for_each_file_in(b, e, [&](uint32_t f, uint64_t pb, uint64_t pe) { out.emplace_back(f, pb, pe); });
    return out;
  };
  // Empty files inside the range are not pieces.
  EXPECT_EQ(pieces(4, 17), (std::vector<Piece>{{0, 4, 10}, {3, 10, 15}, {5, 15, 17}}));
  EXPECT_EQ(pieces(0, 22), (std::vector<Piece>{{0, 0, 10}, {3, 10, 15}, {5, 15, 22}}));
  EXPECT_EQ(pieces(11, 12), (std::vector<Piece>{{3, 11, 12}}));
  EXPECT_TRUE(pieces(5, 5).empty());
  EXPECT_TRUE(pieces(22, 30).empty());  // at or past the end
}

TEST_F(ManifestTest, LookupsHitAndMiss) {
  for (int i = 0; i < 100; ++i) write("d/f" + std::to_string(i), 1);
  stdfs::create_directories(root_ + "/d/empty");
  Manifest m = build();
  auto d = m.find_subdir(kRootDir, "d");
  ASSERT_TRUE(d);
  for (int i = 0; i < 100; ++i) {
    auto f = m.find_file(*d, "f" + std::to_string(i));
    ASSERT_TRUE(f) << i;
    EXPECT_EQ(m.file_name(*f), "f" + std::to_string(i));
  }
  EXPECT_FALSE(m.find_file(*d, "f100"));
  EXPECT_FALSE(m.find_file(*d, "empty"));      // a directory, not a file
  EXPECT_TRUE(m.find_subdir(*d, "empty"));     // empty directories are kept
  EXPECT_FALSE(m.find_subdir(kRootDir, "nope"));
  EXPECT_EQ(m.dir_count(), 3u);
}

TEST_F(ManifestTest, SymlinksAndSpecialFilesAreSkippedNeverFollowed) {
  write("real/file", 7);
  stdfs::create_directories(base_ + "/outside");
  std::ofstream(base_ + "/outside/secret") << "secret";
  stdfs::create_symlink(root_ + "/real/file", root_ + "/link_inside");
  stdfs::create_directory_symlink(base_ + "/outside", root_ + "/link_outside");
  ASSERT_EQ(::mkfifo((root_ + "/fifo").c_str(), 0644), 0);
  ScanReport r;
  Manifest m = build({}, &r);
  EXPECT_EQ(r.skipped_symlinks, 2u);
  EXPECT_EQ(r.skipped_special, 1u);
  EXPECT_FALSE(r.examples.empty());
  ASSERT_EQ(m.file_count(), 1u);
  EXPECT_EQ(m.file_path(0), "real/file");
  for (uint32_t f = 0; f < m.file_count(); ++f) EXPECT_EQ(m.file_path(f).find("secret"), std::string::npos);
}

TEST_F(ManifestTest, RootErrorsNameThePath) {
  auto missing = Manifest::build(base_ + "/missing", {});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().err(), ENOENT);
  EXPECT_NE(missing.status().message().find(base_ + "/missing"), std::string::npos);
  write("plain", 1);
  auto file = Manifest::build(root_ + "/plain", {});
  ASSERT_FALSE(file.is_ok());
  EXPECT_NE(file.status().message().find("not a directory"), std::string::npos);
  EXPECT_NE(file.status().message().find(root_ + "/plain"), std::string::npos);
}

TEST_F(ManifestTest, FixedRecordsWithHeaders) {
  write("data_batch_1.bin", 16 + 3 * 100);
  write("data_batch_2.bin", 16 + 2 * 100);
  FormatOptions o{"fixed", 100, 16};
  Manifest m = build(o);
  ASSERT_EQ(m.sample_count(), 5u);
  auto s = m.sample(3);
  EXPECT_EQ(s.file, 1u);
  EXPECT_EQ(s.offset, 16u);
  EXPECT_EQ(s.length, 100u);
  EXPECT_EQ(m.sample(2).offset, 16u + 200);
  EXPECT_EQ(m.sample_data_offset(3), m.file_data_offset(1) + 16);
  EXPECT_EQ(m.sample_name(2), "data_batch_1.bin#000002");
  EXPECT_EQ(m.sample_name(4), "data_batch_2.bin#000001");
}

TEST_F(ManifestTest, FixedRecordErrors) {
  write("good.bin", 300);
  write("bad.bin", 301);
  auto r = Manifest::build(root_, {"fixed", 100, 0});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("bad.bin"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("301"), std::string::npos);
  auto zero = Manifest::build(root_, {"fixed", 0, 0});
  ASSERT_FALSE(zero.is_ok());
  EXPECT_NE(zero.status().message().find("record size"), std::string::npos);
  auto header = Manifest::build(root_, {"fixed", 1, 400});
  ASSERT_FALSE(header.is_ok());  // header larger than the file
}

TEST_F(ManifestTest, EmptyDataset) {
  Manifest m = build();
  EXPECT_EQ(m.file_count(), 0u);
  EXPECT_EQ(m.sample_count(), 0u);
  EXPECT_EQ(m.total_bytes(), 0u);
  EXPECT_EQ(m.dir_count(), 1u);
}

TEST_F(ManifestTest, PermissionsAndMtimesAreReported) {
  write("f", 1);
  ASSERT_EQ(::chmod((root_ + "/f").c_str(), 0640), 0);
  timespec times[2] = {{1600000000, 123456789}, {1700000000, 987654321}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (root_ + "/f").c_str(), times, 0), 0);
  Manifest m = build();
  EXPECT_EQ(m.file_mode(0), 0640u);
  EXPECT_EQ(m.file_mtime_ns(0), 1700000000ll * 1000000000 + 987654321);
}

TEST_F(ManifestTest, ManySmallFilesCostWellUnder100BytesEach) {
  std::vector<std::string> paths;
  for (int d = 0; d < 100; ++d)
    for (int i = 0; i < 200; ++i) {
      char name[64];
      std::snprintf(name, sizeof name, "n%08d/n%08d_%05d.JPEG", 1440764 + d, 1440764 + d, i);
      paths.emplace_back(name);
      write(name, 1);
    }
  Manifest m = build();
  ASSERT_EQ(m.sample_count(), 20000u);
  std::sort(paths.begin(), paths.end());
  for (uint32_t f = 0; f < m.file_count(); ++f) ASSERT_EQ(m.file_path(f), paths[f]) << f;
  double per_sample = static_cast<double>(m.memory_bytes()) / static_cast<double>(m.sample_count());
  EXPECT_LT(per_sample, 100.0) << "bytes per sample";
}

TEST_F(ManifestTest, MillionsOfFixedRecordsLookUpFast) {
  write("big.bin", 1280000 * 8);
  write("small_a.bin", 8 * 3);
  write("small_b.bin", 8 * 5);
  Manifest m = build({"fixed", 8, 0});
  ASSERT_EQ(m.sample_count(), 1280008u);
  EXPECT_EQ(m.sample(0).file, 0u);
  EXPECT_EQ(m.sample(1279999).offset, 1279999u * 8);
  EXPECT_EQ(m.sample(1280000).file, 1u);
  EXPECT_EQ(m.sample(1280000).offset, 0u);
  EXPECT_EQ(m.sample(1280003).file, 2u);
  EXPECT_EQ(m.sample(1280007).offset, 32u);
  EXPECT_LT(m.memory_bytes(), 4096u) << "records are computed, not stored";
}

// Every file and directory can be found again from its path, every path is
// rebuilt from its parent, and the per-directory lists partition the files.
TEST_F(ManifestTest, PathsRoundTripThroughTheTree) {
  const std::vector<std::pair<std::string, size_t>> files = {
      {"a/b.txt", 1}, {"a/b/x", 2}, {"a/b/y/z", 3}, {"a/c", 4}, {"a-b/x", 5}, {"a.b", 6},
      {"a0", 7},      {"Z/q", 8},   {"\xc3\xa9t\xc3\xa9", 9}, {"z", 10}, {"a/b/y/.hidden", 11}};
  for (const auto& [p, n] : files) write(p, n);
  stdfs::create_directories(root_ + "/a/empty/deeper");
  Manifest m = build();
  ASSERT_EQ(m.file_count(), files.size());

  std::vector<std::string> expected;
  for (const auto& f : files) expected.push_back(f.first);
  std::sort(expected.begin(), expected.end());  // byte-wise, as LC_ALL=C sort
  std::vector<uint32_t> seen(m.file_count(), 0);
  for (uint32_t f = 0; f < m.file_count(); ++f) {
    const std::string path = m.file_path(f);
    EXPECT_EQ(path, expected[f]) << f;
    // Size as written, offsets are the prefix sum.
    auto it = std::find_if(files.begin(), files.end(), [&](auto& e) { return e.first == path; });
    ASSERT_NE(it, files.end());
    EXPECT_EQ(m.file_size(f), it->second) << path;
    if (f + 1 < m.file_count()) {
      EXPECT_EQ(m.file_data_offset(f + 1), m.file_data_offset(f) + m.file_size(f)) << path;
    }
    // Walk the path from the root.
    uint32_t d = kRootDir;
    std::string rest = path;
    for (size_t slash; (slash = rest.find('/')) != std::string::npos; rest = rest.substr(slash + 1)) {
      auto sub = m.find_subdir(d, rest.substr(0, slash));
      ASSERT_TRUE(sub) << path;
      d = *sub;
    }
    EXPECT_EQ(m.file_parent(f), d) << path;
    EXPECT_EQ(m.file_name(f), rest);
    EXPECT_EQ(m.find_file(d, rest), f) << path;
    const std::string parent = m.dir_path(d);
    EXPECT_EQ(parent.empty() ? rest : parent + "/" + rest, path);
  }
  EXPECT_EQ(m.file_data_offset(m.file_count() - 1) + m.file_size(m.file_count() - 1), m.total_bytes());
  for (uint32_t d = 0; d < m.dir_count(); ++d) {
    auto fs = m.dir_files(d);
    for (size_t i = 0; i < fs.size(); ++i) {
      ++seen[fs[i]];
      EXPECT_EQ(m.file_parent(fs[i]), d);
      if (i) {
        EXPECT_LT(m.file_name(fs[i - 1]), m.file_name(fs[i]));
      }
    }
    auto ds = m.dir_subdirs(d);
    for (size_t i = 0; i < ds.size(); ++i) {
      EXPECT_EQ(m.dir_parent(ds[i]), d);
      EXPECT_NE(ds[i], kRootDir);
      if (i) {
        EXPECT_LT(m.dir_name(ds[i - 1]), m.dir_name(ds[i]));
      }
    }
    if (d == kRootDir) continue;
    // dir_path walks back down to d.
    uint32_t w = kRootDir;
    std::string rest = m.dir_path(d) + "/";
    for (size_t slash; (slash = rest.find('/')) != std::string::npos; rest = rest.substr(slash + 1)) {
      auto sub = m.find_subdir(w, rest.substr(0, slash));
      ASSERT_TRUE(sub) << m.dir_path(d);
      w = *sub;
    }
    EXPECT_EQ(w, d);
  }
  for (uint32_t f = 0; f < m.file_count(); ++f) EXPECT_EQ(seen[f], 1u) << m.file_path(f);
  // Root's children, by name: "Z" < "a" < "a-b"; files "a.b" < "a0" < "z" < "\xc3\xa9t\xc3\xa9".
  std::vector<std::string> root_dirs, root_files;
  for (auto d : m.dir_subdirs(kRootDir)) root_dirs.emplace_back(m.dir_name(d));
  for (auto f : m.dir_files(kRootDir)) root_files.emplace_back(m.file_name(f));
  EXPECT_EQ(root_dirs, (std::vector<std::string>{"Z", "a", "a-b"}));
  EXPECT_EQ(root_files, (std::vector<std::string>{"a.b", "a0", "z", "\xc3\xa9t\xc3\xa9"}));
  auto empty = m.find_subdir(*m.find_subdir(kRootDir, "a"), "empty");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(m.dir_files(*empty).empty());
  ASSERT_EQ(m.dir_subdirs(*empty).size(), 1u);
  EXPECT_EQ(m.dir_path(m.dir_subdirs(*empty)[0]), "a/empty/deeper");
  EXPECT_EQ(m.dir_name(kRootDir), "");
  EXPECT_EQ(m.dir_path(kRootDir), "");
  EXPECT_EQ(m.dir_parent(kRootDir), kRootDir);
}

TEST_F(ManifestTest, FileAtEveryBoundaryWithEmptyFilesFirstBetweenAndLast) {
  // Sizes: e e 3 e 1 e e 4 e  (e = empty)
  const std::vector<size_t> sizes = {0, 0, 3, 0, 1, 0, 0, 4, 0};
  for (size_t i = 0; i < sizes.size(); ++i) write("f" + std::to_string(i), sizes[i]);
  Manifest m = build();
  ASSERT_EQ(m.file_count(), sizes.size());
  ASSERT_EQ(m.total_bytes(), 8u);
  uint64_t off = 0;
  for (uint32_t f = 0; f < m.file_count(); ++f) {
    EXPECT_EQ(m.file_data_offset(f), off) << f;
    EXPECT_EQ(m.file_size(f), sizes[f]);
    off += sizes[f];
  }
  const std::vector<uint32_t> owner = {2, 2, 2, 4, 7, 7, 7, 7};
  for (uint64_t o = 0; o < m.total_bytes(); ++o) EXPECT_EQ(m.file_at(o), owner[o]) << "offset " << o;
  // files format: one sample per file, empty ones included.
  ASSERT_EQ(m.sample_count(), sizes.size());
  EXPECT_EQ(m.sample(8).length, 0u);
  EXPECT_EQ(m.sample_data_offset(8), 8u);
  EXPECT_EQ(m.sample_data_offset(0), 0u);
}

TEST_F(ManifestTest, SocketsAreSpecialFilesAndReportsAreReset) {
  write("keep", 1);
  int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string path = root_ + "/sock";
  ASSERT_LT(path.size(), sizeof addr.sun_path);
  std::strcpy(addr.sun_path, path.c_str());
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ::close(s);
  ScanReport r;
  r.skipped_symlinks = 99;  // stale content from a previous scan
  r.examples = {"old"};
  Manifest m = build({}, &r);
  EXPECT_EQ(m.file_count(), 1u);
  EXPECT_EQ(r.skipped_special, 1u);
  EXPECT_EQ(r.skipped_symlinks, 0u);
  ASSERT_EQ(r.examples.size(), 1u);
  EXPECT_NE(r.examples[0].find("sock"), std::string::npos);
}

TEST_F(ManifestTest, SymlinkedDirectoryBelowTheRootIsNotEntered) {
  write("d/f", 3);
  stdfs::create_directory_symlink(root_ + "/d", root_ + "/alias");  // would duplicate d/f
  ScanReport r;
  Manifest m = build({}, &r);
  EXPECT_EQ(m.file_count(), 1u);
  EXPECT_FALSE(m.find_subdir(kRootDir, "alias"));
  EXPECT_FALSE(m.find_file(kRootDir, "alias"));
  EXPECT_EQ(r.skipped_symlinks, 1u);
  EXPECT_EQ(m.dir_count(), 2u);
}

TEST_F(ManifestTest, FixedSkipsFilesWithOnlyAHeaderAndNamesRecordsAcrossFiles) {
  // header 4, record 10: files with 0, 150, 0, 2, 0 records.
  write("a/h0.bin", 4);
  write("a/h1.bin", 4 + 150 * 10);
  write("b/h2.bin", 4);
  write("b/h3.bin", 4 + 2 * 10);
  write("c.bin", 4);
  Manifest m = build({"fixed", 10, 4});
  ASSERT_EQ(m.file_count(), 5u);
  ASSERT_EQ(m.sample_count(), 152u);
  for (uint64_t i = 0; i < 150; ++i) {
    auto s = m.sample(i);
    EXPECT_EQ(s.file, 1u) << i;
    EXPECT_EQ(s.offset, 4 + i * 10) << i;
    EXPECT_EQ(s.length, 10u);
    EXPECT_EQ(m.sample_data_offset(i), m.file_data_offset(1) + 4 + i * 10);
  }
  EXPECT_EQ(m.sample_name(0), "a/h1.bin#000000");
  EXPECT_EQ(m.sample_name(123), "a/h1.bin#000123");
  EXPECT_EQ(m.sample_name(149), "a/h1.bin#000149");
  EXPECT_EQ(m.sample(150).file, 3u);
  EXPECT_EQ(m.sample(150).offset, 4u);
  EXPECT_EQ(m.sample(151).offset, 14u);
  EXPECT_EQ(m.sample_name(151), "b/h3.bin#000001");
  EXPECT_EQ(m.sample_data_offset(151), m.file_data_offset(3) + 14);
  // Header bytes are in the byte space but in no sample.
  EXPECT_EQ(m.total_bytes(), 5u * 4 + 152 * 10);
}

TEST_F(ManifestTest, FixedErrorNamesTheFileInItsDirectory) {
  write("ok/a.bin", 32);
  write("sub/dir/odd.bin", 33);
  auto r = Manifest::build(root_, {"fixed", 8, 0});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().err(), EINVAL);
  EXPECT_NE(r.status().message().find("sub/dir/odd.bin"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("33"), std::string::npos);
  auto header = Manifest::build(root_, {"fixed", 1, 33});
  ASSERT_FALSE(header.is_ok());
  EXPECT_NE(header.status().message().find("ok/a.bin"), std::string::npos) << header.status().message();
}

TEST_F(ManifestTest, FixedMillionRecordsAmongSmallFilesCostAlmostNothingPerSample) {
  // Small files before and after the big one, with a 16-byte header each.
  write("a_small.bin", 16 + 8 * 7);
  write("big.bin", 16 + 1280000ull * 8);
  write("c_small.bin", 16 + 8 * 1);
  write("d_small.bin", 16 + 8 * 9);
  Manifest m = build({"fixed", 8, 16});
  ASSERT_EQ(m.sample_count(), 7u + 1280000 + 1 + 9);
  const uint64_t big0 = 7, big_end = 7 + 1280000;
  EXPECT_EQ(m.sample(6).file, 0u);
  EXPECT_EQ(m.sample(6).offset, 16u + 48);
  EXPECT_EQ(m.sample(big0).file, 1u);
  EXPECT_EQ(m.sample(big0).offset, 16u);
  EXPECT_EQ(m.sample(big_end - 1).file, 1u);
  EXPECT_EQ(m.sample(big_end - 1).offset, 16u + 1279999ull * 8);
  EXPECT_EQ(m.sample_name(big_end - 1), "big.bin#1279999");
  EXPECT_EQ(m.sample(big_end).file, 2u);
  EXPECT_EQ(m.sample(big_end).offset, 16u);
  EXPECT_EQ(m.sample(big_end + 1).file, 3u);
  EXPECT_EQ(m.sample(m.sample_count() - 1).offset, 16u + 8 * 8);
  EXPECT_EQ(m.sample_data_offset(m.sample_count() - 1) + 8, m.total_bytes());
  double per_sample = static_cast<double>(m.memory_bytes()) / static_cast<double>(m.sample_count());
  EXPECT_LT(per_sample, 1.0);
}

TEST_F(ManifestTest, DirectoryModesAndMtimesAreReported) {
  stdfs::create_directories(root_ + "/d");
  ASSERT_EQ(::chmod((root_ + "/d").c_str(), 0750), 0);
  ASSERT_EQ(::chmod((root_ + "/").c_str(), 0711), 0);
  timespec times[2] = {{1500000000, 1}, {1500000001, 2}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (root_ + "/d").c_str(), times, 0), 0);
  write("x", 0);
  ASSERT_EQ(::chmod((root_ + "/x").c_str(), 04755), 0);  // setuid bit is kept with the permissions
  Manifest m = build();
  auto d = m.find_subdir(kRootDir, "d");
  ASSERT_TRUE(d);
  EXPECT_EQ(m.dir_mode(*d), 0750u);
  EXPECT_EQ(m.dir_mode(kRootDir), 0711u);
  EXPECT_EQ(m.dir_mtime_ns(*d), 1500000001ll * 1000000000 + 2);
  EXPECT_EQ(m.file_mode(0), 04755u);
}

// The scan must not hold one descriptor per pending directory: a dataset
// with more sibling directories than RLIMIT_NOFILE (ImageNet-21k has 21,841
// class directories side by side; the usual soft limit is 1024) would silently
// lose every directory past the limit ("cannot open directory" -> unreadable).
TEST_F(ManifestTest, WideTreesDoNotRunOutOfFileDescriptors) {
  const int kDirs = 300;
  for (int i = 0; i < kDirs; ++i) write("c" + std::to_string(10000 + i) + "/img.jpg", 1);
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = 128;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  ScanReport r;
  auto m = Manifest::build(root_, {}, &r);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(r.unreadable, 0u) << (r.examples.empty() ? "" : r.examples[0]);
  EXPECT_EQ(m->file_count(), static_cast<uint32_t>(kDirs));
  EXPECT_EQ(m->dir_count(), static_cast<uint32_t>(kDirs + 1));
}

TEST_F(ManifestTest, UnpaddedNamesInManyDirsMatchSortedPaths) {
  // 100 dirs x 20 files with names whose numeric and byte-wise orders differ.
  std::vector<std::string> paths;
  for (int d = 0; d < 100; ++d)
    for (int i = 0; i < 20; ++i) paths.push_back("d" + std::to_string(d) + "/f" + std::to_string(i) + ".jpg");
  for (const auto& p : paths) write(p, static_cast<size_t>(p.size() % 3));
  Manifest m = build();
  ASSERT_EQ(m.file_count(), paths.size());
  std::sort(paths.begin(), paths.end());
  uint64_t off = 0;
  for (uint32_t f = 0; f < m.file_count(); ++f) {
    ASSERT_EQ(m.file_path(f), paths[f]) << f;
    ASSERT_EQ(m.file_data_offset(f), off);
    ASSERT_EQ(m.file_size(f), paths[f].size() % 3);
    off += paths[f].size() % 3;
  }
  EXPECT_EQ(m.total_bytes(), off);
  EXPECT_LT(static_cast<double>(m.memory_bytes()) / static_cast<double>(m.sample_count()), 100.0);
}

TEST(ManifestFormat, RegistryFindsEveryFormatByName) {
  std::vector<std::string> names;
  for (const DatasetFormat* f : dataset_formats()) names.emplace_back(f->name());
  EXPECT_EQ(names, (std::vector<std::string>{"files", "fixed", "lmdb", "tfrecord", "tar"}));
  for (const auto& n : names) {
    auto f = find_dataset_format(n);
    ASSERT_TRUE(f.is_ok()) << n;
    EXPECT_EQ((*f)->name(), n);
  }
  auto bad = find_dataset_format("hdf5");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("hdf5"), std::string::npos);
  EXPECT_NE(bad.status().message().find("files, fixed, lmdb, tfrecord"), std::string::npos) << bad.status().message();
  // A dataset built with an unknown format names it.
  auto m = Manifest::build("/", FormatOptions{"hdf5"});
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("hdf5"), std::string::npos);
}

}  // namespace
}  // namespace dlfs::provenance
