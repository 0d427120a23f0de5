// Helpers for the epoch-view unit tests (fs_views, rounds, opportunistic,
// view_registry): small generated datasets whose samples the test knows
// without asking DLFS (names and bytes, in canonical order), a Namespace
// over them built without FUSE, reads of whole open files in odd chunks, and
// an independent parser of the ustar/GNU tar streams the views produce.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <lmdb.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fs/config/config.h"
#include "fs/dataset/dataset.h"
#include "fs/namespace/inode.h"
#include "fs/namespace/namespace.h"
#include "plan/epoch_plan.h"
#include "temp_dir.h"
#include "tfrecord_test_util.h"

namespace dlfs::fs::test {

namespace stdfs = std::filesystem;

// What the test knows about one sample: its name inside views and its bytes.
struct Sample {
  std::string member;
  std::string bytes;
};

// A generated dataset: how to open it, and its samples in canonical order
// (computed by the test from what it wrote, not from the manifest).
struct Generated {
  provenance::FormatOptions format;
  std::vector<Sample> samples;
  uint64_t record_size = 0;  // every sample has this size (0: sizes vary)
};

inline std::string random_string(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// `files`: every file a sample. Names exercise what tar and the directory
// view must handle: '%' (escaped in entries), a path longer than 100 bytes
// that splits at a '/' (ustar prefix), a file name longer than 100 bytes
// (GNU long-name record), an empty file, and directories whose names sort
// differently by path and by tree ("a-b" < "a.b" < "a/" byte-wise).
inline Generated make_files_dataset(const dlfs::test::TempDir& tmp, const std::string& rel_root, int extra,
                                    size_t max_size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> paths = {"a-b/x", "a.b/y", "a/z", "a/b/c/deep", "100%real", "empty",
                                    std::string(60, 'd') + "/" + std::string(70, 'e'),
                                    "long/" + std::string(130, 'n')};
  static const char* dirs[] = {"", "a/", "a/b/", "a-b/", "a.b/", "z/", "m/n/"};
  for (int i = 0; i < extra; ++i) paths.push_back(std::string(dirs[rng() % std::size(dirs)]) + "f" + std::to_string(i));
  Generated g;
  for (const auto& p : paths) {
    const size_t size = p == "empty" ? 0 : 1 + rng() % max_size;
    std::string bytes = random_string(rng, size);
    tmp.write_file(rel_root + "/" + p, bytes);
    g.samples.push_back({p, std::move(bytes)});
  }
  // Canonical order: byte-wise sorted relative paths.
  std::sort(g.samples.begin(), g.samples.end(), [](const Sample& a, const Sample& b) { return a.member < b.member; });
  return g;
}

// `fixed`: files of `record` byte records after a `header`; a file with no
// records at all; records named "<file>/<index, 8 digits>.bin".
inline Generated make_fixed_dataset(const dlfs::test::TempDir& tmp, const std::string& rel_root,
                                    const std::vector<int>& records_per_file, uint64_t record, uint64_t header,
                                    uint64_t seed) {
  std::mt19937_64 rng(seed);
  Generated g;
  g.format.format = "fixed";
  g.format.record_size = record;
  g.format.header_bytes = header;
  g.record_size = record;
  std::vector<std::string> names;
  for (size_t f = 0; f < records_per_file.size(); ++f) names.push_back("part-" + std::to_string(f) + ".rec");
  std::sort(names.begin(), names.end());
  for (size_t f = 0; f < names.size(); ++f) {
    std::string content = random_string(rng, header);
    for (int i = 0; i < records_per_file[f]; ++i) {
      std::string rec = random_string(rng, record);
      char idx[32];
      std::snprintf(idx, sizeof idx, "/%08d.bin", i);
      g.samples.push_back({names[f] + idx, rec});
      content += rec;
    }
    tmp.write_file(rel_root + "/" + names[f], content);
  }
  return g;
}

// `tfrecord`: TFRecord files written by the test's own encoder; samples are
// the records' data (some empty), named "<file>/<index>.bin". Every other
// file gets a DALI index (<file>.idx), so both ways of locating are used.
inline Generated make_tfrecord_dataset(const dlfs::test::TempDir& tmp, const std::string& rel_root,
                                       const std::vector<int>& records_per_file, size_t max_size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Generated g;
  g.format.format = "tfrecord";
  for (size_t f = 0; f < records_per_file.size(); ++f) {
    const std::string name = "shard-" + std::to_string(f) + ".tfrecord";
    std::string content, index;
    for (int i = 0; i < records_per_file[f]; ++i) {
      std::string rec = random_string(rng, i % 5 == 3 ? 0 : 1 + rng() % max_size);
      char idx[32];
      std::snprintf(idx, sizeof idx, "/%08d.bin", i);
      const std::string framed = dlfs::test::ref_frame(rec);
      index += std::to_string(content.size()) + " " + std::to_string(framed.size()) + "\n";
      content += framed;
      g.samples.push_back({name + idx, std::move(rec)});
    }
    tmp.write_file(rel_root + "/" + name, content);
    if (f % 2 == 1) tmp.write_file(rel_root + "/" + name + ".idx", index);
  }
  return g;
}

// `lmdb`: an environment written with liblmdb itself; samples are the
// values in key order, named "data.mdb/<index>.bin". With `fixed_size` every
// value has that size (then the dataset has a .bin view), else sizes vary
// from a few bytes to several pages (overflow values, checked reads).
inline Generated make_lmdb_dataset(const dlfs::test::TempDir& tmp, const std::string& rel_root, int count,
                                   size_t fixed_size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::string dir = tmp.file(rel_root);
  stdfs::create_directories(dir);
  std::map<std::string, std::string> kv;  // key order, as liblmdb's default comparator for these keys
  for (int i = 0; i < count; ++i) {
    char key[32];
    std::snprintf(key, sizeof key, "key-%05d", (i * 7919) % 100000);  // inserted out of key order
    kv[key] = random_string(rng, fixed_size ? fixed_size : 1 + rng() % 9000);
  }
  MDB_env* env = nullptr;
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  EXPECT_EQ(mdb_env_create(&env), 0);
  EXPECT_EQ(mdb_env_set_mapsize(env, size_t{1} << 30), 0);
  EXPECT_EQ(mdb_env_open(env, dir.c_str(), MDB_NOSYNC, 0644), 0);
  EXPECT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  EXPECT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
  for (int i = 0; i < count; ++i) {  // insertion order differs from key order
    char key[32];
    std::snprintf(key, sizeof key, "key-%05d", (i * 7919) % 100000);
    std::string& v = kv[key];
    MDB_val k{std::strlen(key), key}, d{v.size(), v.data()};
    EXPECT_EQ(mdb_put(txn, dbi, &k, &d, 0), 0);
  }
  EXPECT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
  Generated g;
  g.format.format = "lmdb";
  g.record_size = fixed_size;
  uint64_t i = 0;
  for (auto& [k, v] : kv) {
    char name[48];
    std::snprintf(name, sizeof name, "data.mdb/%08llu.bin", static_cast<unsigned long long>(i++));
    g.samples.push_back({name, v});
  }
  return g;
}

// One tar member as the test reads it back.
struct TarMember {
  std::string name;
  uint64_t data_offset = 0;  // of its first data byte in the stream
  std::string data;
};

inline uint64_t parse_octal(const char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n && p[i] >= '0' && p[i] <= '7'; ++i) v = v * 8 + static_cast<uint64_t>(p[i] - '0');
  return v;
}

// Parses a whole tar stream written to POSIX ustar (name + prefix) with GNU
// long-name records; fails the test on anything malformed: bad checksums or
// magic, non-zero padding, a missing or short end-of-archive trailer.
inline std::vector<TarMember> parse_tar(const std::string& t) {
  std::vector<TarMember> out;
  std::string long_name;
  uint64_t pos = 0;
  auto padded = [](uint64_t n) { return (n + 511) / 512 * 512; };
  for (;;) {
    if (pos + 512 > t.size()) {
      ADD_FAILURE() << "tar: stream ends inside a header at " << pos;
      return out;
    }
    const char* h = t.data() + pos;
    if (std::all_of(h, h + 512, [](char c) { return c == 0; })) {
      EXPECT_EQ(t.size(), pos + 1024) << "tar: the archive must end with exactly two zero blocks";
      EXPECT_TRUE(std::all_of(t.begin() + static_cast<long>(pos), t.end(), [](char c) { return c == 0; }));
      return out;
    }
    unsigned sum = 0;
    for (int i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
    EXPECT_EQ(parse_octal(h + 148, 8), sum) << "tar: header checksum at " << pos;
    EXPECT_EQ(std::string(h + 257, 6), std::string("ustar\0", 6)) << "tar: magic at " << pos;
    const uint64_t size = parse_octal(h + 124, 12);
    const char type = h[156];
    if (pos + 512 + padded(size) > t.size()) {
      ADD_FAILURE() << "tar: member data past the end at " << pos;
      return out;
    }
    std::string data = t.substr(pos + 512, size);
    const std::string pad = t.substr(pos + 512 + size, padded(size) - size);
    EXPECT_TRUE(std::all_of(pad.begin(), pad.end(), [](char c) { return c == 0; })) << "tar: padding at " << pos;
    if (type == 'L') {  // GNU: the next member's name
      long_name = data.substr(0, data.find('\0'));
    } else {
      EXPECT_EQ(type, '0') << "tar: a regular file member at " << pos;
      TarMember m;
      if (!long_name.empty()) {
        m.name = std::move(long_name);
        long_name.clear();
      } else {
        std::string name(h, strnlen(h, 100)), prefix(h + 345, strnlen(h + 345, 155));
        m.name = prefix.empty() ? name : prefix + "/" + name;
      }
      m.data_offset = pos + 512;
      m.data = std::move(data);
      out.push_back(std::move(m));
    }
    pos += 512 + padded(size);
  }
}

// Rank r's sample ids in reading order, straight from EpochPlan.
inline std::vector<uint64_t> planned(uint64_t seed, uint64_t epoch, uint64_t n, uint32_t w, uint32_t r,
                                     plan::Remainder rem = plan::Remainder::pad) {
  auto o = plan::rank_order(plan::PlanKey{seed, epoch, n, w, rem}, r);
  EXPECT_TRUE(o.is_ok()) << o.status().message();
  return o ? *o : std::vector<uint64_t>{};
}

// A fixture with datasets opened from a config and a Namespace over them.
// A sample group as a test knows it: its key, its members in order and (tar
// shards) the shard holding it.
struct Group {
  std::string key;
  std::string shard;
  std::vector<Sample> members;
};

class ViewsFixture : public ::dlfs::test::TempDirTest {
 protected:
  // Opens one dataset named "ds" at tmp_/rel_root; `load` waits until its
  // stripe is resident (as far as the budget allows).
  void open(const std::string& rel_root, const Generated& g, const PlanConfig& plan, uint64_t budget = ~0ull,
            bool load = false, uint64_t extent = 64 << 10) {
    DatasetConfig dc;
    dc.name = "ds";
    dc.backend = tmp_.file(rel_root);
    dc.format = g.format;
    dc.plan = plan;
    DaemonConfig daemon;
    daemon.extent_size = extent;
    daemon.loader_threads = 1;
    ns_.reset();
    datasets_.clear();
    auto ds = Dataset::open(dc, budget, daemon);
    ASSERT_TRUE(ds.is_ok()) << ds.status().message();
    datasets_.push_back(std::move(ds).value());
    if (load) {
      datasets_[0]->start_loading();
      while (!datasets_[0]->load_progress().done) ::usleep(1000);  // polls the loader: no fixed wait
    }
    ns_ = std::make_unique<Namespace>(datasets_, [](const Reader*) { return std::string("{}\n"); }, 1, 0, 0);
  }
  const Dataset& ds() const { return *datasets_[0]; }

  // Resolves a path below the mount root through lookups.
  Result<Attr> resolve(const std::string& path) const {
    Result<Attr> cur = ns_->getattr(kRootIno);
    for (const auto& part : stdfs::path(path)) {
      if (!cur) return cur;
      cur = ns_->lookup(cur->ino, part.string());
    }
    return cur;
  }
  // "ds/epochs/<e>/<w>/<r><ext>"
  static std::string view_path(uint64_t e, uint32_t w, uint32_t r, const std::string& ext) {
    return "ds/epochs/" + std::to_string(e) + "/" + std::to_string(w) + "/" + std::to_string(r) + ext;
  }

  // Reads a looked-up file from the start to its end in `chunk`-byte
  // requests through Namespace::read, as the FUSE adapter does; each request
  // must be full until the end.
  std::string read_all(const Attr& f, uint64_t chunk) const {
    std::string out;
    cache::Gather g;
    for (;;) {
      Status s = ns_->read(f.ino, out.size(), chunk, g);
      EXPECT_TRUE(s.is_ok()) << s.message();
      if (!s) break;
      const size_t got = g.bytes();
      EXPECT_LE(got, chunk);
      for (int i = 0; i < g.count(); ++i) out.append(static_cast<const char*>(g.iov()[i].iov_base), g.iov()[i].iov_len);
      g.release();  // as the adapter does once the reply is sent: drops round pins
      if (got < chunk) break;
    }
    return out;
  }
  std::string read_range(const Attr& f, uint64_t offset, uint64_t size) const {
    cache::Gather g;
    Status s = ns_->read(f.ino, offset, size, g);
    EXPECT_TRUE(s.is_ok()) << s.message();
    std::string out;
    for (int i = 0; i < g.count(); ++i) out.append(static_cast<const char*>(g.iov()[i].iov_base), g.iov()[i].iov_len);
    g.release();
    return out;
  }
  // The same straight from a stream object (an opportunistic stream made by a test).
  std::string read_all(OpenFile& f, uint64_t chunk) const {
    std::string out;
    cache::Gather g;
    for (;;) {
      g.reset(chunk);
      Status s = f.read(out.size(), chunk, g);
      EXPECT_TRUE(s.is_ok()) << s.message();
      if (!s) break;
      const size_t got = g.bytes();
      EXPECT_LE(got, chunk);
      for (int i = 0; i < g.count(); ++i) out.append(static_cast<const char*>(g.iov()[i].iov_base), g.iov()[i].iov_len);
      g.release();
      if (got < chunk) break;
    }
    return out;
  }
  std::string read_range(OpenFile& f, uint64_t offset, uint64_t size) const {
    cache::Gather g;
    g.reset(size);
    Status s = f.read(offset, size, g);
    EXPECT_TRUE(s.is_ok()) << s.message();
    std::string out;
    for (int i = 0; i < g.count(); ++i) out.append(static_cast<const char*>(g.iov()[i].iov_base), g.iov()[i].iov_len);
    g.release();
    return out;
  }
  // Looks a view file up by path and checks it may be opened, as the kernel
  // does; null (with a test failure) if it cannot be. Reads go by its inode.
  std::unique_ptr<Attr> open_view(const std::string& path) const {
    auto a = resolve(path);
    EXPECT_TRUE(a.is_ok()) << path << ": " << a.status().message();
    if (!a) return nullptr;
    Status s = ns_->open(a->ino, O_RDONLY);
    EXPECT_TRUE(s.is_ok()) << path << ": " << s.message();
    if (!s) return nullptr;
    return std::make_unique<Attr>(*a);
  }
  // The whole .tar of (e, w, r), parsed.
  std::vector<TarMember> read_tar(uint64_t e, uint32_t w, uint32_t r, uint64_t chunk) const {
    auto f = open_view(view_path(e, w, r, ".tar"));
    if (!f) return {};
    return parse_tar(read_all(*f, chunk));
  }

  // Directory listing (without "." and "..").
  std::vector<std::string> list(uint64_t ino) const {
    std::vector<std::string> names;
    uint64_t off = 0;
    for (bool more = true; more;) {
      more = false;
      Status s = ns_->readdir(ino, off, [&](std::string_view n, const Attr&, uint64_t next) {
        if (n != "." && n != "..") names.emplace_back(n);
        off = next;
        more = true;
        return true;
      });
      EXPECT_TRUE(s.is_ok()) << s.message();
    }
    return names;
  }

  // Rank r's tar of (e, w) cut into whole groups (each member where its group
  // says, bytes compared); the group indices in stream order.
  std::vector<uint64_t> groups_in_tar(const std::vector<Group>& groups, uint64_t e, uint32_t w, uint32_t r) const {
    std::map<std::string, uint64_t> by_first;  // first member name -> group
    for (uint64_t gi = 0; gi < groups.size(); ++gi) by_first[groups[gi].members[0].member] = gi;
    const auto tar = read_tar(e, w, r, 1000 + 777 * r);
    std::vector<uint64_t> out;
    for (size_t at = 0; at < tar.size();) {
      auto it = by_first.find(tar[at].name);
      if (it == by_first.end()) {
        ADD_FAILURE() << "epoch " << e << " W " << w << " rank " << r << ": member " << at << " (" << tar[at].name
                      << ") starts no group";
        return out;
      }
      for (const Sample& m : groups[it->second].members) {
        if (at >= tar.size() || tar[at].name != m.member || tar[at].data != m.bytes) {
          ADD_FAILURE() << "group " << groups[it->second].key << " is not whole (or other bytes) at member " << at;
          return out;
        }
        ++at;
      }
      out.push_back(it->second);
    }
    return out;
  }
  // Epochs 0 and 1, each W of `worlds`: every rank's tar is whole groups;
  // across the ranks each group comes once (plus the padding); with
  // planned_order, in EpochPlan's order of the groups.
  void check_groups_per_epoch(const std::vector<Group>& groups, std::initializer_list<uint32_t> worlds, uint64_t seed,
                              bool planned_order) const {
    ASSERT_EQ(ds().manifest().sample_count(), groups.size()) << "a group is one sample";
    for (uint64_t e : {0u, 1u})
      for (uint32_t w : worlds) {
        std::vector<int> seen(groups.size(), 0);
        for (uint32_t r = 0; r < w; ++r) {
          const auto got = groups_in_tar(groups, e, w, r);
          if (planned_order) EXPECT_EQ(got, planned(seed, e, groups.size(), w, r)) << "epoch " << e << " W " << w;
          for (uint64_t gi : got) ++seen[gi];
        }
        int total = 0;
        for (size_t gi = 0; gi < groups.size(); ++gi) {
          EXPECT_GE(seen[gi], 1) << groups[gi].key << " never served";
          total += seen[gi];
        }
        EXPECT_LT(total, static_cast<int>(groups.size() + w)) << "more than the padding came twice";
      }
  }

  std::vector<std::unique_ptr<Dataset>> datasets_;
  std::unique_ptr<Namespace> ns_;
};

// Sample ids by member name (member names are unique in these datasets).
inline std::map<std::string, uint64_t> ids_by_member(const Generated& g) {
  std::map<std::string, uint64_t> m;
  for (uint64_t i = 0; i < g.samples.size(); ++i) m[g.samples[i].member] = i;
  EXPECT_EQ(m.size(), g.samples.size()) << "member names must be unique";
  return m;
}

}  // namespace dlfs::fs::test
