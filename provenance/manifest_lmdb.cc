// Manifest methods for format lmdb, and the layout behind them.
#include "provenance/manifest_lmdb.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "provenance/lmdb_check.h"
#include "provenance/lmdb_layout.h"
#include "provenance/lmdb_walk.h"

namespace dlfs::provenance {

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

Manifest::Manifest() = default;
Manifest::~Manifest() = default;
Manifest::Manifest(Manifest&&) noexcept = default;
Manifest& Manifest::operator=(Manifest&&) noexcept = default;

const LmdbInfo* Manifest::lmdb() const { return lmdb_ ? &lmdb_->info : nullptr; }

uint64_t Manifest::lmdb_generation() const {
  return lmdb_ ? lmdb_->generation.load(std::memory_order_acquire) : 0;
}

uint64_t Manifest::sample_header_bytes(uint64_t i) const {
  if (!lmdb_) return 0;
  return lmdb::is_overflow_location(lmdb_->table()[i], lmdb_->info.page_size) ? lmdb::kPageHeaderBytes : 0;
}

Status Manifest::check_sample_header(uint64_t i, std::span<const std::byte> header) const {
  if (!lmdb_) return Status::ok();
  if (!lmdb_->broken.empty()) return Status(EIO, lmdb_->broken);
  const auto& v = lmdb_->table()[i];
  if (header.size() != lmdb::kPageHeaderBytes)
    return Status(EINVAL, "record " + std::to_string(i) + ": header check needs 16 bytes");
  Status s = lmdb::check_overflow_header(header.first<16>(), v, lmdb_->info.page_size);
  if (!s) return s.with_context(lmdb_->data_path + ", record " + std::to_string(i));
  return Status::ok();
}

Status Manifest::repair_lmdb(uint64_t seen_generation, const std::string& why) const {
  if (!lmdb_) return Status(EINVAL, "not an lmdb dataset");
  LmdbState& st = *lmdb_;
  std::lock_guard lock(st.repair_mu);
  if (!st.broken.empty()) return Status(EIO, st.broken);
  if (st.generation.load() != seen_generation) return Status::ok();  // another reader repaired it
  spdlog::error("{}; walking the tree of {} once to correct the value locations", why, st.data_path);
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

}  // namespace dlfs::provenance
