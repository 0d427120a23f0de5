// Format "tfrecord": every regular file is a TFRecord file (provenance/
// tfrecord.h) and each record's data is a sample, in file order then record
// order; "<file>.idx" next to a file of the tree is its DALI-style index, not
// a data file.
//
// Records are located at load by the index when it tiles the file, else by a
// scan of the headers (12 bytes read per record, length CRCs checked). A bad
// length CRC or a truncated record fails the load with the file and offset
// (tfrecord_skip_bad_files: the file is left out, logged).
// Reads are checked: the 12 header bytes before a sample are checked on every
// read, and the data's CRC once per sample, before its first byte is served
// (one read of the record from the backend, whose file must still be the
// scanned version); a bad CRC makes every read of that sample fail with EIO
// and logs the file and offset: never wrong bytes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "common/unique_fd.h"
#include "provenance/dataset_format.h"
#include "provenance/tfrecord.h"
#include "provenance/tfrecord_tree.h"

namespace dlfs::provenance {
namespace {

namespace tf = tfrecord;

// Where the records came from and where they are, for the table.
struct Located {
  std::vector<uint32_t> file_ids;   // tree file id of each TFRecord file
  std::vector<std::string> paths;   // its absolute path (checks, messages)
  std::vector<FileIdentity> pins;   // what the scan saw of it
  std::vector<uint64_t> first{0};   // first sample of each TFRecord file, plus the count
  std::vector<tf::Record> records;  // by sample id
  uint32_t indexed = 0;             // files located by their index
};

// A sample's data-CRC state: unchecked, good (with the masked CRC) or bad.
constexpr uint64_t kUnchecked = 0, kGood = uint64_t{1} << 32, kBad = uint64_t{2} << 32;

class TfrecordSamples final : public SampleTable {
 public:
  explicit TfrecordSamples(Located l)
      : l_(std::move(l)),
        state_(new std::atomic<uint64_t>[l_.records.size()]),
        fds_(new std::atomic<int>[l_.paths.size()]) {
    for (size_t i = 0; i < l_.records.size(); ++i) state_[i].store(kUnchecked, std::memory_order_relaxed);
    for (size_t f = 0; f < l_.paths.size(); ++f) fds_[f].store(-1, std::memory_order_relaxed);
    fixed_ = l_.records.empty() ? 0 : l_.records[0].length;
    for (const auto& r : l_.records)
      if (r.length != fixed_) fixed_ = 0;
  }
  uint64_t count() const override { return l_.records.size(); }
  SampleLocation at(const Manifest&, uint64_t i) const override {
    return {l_.file_ids[file_of(i)], l_.records[i].offset + tf::kHeaderBytes, l_.records[i].length};
  }
  std::string name(const Manifest& tree, uint64_t i) const override {
    const uint32_t f = file_of(i);
    char idx[32];
    std::snprintf(idx, sizeof idx, "#%06llu", static_cast<unsigned long long>(i - l_.first[f]));
    return tree.file_path(l_.file_ids[f]) + idx;
  }
  std::string member_name(const Manifest& tree, uint64_t i) const override {
    const uint32_t f = file_of(i);
    char rec[32];
    std::snprintf(rec, sizeof rec, "/%08llu.bin", static_cast<unsigned long long>(i - l_.first[f]));
    return tree.file_path(l_.file_ids[f]) + rec;
  }
  ~TfrecordSamples() override {
    for (size_t f = 0; f < l_.paths.size(); ++f)
      if (const int fd = fds_[f].load(); fd >= 0) ::close(fd);
  }
  uint64_t fixed_size() const override { return fixed_; }
  uint64_t check_bytes(uint64_t) const override { return tf::kHeaderBytes; }
  Status check(uint64_t i, std::span<const std::byte> header) const override;
  Result<uint32_t> masked_data_crc(uint64_t i) const override;
  uint64_t memory_bytes() const override {
    uint64_t paths = 0;
    for (const auto& p : l_.paths) paths += p.capacity() + sizeof p;
    return sizeof(*this) + paths + l_.file_ids.capacity() * 4 + l_.first.capacity() * 8 +
           l_.records.capacity() * sizeof(tf::Record) + l_.records.size() * sizeof(std::atomic<uint64_t>) +
           l_.paths.size() * (sizeof(std::atomic<int>) + sizeof(FileIdentity));
  }

 private:
  uint32_t file_of(uint64_t i) const {
    return static_cast<uint32_t>(std::upper_bound(l_.first.begin(), l_.first.end(), i) - l_.first.begin()) - 1;
  }
  // File f's descriptor, opened on first use and kept: one open per file,
  // not per record (an open is a metadata round trip on Lustre).
  Result<int> fd_of(uint32_t f) const;
  // OK while the open file is the version the scan pinned (size, mtime,
  // inode, device): a CRC is never vouched for bytes of another version.
  Status unchanged(int fd, uint32_t f) const;
  Located l_;
  std::unique_ptr<std::atomic<uint64_t>[]> state_;
  std::unique_ptr<std::atomic<int>[]> fds_;
  uint64_t fixed_ = 0;
};

Status TfrecordSamples::check(uint64_t i, std::span<const std::byte> header) const {
  const tf::Record& r = l_.records[i];
  const std::string& path = l_.paths[file_of(i)];
  if (header.size() != tf::kHeaderBytes)
    return Status(EINVAL, path + ": record check needs " + std::to_string(tf::kHeaderBytes) + " header bytes");
  auto length = tf::parse_header(header.first<tf::kHeaderBytes>(), path, r.offset);
  if (length && *length != r.length)
    length = Status(EIO, path + ": record at byte " + std::to_string(r.offset) + " now says " +
                             std::to_string(*length) + " data bytes, the dataset was opened with " +
                             std::to_string(r.length) + " (file changed, or a stale .idx: rebuild it)");
  if (!length) {
    spdlog::error("{}", length.status().message());
    return length.status();
  }
  return masked_data_crc(i).status();
}

Result<uint32_t> TfrecordSamples::masked_data_crc(uint64_t i) const {
  const uint64_t s = state_[i].load(std::memory_order_acquire);
  const tf::Record& r = l_.records[i];
  const std::string& path = l_.paths[file_of(i)];
  if (s & kGood) return static_cast<uint32_t>(s);
  if (s == kBad)
    return Status(EIO, path + ": record at byte " + std::to_string(r.offset) + ": the data's CRC does not match");
  // Unchecked: read the record once. Racing readers both check; same answer.
  const uint32_t f = file_of(i);
  DLFS_ASSIGN_OR_RETURN(const int fd, fd_of(f));
  // Before and after the read, as BackendReader does: a write in between is seen.
  DLFS_RETURN_IF_ERROR(unchanged(fd, f));
  auto crc = tf::check_data(fd, r, path);
  DLFS_RETURN_IF_ERROR(unchanged(fd, f));
  if (crc) {
    state_[i].store(kGood | *crc, std::memory_order_release);
  } else if (crc.status().err() == EIO) {
    if (state_[i].exchange(kBad, std::memory_order_acq_rel) != kBad)
      spdlog::error("{} (sample {}: its reads fail with EIO)", crc.status().message(), i);
  }
  return crc;
}

Result<int> TfrecordSamples::fd_of(uint32_t f) const {
  int fd = fds_[f].load(std::memory_order_acquire);
  if (fd >= 0) return fd;
  UniqueFd opened(::open(l_.paths[f].c_str(), O_RDONLY | O_CLOEXEC));
  if (!opened.valid()) return Status::from_errno(errno, "opening " + l_.paths[f] + " to check a record's CRC");
  // Racing first users: one descriptor wins, the others close theirs.
  if (fds_[f].compare_exchange_strong(fd, opened.get(), std::memory_order_acq_rel)) return opened.release();
  return fd;
}

Status TfrecordSamples::unchanged(int fd, uint32_t f) const {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::from_errno(errno, "fstat " + l_.paths[f]);
  const std::string what = describe_change(l_.pins[f], st);
  if (what.empty()) return Status::ok();
  return Status(EIO, l_.paths[f] + " changed since the dataset was opened (" + what +
                         "): its records are not checked against another version; restart dlfsd to serve the new one");
}

// Flattens the files' records into sample order (logging unusable indexes
// and, with tfrecord_skip_bad_files, the files left out).
Result<Located> locate(const Manifest& tree, const FormatOptions& o) {
  std::vector<std::string> skipped;
  DLFS_ASSIGN_OR_RETURN(auto files, tf::locate_files(tree, true, o.tfrecord_skip_bad_files ? &skipped : nullptr));
  for (const auto& why : skipped) spdlog::error("{}: the file is left out of the samples (tfrecord_skip_bad_files)", why);
  Located l;
  for (auto& f : files) {
    if (!f.why_scanned.empty()) spdlog::warn("{}; scanned the file's records instead", f.why_scanned);
    l.indexed += f.indexed ? 1 : 0;
    l.file_ids.push_back(f.file);
    l.paths.push_back(std::move(f.path));
    l.pins.push_back(tree.file_identity(f.file));
    l.records.insert(l.records.end(), f.records.begin(), f.records.end());
    l.first.push_back(l.records.size());
  }
  return l;
}

class TfrecordFormat final : public DatasetFormat {
 public:
  std::string_view name() const override { return "tfrecord"; }
  std::string_view summary() const override {
    return "the records of every TFRecord file (<file>.idx: its DALI index), CRCs checked";
  }
  std::vector<std::string_view> options() const override { return {"tfrecord_skip_bad_files"}; }
  Result<std::unique_ptr<SampleTable>> samples(const Manifest& tree, const FormatOptions& o) const override {
    const auto start = std::chrono::steady_clock::now();
    auto located = locate(tree, o);
    if (!located) return located.status().with_context("dataset root '" + tree.root() + "' (format tfrecord)");
    spdlog::info("{}: {} records in {} TFRecord files ({} located by their .idx, {} by a scan) in {:.3f} s",
                 tree.root(), located->records.size(), located->file_ids.size(), located->indexed,
                 located->file_ids.size() - located->indexed,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return std::unique_ptr<SampleTable>(std::make_unique<TfrecordSamples>(std::move(located).value()));
  }
};

}  // namespace

const DatasetFormat& tfrecord_format() {
  static const TfrecordFormat format;
  return format;
}

}  // namespace dlfs::provenance
