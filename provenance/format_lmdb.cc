// Format "lmdb": the root is an LMDB environment; the samples are the values
// of its main database in key order (LMDBIO). Where each value is in data.mdb
// comes from the provenance sidecar or, failing that, one walk of the tree
// (lmdb_layout.h); every file, data.mdb included, is still in the tree and
// the byte space, so the raw view shows the environment.
//
// Reads are checked: a value in overflow pages has its 16-byte page header
// right before it, and every read compares it with what the location says.
// A mismatch walks the tree once and swaps in the corrected offsets (repair),
// so a wrong sidecar never yields a wrong byte.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>

#include <spdlog/spdlog.h>

#include "provenance/dataset_format.h"
#include "provenance/lmdb_check.h"
#include "provenance/lmdb_layout.h"
#include "provenance/lmdb_types.h"
#include "provenance/lmdb_walk.h"

namespace dlfs::provenance {
namespace {

// The value locations, which a repair may replace while readers use them.
// Replaced tables are kept (a reader may still hold the old pointer); a
// repair happens at most a few times per daemon.
struct LmdbState {
  LmdbInfo info;
  std::string data_path;  // absolute path of data.mdb, for the repair walk and messages
  std::atomic<const lmdb::Locations*> current{nullptr};
  std::vector<std::unique_ptr<const lmdb::Locations>> tables;
  std::atomic<uint64_t> generation{0};
  std::mutex repair_mu;
  std::string broken;  // set when a repair could not fix the table: every read fails with it

  const lmdb::Locations& table() const { return *current.load(std::memory_order_acquire); }
};

// Opens the environment at `root` (data.mdb is file `data_file`, of
// `data_size` bytes in the scan) and gets every value's location
// (lmdb::open_layout: sidecar, spot checks, or one walk).
Result<std::unique_ptr<LmdbState>> open_lmdb_state(const std::string& root, uint32_t data_file, uint64_t data_size,
                                                   uint32_t spot_leaves) {
  lmdb::LayoutOptions options;
  options.checks.random_leaves = spot_leaves;
  auto layout = lmdb::open_layout(root, options);
  if (!layout) return layout.status().with_context("dataset root '" + root + "' (format lmdb)");
  auto st = std::make_unique<LmdbState>();
  st->data_path = root + "/data.mdb";
  st->info.file = data_file;
  st->info.page_size = layout->key.page_size;
  st->info.source = lmdb::source_name(layout->source);
  st->info.why_walk = layout->why_walk;
  st->info.seconds = layout->seconds;
  for (uint64_t i = 0; i < layout->locations.size(); ++i) {
    const auto& v = layout->locations[i];
    // The scan's size and the layout come from two looks at the file: a
    // database that grew in between is caught here, not by a short read later.
    if (v.offset + v.length > data_size)
      return Status(EAGAIN, st->data_path + ": record " + std::to_string(i) + " ends at byte " +
                                std::to_string(v.offset + v.length) + " but the file has " + std::to_string(data_size) +
                                " bytes (did it change while the dataset was opened?)");
    if (lmdb::is_overflow_location(v, st->info.page_size)) ++st->info.overflow_values;
  }
  spdlog::info("{}: {} values located by {} in {:.3f} s{}", st->data_path, layout->locations.size(),
               st->info.source, st->info.seconds, layout->checks.leaves
                   ? fmt::format(" (spot checks: {} leaves, {} records, {} overflow headers)", layout->checks.leaves,
                                 layout->checks.records, layout->checks.overflow_headers)
                   : std::string());
  st->tables.push_back(std::make_unique<const lmdb::Locations>(std::move(layout->locations)));
  st->current.store(st->tables.back().get(), std::memory_order_release);
  return st;
}

class LmdbSamples final : public SampleTable {
 public:
  explicit LmdbSamples(std::unique_ptr<LmdbState> st) : st_(std::move(st)) {
    const auto& t = st_->table();
    fixed_ = t.empty() ? 0 : t[0].length;
    for (const auto& v : t)
      if (v.length != fixed_) {
        fixed_ = 0;
        break;
      }
  }
  uint64_t count() const override { return st_->table().size(); }
  SampleLocation at(const Manifest&, uint64_t i) const override {
    const auto& v = st_->table()[i];
    return {st_->info.file, v.offset, v.length};
  }
  std::string name(const Manifest& tree, uint64_t i) const override {
    char idx[32];
    std::snprintf(idx, sizeof idx, "#%06llu", static_cast<unsigned long long>(i));
    return tree.file_path(st_->info.file) + idx;
  }
  std::string member_name(const Manifest& tree, uint64_t i) const override {
    char rec[32];
    std::snprintf(rec, sizeof rec, "/%08llu.bin", static_cast<unsigned long long>(i));
    return tree.file_path(st_->info.file) + rec;
  }
  uint64_t fixed_size() const override { return fixed_; }
  uint64_t check_bytes(uint64_t i) const override {
    return lmdb::is_overflow_location(st_->table()[i], st_->info.page_size) ? lmdb::kPageHeaderBytes : 0;
  }
  Status check(uint64_t i, std::span<const std::byte> header) const override;
  Status repair(uint64_t seen_generation, const std::string& why) const override;
  uint64_t generation() const override { return st_->generation.load(std::memory_order_acquire); }
  const LmdbInfo* lmdb() const override { return &st_->info; }
  uint64_t memory_bytes() const override {
    return st_->table().capacity() * sizeof(lmdb::ValueLocation) + sizeof(LmdbState) + sizeof(*this);
  }

 private:
  // Walks the tree; swaps in its offsets if only offsets differ (under repair_mu).
  Status replace_from_walk(const std::string& why) const;
  std::unique_ptr<LmdbState> st_;
  uint64_t fixed_ = 0;
};

Status LmdbSamples::check(uint64_t i, std::span<const std::byte> header) const {
  if (!st_->broken.empty()) return Status(EIO, st_->broken);
  const auto& v = st_->table()[i];
  if (header.size() != lmdb::kPageHeaderBytes)
    return Status(EINVAL, "record " + std::to_string(i) + ": header check needs 16 bytes");
  Status s = lmdb::check_overflow_header(header.first<16>(), v, st_->info.page_size);
  if (!s) return s.with_context(st_->data_path + ", record " + std::to_string(i));
  return Status::ok();
}

Status LmdbSamples::repair(uint64_t seen_generation, const std::string& why) const {
  LmdbState& st = *st_;
  std::lock_guard lock(st.repair_mu);
  if (!st.broken.empty()) return Status(EIO, st.broken);
  if (st.generation.load() != seen_generation) return Status::ok();  // another reader repaired it
  spdlog::error("{}; walking the tree of {} once to correct the value locations", why, st.data_path);
  return replace_from_walk(why);
}

Status LmdbSamples::replace_from_walk(const std::string& why) const {
  LmdbState& st = *st_;
  auto walked = lmdb::walk_locations(st.data_path);
  if (!walked) {
    st.broken = "cannot walk " + st.data_path + " after a failed check: " + walked.status().message();
    return Status(EIO, st.broken);
  }
  const auto& cur = st.table();
  if (walked->size() != cur.size()) {
    st.broken = st.data_path + " has " + std::to_string(walked->size()) + " records, the dataset was opened with " +
                std::to_string(cur.size()) + ": restart dlfsd to serve the new database";
    return Status(EIO, st.broken);
  }
  uint64_t moved = 0;
  for (size_t i = 0; i < cur.size(); ++i) {
    if ((*walked)[i].length != cur[i].length) {
      st.broken = st.data_path + ": record " + std::to_string(i) + " has " + std::to_string((*walked)[i].length) +
                  " bytes in the tree but " + std::to_string(cur[i].length) +
                  " in the sidecar the views were built from: restart dlfsd (the sidecar is wrong; remove it)";
      return Status(EIO, st.broken);
    }
    if ((*walked)[i].offset != cur[i].offset) ++moved;
  }
  if (moved == 0) {
    // The locations were right: the file itself is damaged (or changed).
    st.broken = why + ", and the tree agrees with the locations: " + st.data_path + " is damaged or changed";
    return Status(EIO, st.broken);
  }
  st.tables.push_back(std::make_unique<const lmdb::Locations>(std::move(walked).value()));
  st.current.store(st.tables.back().get(), std::memory_order_release);
  st.generation.fetch_add(1, std::memory_order_acq_rel);
  spdlog::error("{}: {} of {} value offsets corrected from the tree; reads continue from them", st.data_path, moved,
                cur.size());
  return Status::ok();
}

class LmdbFormat final : public DatasetFormat {
 public:
  std::string_view name() const override { return "lmdb"; }
  std::string_view summary() const override {
    return "the values of the LMDB environment at the root, in key order (docs/lmdb-sidecar.md)";
  }
  std::vector<std::string_view> options() const override { return {"lmdb_spot_checks"}; }
  // data.mdb must sit at the root.
  Result<std::unique_ptr<SampleTable>> samples(const Manifest& tree, const FormatOptions& o) const override {
    auto data = tree.find_file(kRootDir, "data.mdb");
    if (!data)
      return Status(ENOENT, "dataset root '" + tree.root() +
                                "' has no data.mdb: format lmdb needs the directory of an LMDB environment");
    DLFS_ASSIGN_OR_RETURN(auto st, open_lmdb_state(tree.root(), *data, tree.file_size(*data), o.lmdb_spot_checks));
    return std::unique_ptr<SampleTable>(std::make_unique<LmdbSamples>(std::move(st)));
  }
};

}  // namespace

const DatasetFormat& lmdb_format() {
  static const LmdbFormat format;
  return format;
}

}  // namespace dlfs::provenance
