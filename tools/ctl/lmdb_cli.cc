#include "tools/ctl/lmdb_cli.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "provenance/lmdb_check.h"
#include "provenance/lmdb_layout.h"
#include "provenance/lmdb_meta.h"
#include "provenance/lmdb_sidecar.h"
#include "provenance/lmdb_walk.h"
#include "tools/ctl/lmdb_ingest.h"
#include "tools/ctl/lmdb_sidecar_maker.h"

namespace dlfs::ctl {

namespace lm = provenance::lmdb;

namespace {

constexpr int kOk = 0, kFailed = 1, kUsage = 2;

int report_error(const char* cmd, const Status& s) {
  std::fprintf(stderr, "dlfs-ctl lmdb %s: %s\n", cmd, s.message().c_str());
  // Bad arguments (EINVAL) and existing outputs (EEXIST) are the caller's to fix.
  return (s.err() == EINVAL || s.err() == EEXIST) ? kUsage : kFailed;
}

const char* form_name(bool provenance) { return provenance ? "provenance" : "explicit"; }

struct IngestArgs {
  IngestOptions o;
  std::string format = "files", keys = "index", value = "raw", shape;
  bool quiet = false;
};

int run_ingest(IngestArgs& a) {
  a.o.format.format = a.format == "fixed" ? provenance::DatasetFormat::fixed : provenance::DatasetFormat::files;
  if (a.o.format.format == provenance::DatasetFormat::fixed && a.o.format.record_size == 0)
    return report_error("ingest", Status(EINVAL, "--format fixed needs --record-size"));
  if (a.o.format.format == provenance::DatasetFormat::files && (a.o.format.record_size || a.o.format.header_bytes))
    return report_error("ingest", Status(EINVAL, "--record-size and --header-bytes apply to --format fixed only"));
  a.o.keys = a.keys == "index_name" ? KeyStyle::index_name : KeyStyle::index;
  a.o.values = a.value == "datum" ? ValueStyle::datum : ValueStyle::raw;
  if (!a.shape.empty()) {
    unsigned c = 0, h = 0, w = 0;
    char extra = 0;
    if (std::sscanf(a.shape.c_str(), "%u,%u,%u%c", &c, &h, &w, &extra) != 3 || !c || !h || !w)
      return report_error("ingest", Status(EINVAL, "--shape '" + a.shape + "': expected C,H,W (e.g. 3,32,32)"));
    a.o.shape = {c, h, w};
  }
  a.o.progress = !a.quiet;
  auto r = ingest(a.o);
  if (!r) return report_error("ingest", r.status());
  std::printf("ingested %llu records (%.1f MB of values) into %s/data.mdb in %llu commits, %.2f s\n",
              static_cast<unsigned long long>(r->records), r->value_bytes / 1e6, a.o.dest.c_str(),
              static_cast<unsigned long long>(r->commits), r->seconds);
  std::printf("sidecar %s: %s form, %llu bytes\n", r->sidecar.path.c_str(), form_name(r->sidecar.provenance_form),
              static_cast<unsigned long long>(r->sidecar.bytes));
  return kOk;
}

int run_sidecar(const std::string& dir, bool force, bool explicit_only) {
  SidecarRequest req;
  req.dir = dir;
  req.force = force;
  req.explicit_only = explicit_only;
  auto r = make_sidecar(req);
  if (!r) return report_error("sidecar", r.status());
  std::printf("%s: %s form, %llu bytes for %llu records (%d provenance candidate%s replayed), %.2f s\n",
              r->path.c_str(), form_name(r->provenance_form), static_cast<unsigned long long>(r->bytes),
              static_cast<unsigned long long>(r->records), r->candidates_tried, r->candidates_tried == 1 ? "" : "s",
              r->seconds);
  return kOk;
}

int run_verify(const std::string& dir) {
  lm::LayoutOptions strict;
  strict.allow_walk = false;
  auto l = lm::open_layout(dir, strict);
  if (!l) return report_error("verify", l.status());
  auto walked = lm::walk_locations(dir);
  if (!walked) return report_error("verify", walked.status());
  if (walked->size() != l->locations.size()) {
    std::fprintf(stderr, "dlfs-ctl lmdb verify: the sidecar has %zu records, the tree %zu\n", l->locations.size(),
                 walked->size());
    return kFailed;
  }
  for (size_t i = 0; i < walked->size(); ++i) {
    const auto &a = l->locations[i], &b = (*walked)[i];
    if (a.offset != b.offset || a.length != b.length) {
      std::fprintf(stderr,
                   "dlfs-ctl lmdb verify: record %zu: the sidecar says offset %llu, %llu bytes; the tree says "
                   "offset %llu, %llu bytes\n",
                   i, static_cast<unsigned long long>(a.offset), static_cast<unsigned long long>(a.length),
                   static_cast<unsigned long long>(b.offset), static_cast<unsigned long long>(b.length));
      return kFailed;
    }
  }
  std::printf("ok: %zu records, %s matches the tree (spot checks read %llu pages)\n", walked->size(),
              lm::source_name(l->source), static_cast<unsigned long long>(l->checks.pages_read));
  return kOk;
}

int run_show(const std::string& dir, bool json_out) {
  auto l = lm::open_layout(dir);
  if (!l) return report_error("show", l.status());
  const auto& loc = l->locations;
  uint64_t min = loc.empty() ? 0 : UINT64_MAX, max = 0, total = 0, overflow = 0;
  for (const auto& v : loc) {
    min = std::min(min, v.length);
    max = std::max(max, v.length);
    total += v.length;
    if (lm::is_overflow_location(v, l->key.page_size)) ++overflow;
  }
  const std::string side = dir + "/" + std::string(lm::kSidecarFileName);
  struct stat st{};
  const bool has_sidecar = ::stat(side.c_str(), &st) == 0;
  nlohmann::json j = {
      {"dir", dir},
      {"meta", lm::describe(l->key)},
      {"txnid", l->key.txnid},
      {"page_size", l->key.page_size},
      {"records", loc.size()},
      {"value_bytes", {{"min", min}, {"max", max}, {"mean", loc.empty() ? 0.0 : double(total) / loc.size()}}},
      {"overflow_values", overflow},
      {"one_value_size", !loc.empty() && min == max},
      {"sidecar",
       {{"path", side}, {"present", has_sidecar}, {"bytes", has_sidecar ? uint64_t(st.st_size) : 0}}},
      {"locations_from", lm::source_name(l->source)},
      {"why_walk", l->why_walk},
      {"locate_s", l->seconds},
  };
  if (has_sidecar && l->source != lm::LayoutSource::walk)
    j["sidecar"]["form"] = l->source == lm::LayoutSource::sidecar_provenance ? "provenance" : "explicit";
  if (json_out) {
    std::cout << j.dump(2) << "\n";
    return kOk;
  }
  std::printf("%s/data.mdb: %s\n", dir.c_str(), lm::describe(l->key).c_str());
  std::printf("records: %zu; value sizes %llu..%llu bytes (mean %.1f); %llu in overflow pages\n", loc.size(),
              static_cast<unsigned long long>(min), static_cast<unsigned long long>(max),
              loc.empty() ? 0.0 : double(total) / loc.size(), static_cast<unsigned long long>(overflow));
  if (!loc.empty() && min == max) std::printf("one value size: epoch views include the fixed-size .bin view\n");
  if (!has_sidecar)
    std::printf("sidecar: none (make one: dlfs-ctl lmdb sidecar %s)\n", dir.c_str());
  else if (l->source == lm::LayoutSource::walk)
    std::printf("sidecar: %s, %lld bytes, NOT usable: %s\n", side.c_str(), static_cast<long long>(st.st_size),
                l->why_walk.c_str());
  else
    std::printf("sidecar: %s, %s form, %lld bytes, matches\n", side.c_str(),
                l->source == lm::LayoutSource::sidecar_provenance ? "provenance" : "explicit",
                static_cast<long long>(st.st_size));
  std::printf("locations from %s in %.3f s\n", lm::source_name(l->source), l->seconds);
  return kOk;
}

}  // namespace

void add_lmdb_commands(CLI::App& app, int& exit_code) {
  auto* lmdb = app.add_subcommand(
      "lmdb", "LMDB datasets (format lmdb): build one, make or check its sidecar (docs/lmdb-sidecar.md).\n"
              "Works on the files directly; no daemon needed.");
  lmdb->require_subcommand(1);

  auto a = std::make_shared<IngestArgs>();
  auto* ing = lmdb->add_subcommand(
      "ingest", "Build DEST/data.mdb from a files or fixed dataset as Caffe's convert_imageset /\n"
                "convert_cifar_data do (sequential keys, a commit every N records), and write its sidecar\n"
                "(the build's provenance when it replays exactly and is smaller, else explicit offsets).\n"
                "lock.mdb is created next to data.mdb, as liblmdb writers do.");
  ing->add_option("SRC", a->o.src, "Dataset directory to read")->required()->check(CLI::ExistingDirectory);
  ing->add_option("DEST", a->o.dest, "Directory of the new LMDB environment (created)")->required();
  ing->add_option("--format", a->format, "Source format: files (a file a sample) or fixed (records)")
      ->check(CLI::IsMember({"files", "fixed"}));
  ing->add_option("--record-size", a->o.format.record_size, "fixed: bytes per record");
  ing->add_option("--header-bytes", a->o.format.header_bytes, "fixed: bytes skipped at the start of every file");
  ing->add_option("--keys", a->keys,
                  "index: zero-padded sample index (\"00000042\", default); index_name: index, '_' and the\n"
                  "sample's path (\"00000042_n01440764/img.JPEG\", as convert_imageset)")
      ->check(CLI::IsMember({"index", "index_name"}));
  ing->add_option("--commit-every", a->o.commit_every, "Records per write transaction (default 1000; 0: one)");
  ing->add_flag("--append", a->o.append, "Put with MDB_APPEND (keys are put in order)");
  ing->add_option("--value", a->value,
                  "raw: the sample's bytes (default); datum: a Caffe Datum record (files: the file as an\n"
                  "encoded image, label = index of its top-level directory; fixed: the record's pixels with\n"
                  "its leading --label-bytes as the label)")
      ->check(CLI::IsMember({"raw", "datum"}));
  ing->add_option("--label-bytes", a->o.label_bytes, "fixed + datum: leading label bytes per record (default 1)");
  ing->add_option("--shape", a->shape, "fixed + datum: C,H,W of the pixels (default 1,1,<bytes>)");
  ing->add_flag("--force", a->o.force, "Replace an existing database in DEST");
  ing->add_flag("-q,--quiet", a->quiet, "No progress lines");
  ing->callback([a, &exit_code] { exit_code = run_ingest(*a); });

  auto dir = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false), explicit_only = std::make_shared<bool>(false),
       json_out = std::make_shared<bool>(false);
  auto* side = lmdb->add_subcommand(
      "sidecar", "Make DIR/data.mdb.dlfs for an existing database in one pass over its tree (LMDBIO's\n"
                 "post-processing). Stores the build's provenance when a Caffe-style build (keys put in order,\n"
                 "a constant commit interval, APPEND or not) replays to exactly this database and is smaller;\n"
                 "otherwise the explicit offsets, exact for any database.");
  side->add_option("DIR", *dir, "LMDB environment directory")->required()->check(CLI::ExistingDirectory);
  side->add_flag("--force", *force, "Replace an existing sidecar");
  side->add_flag("--explicit", *explicit_only, "Store explicit offsets without trying provenances");
  side->callback([=, &exit_code] { exit_code = run_sidecar(*dir, *force, *explicit_only); });

  auto* ver = lmdb->add_subcommand(
      "verify", "Check DIR's sidecar: validation key, spot checks, then every record against a tree walk.\n"
                "Exit 0 when it matches, 1 with the first difference or the reason it cannot be used.");
  ver->add_option("DIR", *dir, "LMDB environment directory")->required()->check(CLI::ExistingDirectory);
  ver->callback([=, &exit_code] { exit_code = run_verify(*dir); });

  auto* show = lmdb->add_subcommand(
      "show", "Describe DIR's database (meta page, records, value sizes, overflow values) and its sidecar.");
  show->add_option("DIR", *dir, "LMDB environment directory")->required()->check(CLI::ExistingDirectory);
  show->add_flag("--json", *json_out, "One JSON object (for scripts)");
  show->callback([=, &exit_code] { exit_code = run_show(*dir, *json_out); });
}

}  // namespace dlfs::ctl
