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
#include "tools/ctl/exit_codes.h"

namespace dlfs::ctl {

namespace lm = provenance::lmdb;

namespace {

int report_error(const char* cmd, const Status& s) {
  std::fprintf(stderr, "dlfs-ctl lmdb %s: %s\n", cmd, s.message().c_str());
  // Bad arguments (EINVAL) and existing outputs (EEXIST) are the caller's to fix.
  return (s.err() == EINVAL || s.err() == EEXIST) ? kUsage : kFailed;
}

// verify and show take nothing but DIR: whatever is wrong is the database's
// or the sidecar's, never usage.
int report_failure(const char* cmd, const Status& s) {
  std::fprintf(stderr, "dlfs-ctl lmdb %s: %s\n", cmd, s.message().c_str());
  return kFailed;
}

// Runs a command so that nothing escapes as a crash: an exception (out of
// memory, a JSON error) becomes a message and exit code 1.
template <typename F>
int guarded(const char* cmd, F&& run) {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlfs-ctl lmdb %s: %s\n", cmd, e.what());
  } catch (...) {
    std::fprintf(stderr, "dlfs-ctl lmdb %s: unknown error\n", cmd);
  }
  return kFailed;
}

const char* form_name(bool provenance) { return provenance ? "provenance" : "explicit"; }

struct IngestArgs {
  IngestOptions o;
  std::string format = "files", keys = "index", value = "raw", shape;
  bool quiet = false;
  CLI::Option *label_bytes = nullptr, *shape_opt = nullptr;
};

int run_ingest(IngestArgs& a) {
  if ((a.label_bytes->count() || a.shape_opt->count()) && (a.format != "fixed" || a.value != "datum"))
    return report_error("ingest", Status(EINVAL, "--label-bytes and --shape apply to --format fixed --value datum only"));
  a.o.format.format = a.format == "fixed" ? "fixed" : "files";
  if (a.o.format.format == "fixed" && a.o.format.record_size == 0)
    return report_error("ingest", Status(EINVAL, "--format fixed needs --record-size"));
  if (a.o.format.format == "files" && (a.o.format.record_size || a.o.format.header_bytes))
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
  std::printf("ingested %llu records (%.1f MB of values) into %s/data.mdb in %llu commit%s, %.2f s\n",
              static_cast<unsigned long long>(r->records), static_cast<double>(r->value_bytes) / 1e6,
              a.o.dest.c_str(), static_cast<unsigned long long>(r->commits), r->commits == 1 ? "" : "s", r->seconds);
  std::printf("sidecar %s: %s form, %llu bytes%s\n", r->sidecar.path.c_str(), form_name(r->sidecar.provenance_form),
              static_cast<unsigned long long>(r->sidecar.bytes),
              r->sidecar.provenance_form ? "" : " (the build's provenance did not replay exactly or was larger)");
  return kOk;
}

int run_sidecar(const std::string& dir, bool force, bool explicit_only) {
  SidecarRequest req;
  req.dir = dir;
  req.force = force;
  req.explicit_only = explicit_only;
  auto r = make_sidecar(req);
  if (!r) return report_error("sidecar", r.status());
  std::printf("%s: %s form, %llu bytes for %llu records\n", r->path.c_str(), form_name(r->provenance_form),
              static_cast<unsigned long long>(r->bytes), static_cast<unsigned long long>(r->records));
  if (r->provenance_form)
    std::printf("replays exactly as: %s\n", r->build.c_str());
  else if (!explicit_only)
    std::printf("no Caffe-style build replays to this database exactly (%d candidate%s tried)\n",
                r->candidates_tried, r->candidates_tried == 1 ? "" : "s");
  std::printf("cursor pass %.2f s, %d replay%s, %.2f s in all\n", r->walk_seconds, r->candidates_tried,
              r->candidates_tried == 1 ? "" : "s", r->seconds);
  return kOk;
}

int run_verify(const std::string& dir) {
  lm::LayoutOptions strict;
  strict.allow_walk = false;
  auto l = lm::open_layout(dir, strict);
  if (!l) return report_failure("verify", l.status());
  auto walked = lm::walk_locations(dir);
  if (!walked) return report_failure("verify", walked.status());
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
  if (!l) return report_failure("show", l.status());
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
  // The form is the file's, usable or not; "matches" says whether it was used.
  const bool matches = l->source != lm::LayoutSource::walk;
  j["sidecar"]["matches"] = matches;
  j["fixed_size_bin_view"] = !loc.empty() && min == max;
  std::string form;  // stays empty for a sidecar that does not decode (why_walk says why)
  if (has_sidecar) {
    if (auto sc = lm::read_sidecar_file(side)) form = form_name(sc->provenance.has_value());
    if (!form.empty()) j["sidecar"]["form"] = form;
    if (!matches) j["sidecar"]["problem"] = l->why_walk;
  }
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
  else if (!matches)
    std::printf("sidecar: %s, %s%lld bytes, NOT usable: %s\n", side.c_str(),
                form.empty() ? "" : (form + " form, ").c_str(), static_cast<long long>(st.st_size),
                l->why_walk.c_str());
  else
    std::printf("sidecar: %s, %s form, %lld bytes, matches\n", side.c_str(), form_name(l->source == lm::LayoutSource::sidecar_provenance),
                static_cast<long long>(st.st_size));
  std::printf("locations from %s in %.3f s\n", lm::source_name(l->source), l->seconds);
  return kOk;
}

// Each command's options, and a callback that runs it and sets the exit code.

// The one argument of sidecar, verify and show.
void add_dir_argument(CLI::App* cmd, std::string& dir) {
  cmd->add_option("DIR", dir, "LMDB environment directory (holds data.mdb)")
      ->required()
      ->check(CLI::ExistingDirectory);
}

void add_ingest_command(CLI::App* lmdb, int& exit_code) {
  auto a = std::make_shared<IngestArgs>();
  auto* ing = lmdb->add_subcommand(
      "ingest", "Build DEST/data.mdb from a files or fixed dataset as Caffe's convert_imageset /\n"
                "convert_cifar_data do (sequential keys, a commit every N records), and write its sidecar\n"
                "DEST/data.mdb.dlfs (the build's provenance when it replays exactly and is smaller, else\n"
                "explicit offsets).");
  ing->footer(
      "Samples are read in canonical order (bytewise-sorted relative path; fixed: every record of every\n"
      "file), so record i of the database is sample i of SRC. The build runs with MDB_NOSYNC and syncs\n"
      "once at the end; the map size is address space only (1 TiB or more), the file grows as needed.\n"
      "liblmdb creates DEST/lock.mdb next to data.mdb, as Caffe's tools do; readers that open the\n"
      "database read-only with lock=False (dlfsd, python3-lmdb) neither need nor change it.\n"
      "An interrupted build leaves an incomplete data.mdb: run again with --force.");
  ing->add_option("SRC", a->o.src, "Dataset directory to read")->required()->check(CLI::ExistingDirectory);
  ing->add_option("DEST", a->o.dest, "Directory of the new LMDB environment (created; not inside SRC)")->required();
  ing->add_option("--format", a->format,
                  "Source format: files (every regular file is a sample, default) or fixed (every record of\n"
                  "every file is a sample; needs --record-size)")
      ->check(CLI::IsMember({"files", "fixed"}));
  ing->add_option("--record-size", a->o.format.record_size, "fixed: bytes per record (must divide every file)");
  ing->add_option("--header-bytes", a->o.format.header_bytes,
                  "fixed: bytes skipped at the start of every file (default 0)");
  ing->add_option("--keys", a->keys,
                  "index: zero-padded sample index (\"00000042\", default; max(8, digits of the count) wide);\n"
                  "index_name: the index, '_' and the sample's path (\"00000042_n01440764/img.JPEG\", as\n"
                  "convert_imageset). Either way keys are put in key order.")
      ->check(CLI::IsMember({"index", "index_name"}));
  ing->add_option("--commit-every", a->o.commit_every,
                  "Records per write transaction (default 1000, as Caffe; 0: one transaction for all)");
  ing->add_flag("--append", a->o.append, "Put with MDB_APPEND (faster; leaves full leaf pages)");
  ing->add_option("--value", a->value,
                  "raw: the sample's bytes (default); datum: a Caffe Datum record. files: data = the file\n"
                  "(an encoded image), encoded = true, label = index of its top-level directory among the\n"
                  "sorted top-level directories (0 at the root). fixed: label = the record's leading\n"
                  "--label-bytes, data = the rest, channels/height/width from --shape")
      ->check(CLI::IsMember({"raw", "datum"}));
  a->label_bytes = ing->add_option("--label-bytes", a->o.label_bytes,
                                   "fixed + datum: leading label bytes per record, little-endian, 0..4\n"
                                   "(default 1, as CIFAR-10)");
  a->shape_opt = ing->add_option("--shape", a->shape,
                                 "fixed + datum: C,H,W of the data, whose product must be the record size\n"
                                 "minus the label bytes (default 1,1,<data bytes>; CIFAR-10: 3,32,32)");
  ing->add_flag("--force", a->o.force, "Replace an existing database in DEST (data.mdb, lock.mdb, data.mdb.dlfs)");
  ing->add_flag("-q,--quiet", a->quiet, "No progress lines on stderr (they appear after 1 s: every 5% or 2 s)");
  ing->callback([a, &exit_code] { exit_code = guarded("ingest", [&] { return run_ingest(*a); }); });
}

void add_sidecar_command(CLI::App* lmdb, int& exit_code) {
  auto dir = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false), explicit_only = std::make_shared<bool>(false);
  auto* side = lmdb->add_subcommand(
      "sidecar", "Make DIR/data.mdb.dlfs for an existing database in one cursor pass over its tree (LMDBIO's\n"
                 "post-processing). Stores the build's provenance when a Caffe-style build (keys put in order,\n"
                 "a constant commit interval consistent with the meta page's transaction count, APPEND or not)\n"
                 "replays to exactly this database and is smaller; otherwise the explicit offsets, exact for\n"
                 "any database. The database is opened read-only without a lock file.");
  add_dir_argument(side, *dir);
  side->add_flag("--force", *force, "Replace an existing sidecar");
  side->add_flag("--explicit", *explicit_only, "Store explicit offsets without trying provenances");
  side->callback([=, &exit_code] {
    exit_code = guarded("sidecar", [&] { return run_sidecar(*dir, *force, *explicit_only); });
  });
}

void add_verify_command(CLI::App* lmdb, int& exit_code) {
  auto dir = std::make_shared<std::string>();
  auto* ver = lmdb->add_subcommand(
      "verify", "Check DIR's sidecar as dlfsd does at open (validation key, replay, spot checks) but with no\n"
                "fallback, then every record against a tree walk. Exit 0 when it matches; 1 with the reason\n"
                "it cannot be used (missing, stale, foreign, corrupt) or the first record that differs.");
  add_dir_argument(ver, *dir);
  ver->callback([=, &exit_code] { exit_code = guarded("verify", [&] { return run_verify(*dir); }); });
}

void add_show_command(CLI::App* lmdb, int& exit_code) {
  auto dir = std::make_shared<std::string>();
  auto json_out = std::make_shared<bool>(false);
  auto* show = lmdb->add_subcommand(
      "show", "Describe DIR's database (meta page, records, value sizes, overflow values, whether the\n"
              "fixed-size .bin view is available) and its sidecar (form, size, whether it matches; else\n"
              "why not and how long the tree walk took).");
  add_dir_argument(show, *dir);
  show->add_flag("--json", *json_out, "One JSON object (for scripts)");
  show->callback([=, &exit_code] { exit_code = guarded("show", [&] { return run_show(*dir, *json_out); }); });
}

}  // namespace

void add_lmdb_commands(CLI::App& app, int& exit_code) {
  auto* lmdb = app.add_subcommand(
      "lmdb", "LMDB datasets (format lmdb): build one, make or check its sidecar (docs/lmdb-sidecar.md).\n"
              "Works on the files directly; no daemon or control socket needed.");
  lmdb->require_subcommand(1);
  lmdb->footer("Exit codes: 0 ok, 1 the command failed, 2 bad arguments or an output that exists (--force).");
  add_ingest_command(lmdb, exit_code);
  add_sidecar_command(lmdb, exit_code);
  add_verify_command(lmdb, exit_code);
  add_show_command(lmdb, exit_code);
}

}  // namespace dlfs::ctl
