// How long it takes to know where every value of an LMDB database is
// (LMDBIO, section 4.4): from the provenance sidecar (read it, replay
// liblmdb's allocator), from the explicit sidecar (read and decode it), by
// walking the B+tree with a liblmdb cursor, and the daemon's whole open
// (meta check + replay + spot checks). Cold (page cache dropped before each
// run) and warm; medians; every result checked against the walk.
//
// usage: lmdb_locate_bench [--dir DIR] [--records N] [--value-size B]
//                          [--commit-every C] [--reps R] [--keep]
#include <fcntl.h>
#include <lmdb.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "provenance/lmdb_layout.h"
#include "provenance/lmdb_meta.h"
#include "provenance/lmdb_replay.h"
#include "provenance/lmdb_sidecar.h"
#include "provenance/lmdb_walk.h"

namespace lm = dlfs::provenance::lmdb;
namespace stdfs = std::filesystem;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "lmdb_locate_bench: %s\n", what.c_str());
  std::exit(1);
}

void check(int rc, const char* what) {
  if (rc) die(std::string(what) + ": " + mdb_strerror(rc));
}

// Builds DIR/data.mdb the way Caffe's tools do and returns its provenance.
lm::Provenance build(const std::string& dir, uint64_t n, uint32_t value_size, uint64_t every) {
  stdfs::create_directories(dir);
  MDB_env* env = nullptr;
  check(mdb_env_create(&env), "mdb_env_create");
  check(mdb_env_set_mapsize(env, size_t{1} << 40), "mdb_env_set_mapsize");
  check(mdb_env_open(env, dir.c_str(), MDB_NOSYNC, 0644), "mdb_env_open");
  MDB_stat st{};
  mdb_env_stat(env, &st);
  int maj = 0, min = 0, pat = 0;
  mdb_version(&maj, &min, &pat);
  lm::Provenance p;
  p.page_size = st.ms_psize;
  p.lmdb_version = lm::kVersionFull(maj, min, pat);
  p.records = n;
  p.key_sizes = {8};
  p.value_sizes = {value_size};
  p.txn_records = {every};
  std::string value(value_size, 'v');
  auto t0 = std::chrono::steady_clock::now(), last = t0;
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (!txn) {
      check(mdb_txn_begin(env, nullptr, 0, &txn), "mdb_txn_begin");
      check(mdb_dbi_open(txn, nullptr, 0, &dbi), "mdb_dbi_open");
    }
    char key[16];
    std::snprintf(key, sizeof key, "%08llu", static_cast<unsigned long long>(i));
    std::memcpy(value.data(), &i, sizeof i);
    MDB_val k{8, key}, v{value.size(), value.data()};
    check(mdb_put(txn, dbi, &k, &v, 0), "mdb_put");
    if ((i + 1) % every == 0 || i + 1 == n) {
      check(mdb_txn_commit(txn), "mdb_txn_commit");
      txn = nullptr;
    }
    auto now = std::chrono::steady_clock::now();
    if (now - last > std::chrono::seconds(3)) {
      last = now;
      std::fprintf(stderr, "build: %llu/%llu records\n", static_cast<unsigned long long>(i + 1),
                   static_cast<unsigned long long>(n));
    }
  }
  check(mdb_env_sync(env, 1), "mdb_env_sync");
  mdb_env_close(env);
  std::fprintf(stderr, "build: %llu records in %.1f s\n", static_cast<unsigned long long>(n),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return p;
}

// The fraction of `path`'s pages in the page cache (mincore).
double resident_fraction(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return -1;
  struct stat st{};
  ::fstat(fd, &st);
  const size_t len = static_cast<size_t>(st.st_size), page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* m = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) return -1;
  std::vector<unsigned char> vec((len + page - 1) / page);
  ::mincore(m, len, vec.data());
  ::munmap(m, len);
  size_t in = std::count_if(vec.begin(), vec.end(), [](unsigned char c) { return c & 1; });
  return vec.empty() ? 0 : static_cast<double>(in) / vec.size();
}

// Drops the page cache: drop_caches as root, else fadvise on each file.
std::string evict(const std::vector<std::string>& files) {
  ::sync();
  std::ofstream dc("/proc/sys/vm/drop_caches");
  if (dc && (dc << "3\n")) {
    dc.close();
    return "drop_caches";
  }
  for (const auto& f : files) {
    int fd = ::open(f.c_str(), O_RDONLY);
    if (fd >= 0) {
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      ::close(fd);
    }
  }
  return "posix_fadvise(DONTNEED)";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct BenchArgs {
  std::string dir;
  uint64_t records = 1280000, every = 1000;
  uint32_t value_size = 3072;
  int reps = 5;
  bool keep = false;
};

// The files in DIR the bench reads: the database, the two sidecars it built,
// and the copy of the provenance one where the daemon looks for it.
struct BenchFiles {
  explicit BenchFiles(const std::string& dir)
      : data(dir + "/data.mdb"),
        prov(dir + "/provenance.dlfs"),
        expl(dir + "/explicit.dlfs"),
        daemon_side(dir + "/" + std::string(lm::kSidecarFileName)) {}
  std::string data, prov, expl, daemon_side;
};

// Builds the database and writes both sidecar forms for it, after checking
// that the replay of its provenance reproduces it.
void build_with_sidecars(const BenchArgs& a, const BenchFiles& f) {
  lm::Provenance p = build(a.dir, a.records, a.value_size, a.every);
  auto key = lm::read_meta_key(f.data);
  if (!key) die(key.status().message());
  auto walked = lm::walk_locations(a.dir);
  if (!walked) die(walked.status().message());
  auto r = lm::replay(p);
  if (!r || r->locations != *walked || !(r->meta == *key)) die("the replay does not reproduce the database");
  if (auto s = lm::write_sidecar_file(f.prov, lm::Sidecar{*key, lm::canonical(p), std::nullopt}); !s)
    die(s.message());
  if (auto s = lm::write_sidecar_file(f.expl, lm::Sidecar{*key, std::nullopt, *walked}); !s) die(s.message());
}

struct Method {
  const char* name;
  std::function<lm::Locations()> run;
};

// The four ways to every value's location, in the order the ratios use them.
std::vector<Method> methods(const std::string& dir, const BenchFiles& f) {
  return {
      {"sidecar provenance (read + replay)",
       [&f] {
         auto s = lm::read_sidecar_file(f.prov);
         if (!s) die(s.status().message());
         auto r = lm::replay(*s->provenance);
         if (!r) die(r.status().message());
         return std::move(r->locations);
       }},
      {"sidecar explicit (read + decode)",
       [&f] {
         auto s = lm::read_sidecar_file(f.expl);
         if (!s) die(s.status().message());
         return std::move(*s->locations);
       }},
      {"cursor walk (liblmdb)",
       [&dir] {
         auto w = lm::walk_locations(dir);
         if (!w) die(w.status().message());
         return std::move(w).value();
       }},
      {"daemon open (key + replay + spot checks)",
       [&dir] {
         auto l = lm::open_layout(dir);
         if (!l) die(l.status().message());
         if (l->source != lm::LayoutSource::sidecar_provenance) die("open_layout did not use the sidecar: " + l->why_walk);
         return std::move(l->locations);
       }},
  };
}

struct Medians {
  double cold = 0, warm = 0;
};

// `reps` cold runs, an untimed warm-up, `reps` warm runs, each checked against
// the reference; prints the method's line and returns its medians.
Medians time_method(const Method& m, int reps, const std::vector<std::string>& files, const lm::Locations& reference) {
  std::vector<double> cold, warm;
  for (int i = 0; i < 2 * reps + 1; ++i) {
    const bool is_cold = i < reps;
    if (is_cold) evict(files);
    auto t0 = std::chrono::steady_clock::now();
    lm::Locations got = m.run();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (got != reference) die(std::string(m.name) + ": locations differ from the walk");
    if (is_cold) cold.push_back(s);
    else if (i > reps) warm.push_back(s);  // run `reps` is the untimed warm-up
  }
  Medians med{median(cold), median(warm)};
  std::string runs;
  for (double s : cold) runs += std::to_string(s).substr(0, 6) + " ";
  runs += "| ";
  for (double s : warm) runs += std::to_string(s).substr(0, 6) + " ";
  std::printf("%-42s %10.4f %10.4f %10.0f   %s\n", m.name, med.cold, med.warm, reference.size() / med.warm,
              runs.c_str());
  return med;
}

void print_header(const BenchArgs& a, const BenchFiles& f, uint64_t n, const std::vector<std::string>& files) {
  std::printf("database: %llu records of %u B, commit every %llu; data.mdb %.1f MiB; sidecars: provenance %llu B, "
              "explicit %llu B\n",
              static_cast<unsigned long long>(n), a.value_size, static_cast<unsigned long long>(a.every),
              stdfs::file_size(f.data) / 1048576.0, static_cast<unsigned long long>(stdfs::file_size(f.prov)),
              static_cast<unsigned long long>(stdfs::file_size(f.expl)));
  std::string how = evict(files);
  std::printf("cold runs: page cache emptied with %s before each (data.mdb resident after it: %.1f%%)\n\n",
              how.c_str(), 100 * resident_fraction(f.data));
  std::printf("%-42s %10s %10s %10s   %s\n", "method", "cold s", "warm s", "warm rec/s", "runs cold | warm");
}

// The walk's time over each other method's (methods() order: 0 provenance,
// 1 explicit, 2 walk, 3 daemon open).
void print_ratios(const std::vector<Medians>& m) {
  std::printf("\nwalk / sidecar provenance: cold %.2fx, warm %.2fx\n", m[2].cold / m[0].cold, m[2].warm / m[0].warm);
  std::printf("walk / sidecar explicit:   cold %.2fx, warm %.2fx\n", m[2].cold / m[1].cold, m[2].warm / m[1].warm);
  std::printf("walk / daemon open:        cold %.2fx, warm %.2fx\n", m[2].cold / m[3].cold, m[2].warm / m[3].warm);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time to get every LMDB value's location: sidecar (provenance replay, explicit) vs a cursor walk,\n"
               "cold and warm page cache. Builds the database first if DIR has none."};
  BenchArgs a;
  app.add_option("--dir", a.dir, "Database directory (default: a new one under /tmp, removed unless --keep)");
  app.add_option("--records", a.records, "Records to build (default 1280000, ImageNet's training set)");
  app.add_option("--value-size", a.value_size, "Bytes per value (default 3072; over ~2 KiB values are in overflow pages)");
  app.add_option("--commit-every", a.every, "Records per write transaction (default 1000)")->check(CLI::PositiveNumber);
  app.add_option("--reps", a.reps, "Timed runs per method and cache state (default 5)")->check(CLI::Range(1, 100));
  app.add_flag("--keep", a.keep, "Keep the database");
  CLI11_PARSE(app, argc, argv);
  const bool temp = a.dir.empty();
  if (temp) a.dir = "/tmp/dlfs-lmdb-locate-" + std::to_string(::getpid());
  const BenchFiles f(a.dir);

  if (!stdfs::exists(f.data)) build_with_sidecars(a, f);
  if (!stdfs::exists(f.prov) || !stdfs::exists(f.expl))
    die(a.dir + " has no provenance.dlfs/explicit.dlfs (give a --dir this tool built, or none)");
  auto reference = lm::walk_locations(a.dir);
  if (!reference) die(reference.status().message());

  const std::vector<Method> ms = methods(a.dir, f);
  stdfs::copy_file(f.prov, f.daemon_side, stdfs::copy_options::overwrite_existing);
  const std::vector<std::string> files = {f.data, f.prov, f.expl, f.daemon_side};
  print_header(a, f, reference->size(), files);
  std::vector<Medians> medians;
  for (const auto& m : ms) medians.push_back(time_method(m, a.reps, files, *reference));
  print_ratios(medians);
  stdfs::remove(f.daemon_side);
  if (temp && !a.keep) stdfs::remove_all(a.dir);
  return 0;
}
