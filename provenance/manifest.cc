#include "provenance/manifest.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>

#include <spdlog/spdlog.h>

#include "provenance/dataset_format.h"
#include "provenance/manifest_scan.h"

namespace dlfs::provenance {

namespace {

std::string_view parent_of(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

std::string_view basename_of(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Byte-wise order of a file's name against a subdirectory's name followed by
// '/': in a directory, that is the order of every full path below it (all
// paths below subdirectory "x" start with "x/", and no name holds a '/').
bool file_before_subdir(std::string_view file, std::string_view subdir) {
  size_t common = std::min(file.size(), subdir.size());
  int c = std::memcmp(file.data(), subdir.data(), common);
  if (c != 0) return c < 0;
  if (file.size() <= subdir.size()) return true;  // a prefix of "subdir/" (never equal to it)
  return static_cast<unsigned char>(file[common]) < static_cast<unsigned char>('/');
}

// Groups `child_count` children by parent id into a CSR layout. Children are
// visited in id order, which is name order within a parent (ids follow the
// byte-wise order of full paths, and siblings share their prefix).
void group_by_parent(const std::vector<uint32_t>& parent_of_child, uint32_t parents, uint32_t first_child,
                     std::vector<uint32_t>& begin, std::vector<uint32_t>& ids) {
  begin.assign(parents + 1, 0);
  for (size_t c = first_child; c < parent_of_child.size(); ++c) ++begin[parent_of_child[c] + 1];
  std::partial_sum(begin.begin(), begin.end(), begin.begin());
  ids.resize(parent_of_child.size() - first_child);
  std::vector<uint32_t> next(begin.begin(), begin.end() - 1);
  for (size_t c = first_child; c < parent_of_child.size(); ++c) ids[next[parent_of_child[c]]++] = static_cast<uint32_t>(c);
}

}  // namespace

// Builds the tables of a Manifest from a scan (a friend of Manifest).
//
// Directory ids follow the byte-wise order of full paths (one sort of the
// directories). File ids must too, but files are many: rather than sorting
// every full path, each directory's files are sorted by name and a walk from
// the root emits them, taking a directory's files and subdirectories in
// file_before_subdir order, which is the order of the full paths below it.
struct ManifestBuilder {
  static Status fill(Manifest& m, ScanResult& scan) {
    auto& sd = scan.dirs;
    const uint64_t nf64 = scan.file_count();
    if (nf64 >= (1ull << 32) - 1 || sd.size() >= (1ull << 32) - 1)
      return Status(EFBIG, "more than 4 billion files or directories");
    const uint32_t nd = static_cast<uint32_t>(sd.size());

    // Directory ids: scan order -> sorted by path (root "" first).
    std::vector<uint32_t> by_id(nd);
    std::iota(by_id.begin(), by_id.end(), 0u);
    std::sort(by_id.begin(), by_id.end(), [&](uint32_t a, uint32_t b) { return sd[a].path < sd[b].path; });
    auto dir_id = [&](std::string_view path) -> uint32_t {
      auto it = std::lower_bound(by_id.begin(), by_id.end(), path,
                                 [&](uint32_t d, std::string_view p) { return sd[d].path < p; });
      return static_cast<uint32_t>(it - by_id.begin());
    };

    uint64_t name_bytes = 0;
    for (const auto& d : sd) name_bytes += basename_of(d.path).size() + d.names.size();
    if (name_bytes > UINT32_MAX) return Status(EFBIG, "file names exceed 4 GiB");
    m.names_.reserve(name_bytes);
    auto add_name = [&](std::string_view name, std::vector<uint32_t>& off, std::vector<uint8_t>& len) {
      off.push_back(static_cast<uint32_t>(m.names_.size()));
      len.push_back(static_cast<uint8_t>(name.size()));
      m.names_.append(name);
    };

    for (auto* v : {&m.dir_name_off_, &m.dir_parent_, &m.dir_mode_}) v->reserve(nd);
    m.dir_name_len_.reserve(nd);
    m.dir_mtime_ns_.reserve(nd);
    for (uint32_t d = 0; d < nd; ++d) {
      const auto& e = sd[by_id[d]];
      add_name(basename_of(e.path), m.dir_name_off_, m.dir_name_len_);
      // A parent that is missing (unlistable) cannot have listed children; root's parent is root.
      m.dir_parent_.push_back(d == 0 ? 0 : dir_id(parent_of(e.path)));
      m.dir_mtime_ns_.push_back(e.mtime_ns);
      m.dir_mode_.push_back(e.mode);
      DLFS_ASSIGN_OR_RETURN(uint16_t owner, owner_index(m, {e.uid, e.gid}));
      m.dir_owner_.push_back(owner);
    }
    group_by_parent(m.dir_parent_, nd, 1, m.dir_subdirs_begin_, m.dir_subdir_ids_);

    // Each directory's files by name; its subdirectories (name order now) by name + '/'.
    for (auto& d : sd) {
      std::string_view names = d.names;
      std::sort(d.files.begin(), d.files.end(), [names](const ScannedFile& a, const ScannedFile& b) {
        return names.substr(a.name_off, a.name_len) < names.substr(b.name_off, b.name_len);
      });
    }
    std::vector<uint32_t> walk_subdirs = m.dir_subdir_ids_;
    for (uint32_t d = 0; d < nd; ++d) {
      auto first = walk_subdirs.begin() + m.dir_subdirs_begin_[d], last = walk_subdirs.begin() + m.dir_subdirs_begin_[d + 1];
      std::sort(first, last, [&](uint32_t a, uint32_t b) {
        std::string_view x = m.dir_name(a), y = m.dir_name(b);
        size_t common = std::min(x.size(), y.size());  // "x/" against "y/"
        int c = std::memcmp(x.data(), y.data(), common);
        if (c != 0) return c < 0;
        if (x.size() == y.size()) return false;
        unsigned char cx = x.size() > common ? x[common] : '/', cy = y.size() > common ? y[common] : '/';
        return cx < cy;
      });
    }

    const size_t nf = static_cast<size_t>(nf64);
    for (auto* v : {&m.file_name_off_, &m.file_parent_}) v->reserve(nf);
    m.file_name_len_.reserve(nf);
    m.file_offset_.reserve(nf + 1);
    m.file_mtime_ns_.reserve(nf);
    m.file_mode_.reserve(nf);
    m.file_owner_.reserve(nf);
    m.file_inode_.reserve(nf);
    m.file_device_.reserve(nf);
    m.file_offset_.push_back(0);
    // Explicit stack: a deep tree must not overflow ours.
    struct Frame {
      uint32_t dir;
      size_t file = 0, subdir = 0;
    };
    std::vector<Frame> stack{{0}};
    while (!stack.empty()) {
      Frame& f = stack.back();
      const ScannedDir& dir = sd[by_id[f.dir]];
      const size_t sub_end = m.dir_subdirs_begin_[f.dir + 1] - m.dir_subdirs_begin_[f.dir];
      const uint32_t* subs = walk_subdirs.data() + m.dir_subdirs_begin_[f.dir];
      if (f.file < dir.files.size() &&
          (f.subdir == sub_end || file_before_subdir(dir.file_name(dir.files[f.file]), m.dir_name(subs[f.subdir])))) {
        const ScannedFile& e = dir.files[f.file++];
        add_name(dir.file_name(e), m.file_name_off_, m.file_name_len_);
        m.file_parent_.push_back(f.dir);
        m.file_offset_.push_back(m.file_offset_.back() + e.size);
        m.file_mtime_ns_.push_back(e.mtime_ns);
        m.file_mode_.push_back(e.mode);
        DLFS_ASSIGN_OR_RETURN(uint16_t owner, owner_index(m, {e.uid, e.gid}));
        m.file_owner_.push_back(owner);
        m.file_inode_.push_back(e.inode);
        DLFS_RETURN_IF_ERROR(add_device(m, e.device));
      } else if (f.subdir < sub_end) {
        uint32_t next = subs[f.subdir++];
        stack.push_back({next});  // invalidates f
      } else {
        stack.pop_back();
      }
    }
    m.total_bytes_ = m.file_offset_.back();
    // File ids within a parent are consecutive runs in name order, so this
    // lists each directory's files by name.
    group_by_parent(m.file_parent_, nd, 0, m.dir_files_begin_, m.dir_file_ids_);
    // Directory 0 (the root) is nobody's child.
    return Status::ok();
  }

  // Files and directories store an index into the few distinct owners (2
  // bytes, not 8), found by a search over those few.
  static Result<uint16_t> owner_index(Manifest& m, Owner o) {
    auto it = std::find(m.owners_.begin(), m.owners_.end(), o);
    if (it != m.owners_.end()) return static_cast<uint16_t>(it - m.owners_.begin());
    if (m.owners_.size() > UINT16_MAX)
      return Status(EFBIG, "files owned by more than 65536 (user, group) pairs below the root");
    m.owners_.push_back(o);
    return static_cast<uint16_t>(m.owners_.size() - 1);
  }

  // Files store an index into the few distinct devices (2 bytes, not 8).
  static Status add_device(Manifest& m, uint64_t device) {
    if (!m.file_device_.empty() && m.devices_[m.file_device_.back()] == device) {  // as the file before
      m.file_device_.push_back(m.file_device_.back());
      return Status::ok();
    }
    auto it = std::find(m.devices_.begin(), m.devices_.end(), device);
    if (it == m.devices_.end()) {
      if (m.devices_.size() > UINT16_MAX) return Status(EFBIG, "files on more than 65536 filesystems below the root");
      m.devices_.push_back(device);
      it = m.devices_.end() - 1;
    }
    m.file_device_.push_back(static_cast<uint16_t>(it - m.devices_.begin()));
    return Status::ok();
  }

};

Result<Manifest> Manifest::build(const std::string& root, const FormatOptions& options, ScanReport* report) {
  ScanReport local;
  ScanReport& r = report ? *report : local;
  r = ScanReport{};
  DLFS_RETURN_IF_ERROR(check_format_options(options));
  DLFS_ASSIGN_OR_RETURN(const DatasetFormat* format, find_dataset_format(options.format));
  auto scan = scan_tree(root, r);
  if (!scan) return scan.status();

  Manifest m;
  m.root_ = root;
  m.options_ = options;
  DLFS_RETURN_IF_ERROR(ManifestBuilder::fill(m, *scan));
  DLFS_ASSIGN_OR_RETURN(m.samples_, format->samples(m, options));
  m.sample_count_ = m.samples_->count();
  for (auto* v : {&m.file_name_off_, &m.file_parent_, &m.dir_name_off_, &m.dir_parent_, &m.dir_mode_,
                  &m.dir_files_begin_, &m.dir_file_ids_, &m.dir_subdirs_begin_, &m.dir_subdir_ids_})
    v->shrink_to_fit();
  m.names_.shrink_to_fit();
  m.file_offset_.shrink_to_fit();
  m.file_mtime_ns_.shrink_to_fit();
  m.dir_mtime_ns_.shrink_to_fit();
  m.file_mode_.shrink_to_fit();
  m.file_owner_.shrink_to_fit();
  m.dir_owner_.shrink_to_fit();
  m.owners_.shrink_to_fit();
  m.file_inode_.shrink_to_fit();
  m.file_device_.shrink_to_fit();
  m.file_name_len_.shrink_to_fit();
  m.dir_name_len_.shrink_to_fit();

  uint64_t skipped = r.skipped_symlinks + r.skipped_special + r.unreadable;
  if (skipped) {
    std::string examples;
    for (const auto& e : r.examples) examples += (examples.empty() ? "" : ", ") + e;
    spdlog::warn("dataset root '{}': skipped {} symlink(s), {} special file(s), {} unreadable entr{} (e.g. {})", root,
                 r.skipped_symlinks, r.skipped_special, r.unreadable, r.unreadable == 1 ? "y" : "ies", examples);
  }
  return m;
}

std::string_view Manifest::file_name(uint32_t f) const {
  return std::string_view(names_).substr(file_name_off_[f], file_name_len_[f]);
}

std::string_view Manifest::dir_name(uint32_t d) const {
  return std::string_view(names_).substr(dir_name_off_[d], dir_name_len_[d]);
}

std::string Manifest::dir_path(uint32_t d) const {
  if (d == kRootDir) return "";
  std::string parent = dir_path(dir_parent_[d]);
  return parent.empty() ? std::string(dir_name(d)) : parent + "/" + std::string(dir_name(d));
}

std::string Manifest::file_path(uint32_t f) const {
  std::string dir = dir_path(file_parent_[f]);
  return dir.empty() ? std::string(file_name(f)) : dir + "/" + std::string(file_name(f));
}

uint32_t Manifest::file_at(uint64_t data_offset) const {
  // The last file whose first byte is <= data_offset, skipping empty files:
  // upper_bound finds the first file starting after the offset.
  auto it = std::upper_bound(file_offset_.begin(), file_offset_.end() - 1, data_offset);
  return static_cast<uint32_t>(it - file_offset_.begin()) - 1;
}

std::span<const uint32_t> Manifest::dir_files(uint32_t d) const {
  return {dir_file_ids_.data() + dir_files_begin_[d], dir_files_begin_[d + 1] - dir_files_begin_[d]};
}

std::span<const uint32_t> Manifest::dir_subdirs(uint32_t d) const {
  return {dir_subdir_ids_.data() + dir_subdirs_begin_[d], dir_subdirs_begin_[d + 1] - dir_subdirs_begin_[d]};
}

std::optional<uint32_t> Manifest::find_file(uint32_t d, std::string_view name) const {
  auto ids = dir_files(d);
  auto it = std::lower_bound(ids.begin(), ids.end(), name,
                             [&](uint32_t f, std::string_view n) { return file_name(f) < n; });
  if (it != ids.end() && file_name(*it) == name) return *it;
  return std::nullopt;
}

std::optional<uint32_t> Manifest::find_subdir(uint32_t d, std::string_view name) const {
  auto ids = dir_subdirs(d);
  auto it = std::lower_bound(ids.begin(), ids.end(), name,
                             [&](uint32_t s, std::string_view n) { return dir_name(s) < n; });
  if (it != ids.end() && dir_name(*it) == name) return *it;
  return std::nullopt;
}

Manifest::Manifest() = default;
Manifest::~Manifest() = default;
Manifest::Manifest(Manifest&&) noexcept = default;
Manifest& Manifest::operator=(Manifest&&) noexcept = default;

SampleLocation Manifest::sample(uint64_t i) const { return samples_->at(*this, i); }

uint64_t Manifest::sample_data_offset(uint64_t i) const {
  SampleLocation s = sample(i);
  return file_offset_[s.file] + s.offset;
}

std::string Manifest::sample_name(uint64_t i) const { return samples_->name(*this, i); }
std::string Manifest::member_name(uint64_t i) const { return samples_->member_name(*this, i); }
bool Manifest::samples_grouped() const { return samples_->grouped(); }
uint32_t Manifest::sample_member_count(uint64_t i) const { return samples_->member_count(i); }
SampleMember Manifest::sample_member(uint64_t i, uint32_t j) const { return samples_->member(*this, i, j); }
uint64_t Manifest::fixed_record_size() const { return samples_ ? samples_->fixed_size() : 0; }
const LmdbInfo* Manifest::lmdb() const { return samples_ ? samples_->lmdb() : nullptr; }
uint64_t Manifest::sample_check_bytes(uint64_t i) const { return samples_->check_bytes(i); }
Status Manifest::check_sample(uint64_t i, std::span<const std::byte> bytes) const {
  return samples_->check(i, bytes);
}
Status Manifest::repair_samples(uint64_t seen_generation, const std::string& why) const {
  return samples_->repair(seen_generation, why);
}
uint64_t Manifest::samples_generation() const { return samples_ ? samples_->generation() : 0; }
Result<uint32_t> Manifest::sample_masked_crc(uint64_t i) const { return samples_->masked_data_crc(i); }

uint64_t Manifest::memory_bytes() const {
  auto bytes = [](const auto& v) { return static_cast<uint64_t>(v.capacity() * sizeof(v[0])); };
  return names_.capacity() + bytes(file_name_off_) + bytes(file_name_len_) + bytes(file_parent_) +
         bytes(file_offset_) + bytes(file_mtime_ns_) + bytes(file_mode_) + bytes(file_owner_) + bytes(dir_owner_) + bytes(owners_) +
         bytes(file_inode_) + bytes(file_device_) + bytes(devices_) +
         bytes(dir_name_off_) + bytes(dir_name_len_) + bytes(dir_parent_) + bytes(dir_mtime_ns_) + bytes(dir_mode_) +
         bytes(dir_files_begin_) + bytes(dir_file_ids_) + bytes(dir_subdirs_begin_) + bytes(dir_subdir_ids_) +
         (samples_ ? samples_->memory_bytes() : 0) + sizeof(Manifest);
}

}  // namespace dlfs::provenance
