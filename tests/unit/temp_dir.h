// Temporary directories for the unit tests, made and removed one way.
//
//   TempDir tmp;                         // /tmp/dlfs-Suite.Test-Ab3xQz (under $TMPDIR if set)
//   tmp.path()                           // that directory, as a string
//   tmp / "db" / "data.mdb"              // a std::filesystem::path below it
//   tmp.file("a/b")                      // the same as a string
//   tmp.write_file("a/b", bytes)         // creates a/ and writes b; returns its path
//
// The tree is removed when the TempDir goes out of scope, whether the test
// passed or not. With DLFS_KEEP_TEMP=1 in the environment it is kept and its
// path printed on stderr, to look at what a failing test left behind.
//
// TempDirTest is a gtest fixture with a TempDir (tmp_) that also fails the
// test if it ends with more open file descriptors than it started with
// (counted in /proc/self/fd from the fixture's construction to its
// destruction, so after the derived fixture's members are gone). A fixture
// whose tests legitimately keep descriptors (a library's lazily opened
// files, threads that outlive the test) calls allow_fd_growth().
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace dlfs::test {

class TempDir {
 public:
  // `label` names the directory; by default the running test ("Suite.Name",
  // or "Suite" in SetUpTestSuite), so a kept or stray directory says whose it is.
  explicit TempDir(std::string_view label = {}) {
    const char* env = ::getenv("TMPDIR");
    std::string base = (env != nullptr && *env != '\0') ? env : "/tmp";
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    std::string tmpl = base + "/dlfs-" + sanitize(label.empty() ? current_test_name() : std::string(label)) + "-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error("TempDir: mkdtemp(" + tmpl + "): " + std::strerror(errno));
    path_ = tmpl;
  }
  ~TempDir() {
    if (path_.empty()) return;
    if (keep()) {
      std::fprintf(stderr, "DLFS_KEEP_TEMP=1: kept %s\n", path_.c_str());
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    if (ec) {
      // A test may have taken permissions away (chmod 0); give them back and retry.
      make_writable(path_);
      ec.clear();
      std::filesystem::remove_all(path_, ec);
    }
    if (ec) std::fprintf(stderr, "TempDir: cannot remove %s: %s\n", path_.c_str(), ec.message().c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::filesystem::path operator/(std::string_view rel) const { return std::filesystem::path(path_) / rel; }
  std::string file(std::string_view rel) const { return (*this / rel).string(); }

  // Writes `bytes` to path()/rel, creating the directories on the way;
  // returns the file's path.
  std::string write_file(std::string_view rel, std::string_view bytes) const {
    return write_file(rel, std::as_bytes(std::span<const char>(bytes.data(), bytes.size())));
  }
  std::string write_file(std::string_view rel, std::span<const std::byte> bytes) const {
    std::filesystem::path p = *this / rel;
    std::error_code ec;
    std::filesystem::create_directories(p.parent_path(), ec);
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) ADD_FAILURE() << "TempDir: cannot write " << p;
    return p.string();
  }

  static bool keep() {
    const char* k = ::getenv("DLFS_KEEP_TEMP");
    return k != nullptr && std::string_view(k) == "1";
  }

 private:
  static std::string current_test_name() {
    const auto* unit = ::testing::UnitTest::GetInstance();
    if (const auto* t = unit->current_test_info()) return std::string(t->test_suite_name()) + "." + t->name();
    if (const auto* s = unit->current_test_suite()) return s->name();
    return "test";
  }
  // Keeps the name readable and short: parameterized names carry '/', and a
  // Unix socket path below the directory must stay under 108 bytes.
  static std::string sanitize(std::string s) {
    for (char& c : s)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
    if (s.size() > 48) s.resize(48);
    return s;
  }
  static void make_writable(const std::string& root) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::permissions(root, fs::perms::owner_all, fs::perm_options::add, ec);
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (it->is_directory(ec) && !it->is_symlink(ec)) fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
  }

  std::string path_;
};

// The process's open descriptors (but the one reading /proc/self/fd): number
// -> what it points at.
inline std::map<int, std::string> open_fds() {
  std::map<int, std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    std::error_code rec;
    std::string target = std::filesystem::read_symlink(e.path(), rec).string();
    if (!rec && target.starts_with("/proc/") && target.ends_with("/fd")) continue;  // this listing's own
    out[std::stoi(e.path().filename().string())] = rec ? std::string("?") : target;
  }
  return out;
}

// Fails the running test if, when destroyed, more descriptors are open than
// when it was made; lists the new ones.
class FdLeakCheck {
 public:
  FdLeakCheck() : before_(open_fds()) {}
  ~FdLeakCheck() {
    if (!enabled_) return;
    auto after = open_fds();
    if (after.size() <= before_.size()) return;
    std::string added;
    for (const auto& [fd, target] : after) {
      auto it = before_.find(fd);
      if (it == before_.end() || it->second != target) added += "\n  fd " + std::to_string(fd) + " -> " + target;
    }
    ADD_FAILURE() << "the test left " << after.size() - before_.size() << " more file descriptor(s) open ("
                  << before_.size() << " before, " << after.size() << " after):" << added;
  }
  FdLeakCheck(const FdLeakCheck&) = delete;
  FdLeakCheck& operator=(const FdLeakCheck&) = delete;
  void disable() { enabled_ = false; }

 private:
  std::map<int, std::string> before_;
  bool enabled_ = true;
};

// A fixture with a fresh TempDir per test and the descriptor check.
class TempDirTest : public ::testing::Test {
 protected:
  // Opt out of the descriptor check (call from the fixture's constructor or SetUp).
  void allow_fd_growth() { fds_.disable(); }

  // Declared first: destroyed last, after tmp_ and everything the derived fixture held.
  FdLeakCheck fds_;
  TempDir tmp_;
};

}  // namespace dlfs::test
