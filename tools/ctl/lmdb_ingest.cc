#include "tools/ctl/lmdb_ingest.h"

#include <fcntl.h>
#include <lmdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "common/unique_fd.h"
#include "provenance/lmdb_replay.h"
#include "provenance/lmdb_sidecar.h"
#include "tools/ctl/caffe_datum.h"

namespace dlfs::ctl {

namespace lm = provenance::lmdb;
namespace stdfs = std::filesystem;

namespace {

constexpr size_t kMaxKeySize = 511;  // liblmdb's default MDB_MAXKEYSIZE

Status mdb_status(int rc, const std::string& what) {
  return Status(rc > 0 ? rc : EIO, what + ": " + mdb_strerror(rc));
}

struct EnvCloser {
  void operator()(MDB_env* e) const { mdb_env_close(e); }
};

// The open write transaction, aborted on any early return: liblmdb requires
// every transaction to be gone before mdb_env_close.
struct Txn {
  MDB_txn* txn = nullptr;
  ~Txn() {
    if (txn) mdb_txn_abort(txn);
  }
};

// liblmdb's default key order (mdb_cmp_memn): bytewise, a prefix first.
bool key_less(const std::string& a, const std::string& b) {
  const int c = std::memcmp(a.data(), b.data(), std::min(a.size(), b.size()));
  return c < 0 || (c == 0 && a.size() < b.size());
}

// Progress on stderr for runs long enough to need it: nothing in the first
// second, then a line at every 5% step or after 2 s without one.
class Progress {
 public:
  Progress(bool enabled, uint64_t total) : enabled_(enabled), total_(total) {}
  void update(uint64_t done, uint64_t bytes) {
    if (!enabled_) return;
    const uint64_t step = done * 20 / total_;
    const auto now = std::chrono::steady_clock::now();
    if (now - t0_ < std::chrono::seconds(1)) return;
    if (step == step_ && now - last_ < std::chrono::seconds(2) && done != total_) return;
    step_ = step;
    last_ = now;
    const double s = std::chrono::duration<double>(now - t0_).count();
    std::fprintf(stderr, "ingest: %llu/%llu records (%.0f%%), %.1f MB, %.0f records/s, %.1f MB/s\n",
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_),
                 100.0 * static_cast<double>(done) / static_cast<double>(total_), static_cast<double>(bytes) / 1e6,
                 static_cast<double>(done) / s, static_cast<double>(bytes) / 1e6 / s);
  }

  // A phase after the puts (the sync, the sidecar), for runs that print.
  void note(const char* what) {
    if (enabled_ && std::chrono::steady_clock::now() - t0_ >= std::chrono::seconds(1))
      std::fprintf(stderr, "ingest: %s\n", what);
  }

 private:
  bool enabled_;
  uint64_t total_;
  uint64_t step_ = 0;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now(), last_ = t0_;
};

// Class labels for `files` datasets: the index of a file's top-level
// directory among the root's sorted subdirectories (ImageNet's class folders);
// 0 for files at the root.
std::vector<int32_t> top_level_labels(const provenance::Manifest& m) {
  std::vector<int32_t> label(m.dir_count(), 0);
  auto top = m.dir_subdirs(provenance::kRootDir);
  for (size_t i = 0; i < top.size(); ++i) label[top[i]] = static_cast<int32_t>(i);
  for (uint32_t d = 1; d < m.dir_count(); ++d) {
    uint32_t t = d;
    while (m.dir_parent(t) != provenance::kRootDir) t = m.dir_parent(t);
    label[d] = label[t];
  }
  return label;
}

Status check_options(const IngestOptions& o) {
  if (o.format.format == "lmdb")
    return Status(EINVAL, "--format lmdb: the source must be a files or fixed dataset");
  if (o.label_bytes > 4) return Status(EINVAL, "--label-bytes " + std::to_string(o.label_bytes) + ": at most 4");
  if (o.shape[0] && !(o.shape[1] && o.shape[2])) return Status(EINVAL, "--shape: C, H and W must all be positive");
  if (o.values == ValueStyle::datum && o.format.format == "fixed") {
    if (o.label_bytes >= o.format.record_size)
      return Status(EINVAL, "--label-bytes " + std::to_string(o.label_bytes) + " leaves no data in " +
                                std::to_string(o.format.record_size) + "-byte records");
    const uint64_t data = o.format.record_size - o.label_bytes;
    const auto& s = o.shape;
    if (s[0] && uint64_t{s[0]} * s[1] * s[2] != data)
      return Status(EINVAL, "--shape " + std::to_string(s[0]) + "," + std::to_string(s[1]) + "," +
                                std::to_string(s[2]) + " is " + std::to_string(uint64_t{s[0]} * s[1] * s[2]) +
                                " bytes but a record holds " + std::to_string(data) + " after its label");
  }
  return Status::ok();
}

// An empty DEST, created: not inside SRC, and with --force an old database
// in it removed.
Status prepare_dest(const IngestOptions& o, const std::string& data_path) {
  std::error_code ec;
  // A DEST inside SRC would be scanned as samples by the next run (--force).
  std::error_code ec_dest, ec_src;
  const auto dest_c = stdfs::weakly_canonical(o.dest, ec_dest), src_c = stdfs::weakly_canonical(o.src, ec_src);
  const auto rel = dest_c.lexically_relative(src_c);
  if (!ec_dest && !ec_src && !rel.empty() && *rel.begin() != "..")
    return Status(EINVAL, "DEST " + o.dest + " is inside SRC " + o.src + " (its files would become samples)");
  if (stdfs::exists(data_path, ec)) {
    if (!o.force) return Status(EEXIST, data_path + " exists (use --force to replace the database)");
    // A data.mdb left in place would be opened and added to, not replaced.
    for (const char* f : {"data.mdb", "lock.mdb", "data.mdb.dlfs"}) {
      stdfs::remove(o.dest + "/" + f, ec);
      if (ec) return Status(ec.value(), "removing " + o.dest + "/" + f + " (--force): " + ec.message());
    }
  }
  stdfs::create_directories(o.dest, ec);
  if (ec) return Status(ec.value(), "creating " + o.dest + ": " + ec.message());
  return Status::ok();
}

using EnvPtr = std::unique_ptr<MDB_env, EnvCloser>;

// The new environment in DEST, sized for the dataset `m`.
Result<EnvPtr> open_new_env(const IngestOptions& o, const provenance::Manifest& m) {
  MDB_env* raw = nullptr;
  int rc = mdb_env_create(&raw);
  if (rc) return mdb_status(rc, "mdb_env_create");
  EnvPtr env(raw);
  // The map size is address space, not disk: LMDB grows the file as it
  // writes. 1 TiB, or twice the values plus 1 GiB for larger datasets
  // (page headers, leaves, copy-on-write pages).
  const uint64_t estimate = m.total_bytes() + m.sample_count() * (kMaxKeySize + 64);
  const uint64_t map_size = std::max<uint64_t>(uint64_t{1} << 40, 2 * estimate + (uint64_t{1} << 30));
  if ((rc = mdb_env_set_mapsize(env.get(), map_size))) return mdb_status(rc, "mdb_env_set_mapsize");
  // MDB_NOSYNC: one sync at the end instead of one per commit (Caffe's
  // writers are as lax); lock.mdb is created next to data.mdb, as they do.
  if ((rc = mdb_env_open(env.get(), o.dest.c_str(), MDB_NOSYNC, 0644)))
    return mdb_status(rc, "opening a new LMDB environment in " + o.dest);
  return env;
}

// What the build records before its first put; the puts add the sizes and
// the transactions.
lm::Provenance start_provenance(MDB_env* env, const IngestOptions& o, uint64_t n) {
  MDB_stat est{};
  mdb_env_stat(env, &est);
  lm::Provenance prov;
  prov.page_size = est.ms_psize;
  int maj = 0, min = 0, patch = 0;
  mdb_version(&maj, &min, &patch);
  prov.lmdb_version = lm::kVersionFull(static_cast<uint32_t>(maj), static_cast<uint32_t>(min), static_cast<uint32_t>(patch));
  prov.append = o.append;
  prov.records = n;
  prov.key_sizes.reserve(o.keys == KeyStyle::index ? 1 : n);
  prov.value_sizes.reserve(n);
  return prov;
}

// The put loop: every sample of `m` read, turned into a key and a value and
// put, with a commit every commit_every records and after the last. Records
// the sizes and transactions in `prov` and the totals in `sum`.
class Builder {
 public:
  Builder(const IngestOptions& o, const provenance::Manifest& m, MDB_env* env, lm::Provenance& prov,
          IngestSummary& sum)
      : o_(o),
        m_(m),
        env_(env),
        prov_(prov),
        sum_(sum),
        // Caffe's "%08d" widened for more than 10^8 records, so that keys stay in
        // index order (the provenance says "put in key order": checked below).
        width_(std::max<size_t>(8, std::to_string(m.sample_count()).size())) {
    if (o.values == ValueStyle::datum && o.format.format == "files") labels_ = top_level_labels(m);
  }

  Status put_all(Progress& progress) {
    const uint64_t n = m_.sample_count();
    for (uint64_t i = 0; i < n; ++i) {
      const provenance::SampleLocation s = m_.sample(i);
      DLFS_ASSIGN_OR_RETURN(std::span<const std::byte> bytes, read_sample(i, s));
      make_value(s, bytes);
      DLFS_RETURN_IF_ERROR(make_key(i, s));
      DLFS_RETURN_IF_ERROR(put(i, i + 1 == n));
      progress.update(i + 1, sum_.value_bytes);
    }
    return Status::ok();
  }

 private:
  // Sample i's bytes; the file stays open for the samples after it.
  Result<std::span<const std::byte>> read_sample(uint64_t i, const provenance::SampleLocation& s) {
    const std::string path = o_.src + "/" + m_.file_path(s.file);
    // LMDB node sizes are 32-bit; the Datum header needs a few bytes more.
    if (s.length > UINT32_MAX - 64)
      return Status(EFBIG, path + ": sample " + std::to_string(i) + " has " + std::to_string(s.length) +
                               " bytes; an LMDB value holds less than 4 GiB");
    if (s.file != open_file_) {
      fd_ = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd_.valid()) return Status::from_errno(errno, path);
      open_file_ = s.file;
    }
    buf_.resize(s.length);
    ssize_t got = ::pread(fd_.get(), buf_.data(), s.length, static_cast<off_t>(s.offset));
    if (got != static_cast<ssize_t>(s.length))
      return Status(got < 0 ? errno : EIO, path + ": short read of sample " + std::to_string(i) +
                                               " (did the file change?)");
    return std::span<const std::byte>(buf_);
  }

  // The sample's bytes as they are, or a Caffe Datum of them.
  void make_value(const provenance::SampleLocation& s, std::span<const std::byte> bytes) {
    if (o_.values != ValueStyle::datum) {
      value_.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      return;
    }
    DatumFields f;
    if (o_.format.format == "files") {
      f.label = labels_[m_.file_parent(s.file)];
      f.encoded = true;
    } else {
      uint32_t label = 0;
      for (uint32_t b = 0; b < o_.label_bytes; ++b) label |= std::to_integer<uint32_t>(bytes[b]) << (8 * b);
      f.label = static_cast<int32_t>(label);
      bytes = bytes.subspan(o_.label_bytes);
      f.channels = o_.shape[0] ? o_.shape[0] : 1;
      f.height = o_.shape[0] ? o_.shape[1] : 1;
      f.width = o_.shape[0] ? o_.shape[2] : static_cast<uint32_t>(bytes.size());
    }
    encode_datum(f, bytes, value_);
  }

  Status make_key(uint64_t i, const provenance::SampleLocation& s) {
    key_ = std::to_string(i);
    if (key_.size() < width_) key_.insert(0, width_ - key_.size(), '0');
    if (o_.keys == KeyStyle::index_name) key_ += "_" + m_.file_path(s.file);
    if (key_.size() > kMaxKeySize)
      return Status(ENAMETOOLONG, "key for " + m_.sample_name(i) + " is " + std::to_string(key_.size()) +
                                      " bytes; LMDB keys are at most 511 (use --keys index)");
    // The provenance records no key_rank: that is only true if every key
    // sorts after the previous one (and MDB_APPEND would refuse otherwise).
    if (i > 0 && !key_less(prev_key_, key_))
      return Status(EIO, "key '" + key_ + "' of record " + std::to_string(i) + " does not sort after the previous key '" +
                             prev_key_ + "'");
    prev_key_ = key_;
    return Status::ok();
  }

  // Puts record i, in a transaction begun when needed and committed after
  // commit_every records or the last one.
  Status put(uint64_t i, bool last) {
    int rc;
    if (!txn_.txn) {
      if ((rc = mdb_txn_begin(env_, nullptr, 0, &txn_.txn))) return mdb_status(rc, "mdb_txn_begin");
      if ((rc = mdb_dbi_open(txn_.txn, nullptr, 0, &dbi_))) return mdb_status(rc, "opening the main database");
    }
    MDB_val k{key_.size(), key_.data()}, v{value_.size(), value_.data()};
    if ((rc = mdb_put(txn_.txn, dbi_, &k, &v, o_.append ? MDB_APPEND : 0)))
      return mdb_status(rc, "putting record " + std::to_string(i) + " (" + m_.sample_name(i) + ")");
    if (o_.keys == KeyStyle::index_name || prov_.key_sizes.empty())
      prov_.key_sizes.push_back(static_cast<uint32_t>(key_.size()));
    prov_.value_sizes.push_back(static_cast<uint32_t>(value_.size()));
    sum_.value_bytes += value_.size();
    if (++in_txn_ == o_.commit_every || last) {
      rc = mdb_txn_commit(txn_.txn);
      txn_.txn = nullptr;  // freed by liblmdb whether or not the commit worked
      if (rc) return mdb_status(rc, "committing records up to " + std::to_string(i));
      prov_.txn_records.push_back(in_txn_);
      in_txn_ = 0;
      ++sum_.commits;
    }
    return Status::ok();
  }

  const IngestOptions& o_;
  const provenance::Manifest& m_;
  MDB_env* env_;
  lm::Provenance& prov_;
  IngestSummary& sum_;
  const size_t width_;            // of the zero-padded index in every key
  std::vector<int32_t> labels_;   // datum from files: the label of every directory
  UniqueFd fd_;
  uint32_t open_file_ = UINT32_MAX;
  std::vector<std::byte> buf_;
  std::string value_, key_, prev_key_;
  Txn txn_;
  MDB_dbi dbi_ = 0;
  uint64_t in_txn_ = 0;
};

// The sidecar for the new database: the build's provenance when it replays
// exactly and is smaller, else explicit offsets (make_sidecar decides).
Result<SidecarMade> write_sidecar(const std::string& dest, lm::Provenance prov, Progress& progress) {
  SidecarRequest req;
  req.dir = dest;
  req.known = lm::canonical(std::move(prov));
  req.force = true;
  progress.note("checking the provenance against a walk of the tree and writing the sidecar");
  auto made = make_sidecar(req);
  if (!made) return made.status().with_context("writing the sidecar");
  return *made;
}

}  // namespace

Result<IngestSummary> ingest(const IngestOptions& o) {
  DLFS_RETURN_IF_ERROR(check_options(o));
  const auto t0 = std::chrono::steady_clock::now();
  auto manifest = provenance::Manifest::build(o.src, o.format);
  if (!manifest) return manifest.status().with_context("source dataset");
  const provenance::Manifest& m = *manifest;
  const uint64_t n = m.sample_count();
  if (n == 0) return Status(EINVAL, "source dataset '" + o.src + "' has no samples");

  const std::string data_path = o.dest + "/data.mdb";
  DLFS_RETURN_IF_ERROR(prepare_dest(o, data_path));
  DLFS_ASSIGN_OR_RETURN(EnvPtr env, open_new_env(o, m));
  lm::Provenance prov = start_provenance(env.get(), o, n);

  IngestSummary sum;
  Builder builder(o, m, env.get(), prov, sum);
  Progress progress(o.progress, n);
  // Errors from here to the sync leave a partial database behind: say so.
  auto partial = [&](const Status& st) {
    return Status(st.err(), st.message() + " (" + data_path + " is incomplete; rerun with --force)");
  };
  if (Status st = builder.put_all(progress); !st) return partial(st);
  progress.note("syncing data.mdb");
  if (int rc = mdb_env_sync(env.get(), 1)) return partial(mdb_status(rc, "syncing " + data_path));
  env.reset();
  sum.records = n;

  DLFS_ASSIGN_OR_RETURN(sum.sidecar, write_sidecar(o.dest, std::move(prov), progress));
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace dlfs::ctl
