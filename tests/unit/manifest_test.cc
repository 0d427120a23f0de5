// Manifest: canonical order, tree tables, skipped entries, formats, errors, cost.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "provenance/manifest.h"

namespace dlfs::provenance {
namespace {

namespace stdfs = std::filesystem;

class ManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dlfs-manifest-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    root_ = base_ + "/root";
    stdfs::create_directories(root_);
  }
  void TearDown() override { stdfs::remove_all(base_); }

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
  FormatOptions o{DatasetFormat::fixed, 100, 16};
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
  auto r = Manifest::build(root_, {DatasetFormat::fixed, 100, 0});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("bad.bin"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("301"), std::string::npos);
  auto zero = Manifest::build(root_, {DatasetFormat::fixed, 0, 0});
  ASSERT_FALSE(zero.is_ok());
  EXPECT_NE(zero.status().message().find("record size"), std::string::npos);
  auto header = Manifest::build(root_, {DatasetFormat::fixed, 1, 400});
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
  for (uint32_t f = 0; f < m.file_count(); f += 997) EXPECT_EQ(m.file_path(f), paths[f]);
  double per_sample = static_cast<double>(m.memory_bytes()) / static_cast<double>(m.sample_count());
  EXPECT_LT(per_sample, 100.0) << "bytes per sample";
}

TEST_F(ManifestTest, MillionsOfFixedRecordsLookUpFast) {
  write("big.bin", 1280000 * 8);
  write("small_a.bin", 8 * 3);
  write("small_b.bin", 8 * 5);
  Manifest m = build({DatasetFormat::fixed, 8, 0});
  ASSERT_EQ(m.sample_count(), 1280008u);
  EXPECT_EQ(m.sample(0).file, 0u);
  EXPECT_EQ(m.sample(1279999).offset, 1279999u * 8);
  EXPECT_EQ(m.sample(1280000).file, 1u);
  EXPECT_EQ(m.sample(1280000).offset, 0u);
  EXPECT_EQ(m.sample(1280003).file, 2u);
  EXPECT_EQ(m.sample(1280007).offset, 32u);
  EXPECT_LT(m.memory_bytes(), 4096u) << "records are computed, not stored";
}

TEST(ManifestFormat, ParseAndName) {
  EXPECT_EQ(*parse_format("files"), DatasetFormat::files);
  EXPECT_EQ(*parse_format("fixed"), DatasetFormat::fixed);
  auto bad = parse_format("tfrecord");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("tfrecord"), std::string::npos);
  EXPECT_EQ(format_name(DatasetFormat::fixed), "fixed");
}

}  // namespace
}  // namespace dlfs::provenance
