// One timed walk of a dataset tree, for tools/bench/cold_start_bench.py (which
// drops the page cache before each run): provenance::scan_tree alone
// (--what scan) or the whole Manifest::build (--what manifest: walk, sort,
// tables, samples of the files format). Prints one JSON line.
//
// usage: dlfs-bench-scan [--what scan|manifest] [--threads N] ROOT
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "provenance/manifest.h"
#include "provenance/manifest_scan.h"

namespace pv = dlfs::provenance;

int main(int argc, char** argv) {
  CLI::App app{"Times one scan of a dataset tree (scan_tree or Manifest::build)"};
  std::string what = "scan", root;
  unsigned threads = 0;
  app.add_option("--what", what, "scan: provenance::scan_tree; manifest: Manifest::build")
      ->check(CLI::IsMember({"scan", "manifest"}));
  app.add_option("--threads", threads, "scan threads (0: the default; manifest always uses the default)");
  app.add_option("root", root, "the dataset's directory")->required();
  CLI11_PARSE(app, argc, argv);

  pv::ScanReport report;
  uint64_t dirs = 0, files = 0;
  auto t0 = std::chrono::steady_clock::now();
  if (what == "scan") {
    pv::ScanOptions o;
    o.threads = threads;
    auto r = pv::scan_tree(root, report, o);
    if (!r) {
      std::fprintf(stderr, "dlfs-bench-scan: %s\n", r.status().message().c_str());
      return 1;
    }
    dirs = r->dirs.size();
    files = r->file_count();
  } else {
    auto m = pv::Manifest::build(root, {}, &report);
    if (!m) {
      std::fprintf(stderr, "dlfs-bench-scan: %s\n", m.status().message().c_str());
      return 1;
    }
    dirs = m->dir_count();
    files = m->file_count();
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"what\": \"%s\", \"threads\": %u, \"seconds\": %.6f, \"dirs\": %llu, \"files\": %llu, "
              "\"skipped\": %llu}\n",
              what.c_str(), what == "scan" && threads ? std::min(threads, 256u) : pv::default_scan_threads(), s,
              static_cast<unsigned long long>(dirs), static_cast<unsigned long long>(files),
              static_cast<unsigned long long>(report.skipped_symlinks + report.skipped_special + report.unreadable));
  return 0;
}
