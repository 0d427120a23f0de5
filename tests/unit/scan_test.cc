// The parallel directory walk (provenance/manifest_scan.h): the same entries
// and report as an independent serial walk (std::filesystem) whatever the
// thread count, unreadable directories (as another user when run as root),
// deep and empty trees, and a manifest in canonical order however the
// listings interleave.
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "provenance/manifest.h"
#include "provenance/manifest_scan.h"
#include "temp_dir.h"

namespace dlfs::provenance {
namespace {

namespace stdfs = std::filesystem;

// "d" + 3 -> "d3" (written out: GCC 12 warns falsely on `"d" + std::to_string(3)` here).
std::string numbered(const char* prefix, int n) {
  std::string s(prefix);
  s += std::to_string(n);
  return s;
}

int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// A scan flattened to sorted, comparable rows.
struct Flat {
  // path, size, mtime, mode, inode, device; directories have size 0, inode 0, device 0
  using Row = std::tuple<std::string, uint64_t, int64_t, uint32_t, uint64_t, uint64_t>;
  std::vector<Row> dirs, files;
  uint64_t symlinks = 0, special = 0, unreadable = 0;
  std::vector<std::string> examples;

  bool operator==(const Flat&) const = default;
  std::string describe() const {
    std::ostringstream o;
    o << dirs.size() << " dirs, " << files.size() << " files, " << symlinks << " symlinks, " << special
      << " special, " << unreadable << " unreadable; examples:";
    for (const auto& e : examples) o << " [" << e << "]";
    return o.str();
  }
};

Flat flatten(const ScanResult& r, const ScanReport& rep) {
  Flat f;
  for (const auto& d : r.dirs) {
    f.dirs.emplace_back(d.path, 0, d.mtime_ns, d.mode, 0, 0);
    for (const auto& e : d.files)
      f.files.emplace_back((d.path.empty() ? "" : d.path + "/") + std::string(d.file_name(e)), e.size, e.mtime_ns,
                           e.mode, e.inode, e.device);
  }
  std::sort(f.dirs.begin(), f.dirs.end());
  std::sort(f.files.begin(), f.files.end());
  f.symlinks = rep.skipped_symlinks;
  f.special = rep.skipped_special;
  f.unreadable = rep.unreadable;
  f.examples = rep.examples;
  return f;
}

Flat scan(const std::string& root, unsigned threads) {
  ScanReport rep;
  ScanOptions o;
  o.threads = threads;
  auto r = scan_tree(root, rep, o);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? flatten(*r, rep) : Flat{};
}

// The reference: a serial walk with std::filesystem and lstat, written
// without anything from manifest_scan.cc (examples are not compared).
Flat reference_walk(const std::string& root) {
  Flat f;
  struct stat st {};
  EXPECT_EQ(::lstat(root.c_str(), &st), 0);
  f.dirs.emplace_back("", 0, mtime_ns(st), st.st_mode & 07777u, 0, 0);
  for (auto it = stdfs::recursive_directory_iterator(root); it != stdfs::recursive_directory_iterator(); ++it) {
    std::string rel = it->path().string().substr(root.size() + 1);  // the iterator's paths start with root + "/"
    EXPECT_EQ(::lstat(it->path().c_str(), &st), 0) << rel;
    if (S_ISLNK(st.st_mode)) {
      ++f.symlinks;
    } else if (S_ISREG(st.st_mode)) {
      f.files.emplace_back(rel, static_cast<uint64_t>(st.st_size), mtime_ns(st), st.st_mode & 07777u,
                           static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_dev));
    } else if (S_ISDIR(st.st_mode)) {
      f.dirs.emplace_back(rel, 0, mtime_ns(st), st.st_mode & 07777u, 0, 0);
    } else {
      ++f.special;
    }
  }
  std::sort(f.dirs.begin(), f.dirs.end());
  std::sort(f.files.begin(), f.files.end());
  return f;
}

class ScanTest : public ::dlfs::test::TempDirTest {
 protected:
  void SetUp() override {
    root_ = tmp_.path() + "/root";
    stdfs::create_directories(root_);
  }
  void write(const std::string& rel, size_t size) {
    stdfs::create_directories(stdfs::path(root_ + "/" + rel).parent_path());
    std::ofstream(root_ + "/" + rel, std::ios::binary) << std::string(size, 'x');
  }
  void mkdir(const std::string& rel) { stdfs::create_directories(root_ + "/" + rel); }

  // Nested directories with names whose byte-wise and path orders differ
  // ("a" < "a.b" < "a/..."), files of several sizes, empty directories,
  // symlinks to files and directories (inside and outside), fifos.
  void mixed_tree() {
    for (std::string d : {"a", "a.b", "a-b", "a/x", "a/x.y", "a/x/deeper", "b/c/d/e", "Z"})
      for (int i = 0; i < 12; ++i) write(d + numbered("/f", i) + (i % 3 ? ".jpg" : ""), (i * 37) % 101);
    write("a/x.txt", 5);
    write("a/x0", 6);
    write("top", 1);
    mkdir("empty");
    mkdir("a/empty/too");
    stdfs::create_directories(tmp_.path() + "/outside");
    stdfs::create_symlink(root_ + "/top", root_ + "/link_to_file");
    stdfs::create_directory_symlink(root_ + "/a", root_ + "/b/link_to_dir");
    stdfs::create_directory_symlink(tmp_.path() + "/outside", root_ + "/a/x/link_outside");
    ASSERT_EQ(::mkfifo((root_ + "/fifo").c_str(), 0644), 0);
    ASSERT_EQ(::mkfifo((root_ + "/a/x/deeper/fifo").c_str(), 0600), 0);
    ASSERT_EQ(::chmod((root_ + "/a/x.y").c_str(), 0750), 0);
    ASSERT_EQ(::chmod((root_ + "/a/f1.jpg").c_str(), 0600), 0);
  }

  std::string root_;
};

TEST_F(ScanTest, EveryThreadCountFindsWhatASerialWalkFinds) {
  mixed_tree();
  Flat want = reference_walk(root_);
  ASSERT_EQ(want.symlinks, 3u);
  ASSERT_EQ(want.special, 2u);
  Flat first = scan(root_, 1);
  for (unsigned threads : {1u, 2u, 3u, 8u, 16u}) {
    Flat got = scan(root_, threads);
    EXPECT_EQ(got.dirs, want.dirs) << threads << " threads: " << got.describe();
    EXPECT_EQ(got.files, want.files) << threads << " threads: " << got.describe();
    EXPECT_EQ(got.symlinks, want.symlinks) << threads;
    EXPECT_EQ(got.special, want.special) << threads;
    EXPECT_EQ(got.unreadable, 0u) << threads << ": " << got.describe();
    // The examples too: the byte-wise first skipped paths, not the first met.
    EXPECT_EQ(got.examples, first.examples) << threads;
  }
  EXPECT_EQ(first.examples, (std::vector<std::string>{"a/x/deeper/fifo (special file)",
                                                      "a/x/link_outside (symlink, not followed)",
                                                      "b/link_to_dir (symlink, not followed)", "fifo (special file)",
                                                      "link_to_file (symlink, not followed)"}));
}

TEST_F(ScanTest, ExamplesAreTheFirstTenByPathWhateverTheThreads) {
  // 60 symlinks in 6 directories: far more than the report keeps.
  std::vector<std::string> all;
  for (int d = 0; d < 6; ++d)
    for (int i = 0; i < 10; ++i) {
      std::string rel = numbered("d", d) + numbered("/link", i);
      mkdir(numbered("d", d));
      stdfs::create_symlink("/nowhere", root_ + "/" + rel);
      all.push_back(rel + " (symlink, not followed)");
    }
  std::sort(all.begin(), all.end());
  all.resize(10);
  for (unsigned threads : {1u, 4u, 8u}) {
    Flat got = scan(root_, threads);
    EXPECT_EQ(got.symlinks, 60u);
    EXPECT_EQ(got.examples, all) << threads << " threads";
  }
}

TEST_F(ScanTest, DeepTreesAndEmptyDirectories) {
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += deep.empty() ? "d" : "/d";
  write(deep + "/bottom", 3);
  mkdir("d/side/empty1");
  mkdir("d/side/empty2");
  Flat want = reference_walk(root_);
  ASSERT_EQ(want.dirs.size(), 1u + 300u + 3u);
  for (unsigned threads : {1u, 4u}) {
    Flat got = scan(root_, threads);
    EXPECT_EQ(got.dirs, want.dirs) << threads;
    EXPECT_EQ(got.files, want.files) << threads;
  }
  Manifest m = std::move(Manifest::build(root_, {}).value());
  ASSERT_EQ(m.file_count(), 1u);
  EXPECT_EQ(m.file_path(0), deep + "/bottom");
  EXPECT_EQ(m.dir_count(), 1u + 300u + 3u);
}

TEST_F(ScanTest, OnlyEmptyDirectories) {
  for (int i = 0; i < 20; ++i) mkdir(numbered("e", i) + "/inner");
  Flat got = scan(root_, 4);
  EXPECT_EQ(got.dirs, reference_walk(root_).dirs);
  EXPECT_TRUE(got.files.empty());
  Manifest m = std::move(Manifest::build(root_, {}).value());
  EXPECT_EQ(m.file_count(), 0u);
  EXPECT_EQ(m.dir_count(), 41u);
  EXPECT_EQ(m.total_bytes(), 0u);
}

// Whatever order the listings arrive in, ids follow the byte-wise order of
// full paths, and every table agrees: a manifest built many times over a
// tree where that order is not a depth-first walk by name.
TEST_F(ScanTest, ManifestIsCanonicalHoweverListingsInterleave) {
  mixed_tree();
  for (int i = 0; i < 40; ++i) write(numbered("w", i % 7) + numbered("/", i * 13 % 17), 1);
  Flat ref = reference_walk(root_);
  std::vector<std::string> file_paths, dir_paths;
  for (const auto& r : ref.files) file_paths.push_back(std::get<0>(r));
  for (const auto& r : ref.dirs) dir_paths.push_back(std::get<0>(r));
  std::sort(file_paths.begin(), file_paths.end());  // byte-wise: '.' (0x2e) < '/' (0x2f) < '0'
  std::sort(dir_paths.begin(), dir_paths.end());
  for (int round = 0; round < 10; ++round) {
    auto built = Manifest::build(root_, {});
    ASSERT_TRUE(built.is_ok()) << built.status().message();
    const Manifest& m = *built;
    ASSERT_EQ(m.file_count(), file_paths.size());
    ASSERT_EQ(m.dir_count(), dir_paths.size());
    uint64_t off = 0;
    for (uint32_t f = 0; f < m.file_count(); ++f) {
      ASSERT_EQ(m.file_path(f), file_paths[f]) << "round " << round << ", file " << f;
      ASSERT_EQ(m.file_data_offset(f), off);
      off += m.file_size(f);
      auto found = m.find_file(m.file_parent(f), m.file_name(f));
      ASSERT_TRUE(found && *found == f) << file_paths[f];
    }
    EXPECT_EQ(m.total_bytes(), off);
    for (uint32_t d = 0; d < m.dir_count(); ++d) {
      ASSERT_EQ(m.dir_path(d), dir_paths[d]) << "round " << round << ", dir " << d;
      auto files = m.dir_files(d);
      EXPECT_TRUE(std::is_sorted(files.begin(), files.end(),
                                 [&](uint32_t a, uint32_t b) { return m.file_name(a) < m.file_name(b); }));
      auto subs = m.dir_subdirs(d);
      EXPECT_TRUE(std::is_sorted(subs.begin(), subs.end(),
                                 [&](uint32_t a, uint32_t b) { return m.dir_name(a) < m.dir_name(b); }));
      if (d != kRootDir) {
        auto found = m.find_subdir(m.dir_parent(d), m.dir_name(d));
        ASSERT_TRUE(found && *found == d) << dir_paths[d];
      }
    }
  }
}

// Directories the walk may not enter are reported, once each, with nothing
// below them, and the rest is scanned. Permission checks do not stop root,
// so as root the scan runs in a child process as nobody.
TEST_F(ScanTest, UnreadableDirectoriesAreReportedAndSkipped) {
  write("ok/f", 1);
  write("locked/hidden", 1);      // 0000: cannot open
  write("listonly/hidden", 1);    // r--: the names, but no stat of them
  write("searchonly/hidden", 1);  // --x: no listing
  write("mine/f", 2);             // 0700, ours: entered
  ASSERT_EQ(::chmod((root_ + "/locked").c_str(), 0), 0);
  ASSERT_EQ(::chmod((root_ + "/listonly").c_str(), 0444), 0);
  ASSERT_EQ(::chmod((root_ + "/searchonly").c_str(), 0111), 0);
  ASSERT_EQ(::chmod((root_ + "/mine").c_str(), 0700), 0);
  const bool as_root = ::geteuid() == 0;
  const uid_t nobody = 65534;
  if (as_root) {
    // nobody must reach the root, and own "mine".
    ASSERT_EQ(::chmod(tmp_.path().c_str(), 0755), 0);
    ASSERT_EQ(::chown((root_ + "/mine").c_str(), nobody, nobody), 0);
    ASSERT_EQ(::chown((root_ + "/mine/f").c_str(), nobody, nobody), 0);
  }
  auto describe = [&](unsigned threads) {
    Flat f = scan(root_, threads);
    std::string out = std::to_string(f.unreadable) + " unreadable;";
    for (const auto& d : f.dirs) out += " d:" + std::get<0>(d);
    for (const auto& x : f.files) out += " f:" + std::get<0>(x);
    for (const auto& e : f.examples) out += " [" + e + "]";
    return out;
  };
  const std::string want =
      "3 unreadable; d: d:mine d:ok f:mine/f f:ok/f [listonly (cannot open directory)] "
      "[locked (cannot open directory)] [searchonly (cannot open directory)]";
  for (unsigned threads : {1u, 4u}) {
    std::string got;
    if (!as_root) {
      got = describe(threads);
    } else {
      int fds[2];
      ASSERT_EQ(::pipe(fds), 0);
      pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        ::close(fds[0]);
        gid_t g = nobody;
        if (::setgroups(1, &g) != 0 || ::setresgid(nobody, nobody, nobody) != 0 ||
            ::setresuid(nobody, nobody, nobody) != 0)
          ::_exit(2);
        std::string s = describe(threads);
        ssize_t n = ::write(fds[1], s.data(), s.size());
        ::_exit(n == static_cast<ssize_t>(s.size()) ? 0 : 3);
      }
      ::close(fds[1]);
      char buf[4096];
      ssize_t n;
      while ((n = ::read(fds[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
      ::close(fds[0]);
      int status = 0;
      ASSERT_EQ(::waitpid(pid, &status, 0), pid);
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
    }
    EXPECT_EQ(got, want) << threads << " threads" << (as_root ? " (as nobody)" : "");
  }
}

}  // namespace
}  // namespace dlfs::provenance
