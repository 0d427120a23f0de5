// Helpers shared by the cache unit tests: temporary datasets on disk, built
// into a Manifest through its public API, plus the expected byte space read
// independently of BackendReader (plain file reads in manifest order).
#pragma once

#include <gtest/gtest.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cache/backend_reader.h"
#include "cache/storage_buffer.h"
#include "provenance/manifest.h"
#include "temp_dir.h"

namespace dlfs::cache::test {

namespace fs = std::filesystem;

using ::dlfs::test::TempDir;

inline std::vector<std::byte> random_bytes(std::mt19937_64& rng, size_t n) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t r = rng();
    std::memcpy(v.data() + i, &r, std::min<size_t>(8, n - i));
  }
  return v;
}

inline void write_file(const fs::path& p, std::span<const std::byte> bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << p;
}

inline std::vector<std::byte> read_whole(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<std::byte> v(fs::file_size(p));
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size()));
  EXPECT_TRUE(in.good() || v.empty()) << "cannot read " << p;
  return v;
}

// `files` files of random sizes in [0, max_size] (some empty) spread over a
// few directories whose names sort differently by path and by tree ("a-b" <
// "a/..." < "a.b" byte-wise).
inline void make_dataset(const std::string& root, int files, size_t max_size, uint64_t seed) {
  static const char* dirs[] = {"", "a", "a/b", "a/b/c", "a-b", "a.b", "z", "m/n"};
  std::mt19937_64 rng(seed);
  for (int i = 0; i < files; ++i) {
    const char* d = dirs[rng() % std::size(dirs)];
    size_t size = (rng() % 16 == 0) ? 0 : static_cast<size_t>(rng() % (max_size + 1));
    fs::path p = fs::path(root) / d / ("f" + std::to_string(i) + ".bin");
    write_file(p, random_bytes(rng, size));
  }
}

// A scanned dataset with its reader. Not movable: the reader refers to the manifest.
struct Dataset {
  provenance::Manifest manifest;
  std::unique_ptr<BackendReader> reader;
  std::vector<std::byte> bytes;  // the byte space, read with plain file reads

  explicit Dataset(provenance::Manifest m) : manifest(std::move(m)) {}
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;
  std::string path_of(uint32_t f) const { return manifest.root() + "/" + manifest.file_path(f); }
};

inline std::unique_ptr<Dataset> scan(const std::string& root) {
  auto m = provenance::Manifest::build(root, provenance::FormatOptions{});
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (!m) return nullptr;
  auto d = std::make_unique<Dataset>(std::move(m).value());
  for (uint32_t f = 0; f < d->manifest.file_count(); ++f) {
    auto b = read_whole(d->path_of(f));
    EXPECT_EQ(b.size(), d->manifest.file_size(f)) << d->manifest.file_path(f);
    d->bytes.insert(d->bytes.end(), b.begin(), b.end());
  }
  EXPECT_EQ(d->bytes.size(), d->manifest.total_bytes());
  auto r = BackendReader::open(d->manifest);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  if (r) d->reader = std::move(r).value();
  return d;
}

inline std::unique_ptr<StorageBuffer> make_buffer(uint64_t total, uint64_t extent, uint64_t budget = ~0ull) {
  StorageOptions o;
  o.extent_size = extent;
  o.memory_budget = budget;
  auto b = StorageBuffer::create(0, total, o);
  EXPECT_TRUE(b.is_ok()) << b.status().message();
  return b ? std::move(b).value() : nullptr;
}

inline std::vector<std::byte> flatten(const iovec* iov, size_t count) {
  std::vector<std::byte> v;
  for (size_t i = 0; i < count; ++i) {
    auto* p = static_cast<const std::byte*>(iov[i].iov_base);
    v.insert(v.end(), p, p + iov[i].iov_len);
  }
  return v;
}

inline std::span<const std::byte> slice(const std::vector<std::byte>& v, uint64_t off, uint64_t len) {
  return std::span<const std::byte>(v).subspan(off, len);
}

}  // namespace dlfs::cache::test
