#include "provenance/lmdb_walk.h"

#include <lmdb.h>
#include <sys/stat.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>

#include "provenance/lmdb_meta.h"

namespace dlfs::provenance::lmdb {
namespace {

// liblmdb node header flags (mn_flags): the value is in overflow pages, the
// node is a named database's record, the node holds duplicates.
constexpr uint16_t kNodeBigData = 0x01;
constexpr uint16_t kNodeSubData = 0x02;
constexpr uint16_t kNodeDupData = 0x04;
constexpr uint16_t kPageOverflow = 0x04;
constexpr size_t kNodeHeader = 8;

Status lmdb_error(int rc, const std::string& path, const std::string& what) {
  // liblmdb returns errno values or its own negative codes; keep an errno.
  int err = rc > 0 ? rc : EIO;
  return Status(err, path + ": " + what + ": " + mdb_strerror(rc));
}

struct EnvCloser {
  void operator()(MDB_env* e) const { mdb_env_close(e); }
};
struct TxnAborter {
  void operator()(MDB_txn* t) const { mdb_txn_abort(t); }
};
struct CursorCloser {
  void operator()(MDB_cursor* c) const { mdb_cursor_close(c); }
};

// liblmdb does not expose where it mapped the file (mdb_env_info's me_mapaddr
// is the MDB_FIXEDMAP address, NULL otherwise). The kernel does: the mapping
// in /proc/self/maps that contains a pointer into the map, minus its file
// offset, is the address of byte 0 of data.mdb.
Result<const unsigned char*> map_base(const void* inside, ino_t inode, const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  if (!maps) return Status(EIO, path + ": cannot read /proc/self/maps to find the map base");
  auto p = reinterpret_cast<uintptr_t>(inside);
  std::string line;
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0;
    unsigned long long off = 0, ino = 0;
    char perms[8] = {};
    char dev[32] = {};
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " %7s %llx %31s %llu", &lo, &hi, perms, &off, dev,
                    &ino) != 6) {
      continue;
    }
    if (p < lo || p >= hi) continue;
    if (ino != static_cast<unsigned long long>(inode)) {
      return Status(EIO, path + ": the value pointer is not inside a mapping of data.mdb");
    }
    return reinterpret_cast<const unsigned char*>(lo - off);
  }
  return Status(EIO, path + ": the value pointer is in no mapping of /proc/self/maps");
}

// A read transaction on the main database of an environment opened
// read-only, and a cursor on it. Members close in reverse order: the cursor,
// the transaction, then the environment, as liblmdb requires.
struct ReadCursor {
  std::unique_ptr<MDB_env, EnvCloser> env;
  std::unique_ptr<MDB_txn, TxnAborter> txn;
  std::unique_ptr<MDB_cursor, CursorCloser> cur;
  uint64_t entries = 0;  // the main database's record count (mdb_stat)
};

Status open_read_cursor(const std::string& path, bool is_dir, ReadCursor& opened) {
  MDB_env* raw_env = nullptr;
  int rc = mdb_env_create(&raw_env);
  if (rc) return lmdb_error(rc, path, "mdb_env_create");
  opened.env.reset(raw_env);
  // MDB_NOLOCK: no lock file is opened or created (a read-only mount has none,
  // and a reader table is only needed against a concurrent writer, which a
  // dataset being served must not have). MDB_NOSUBDIR when given the file.
  unsigned flags = MDB_RDONLY | MDB_NOLOCK | MDB_NORDAHEAD | (is_dir ? 0u : MDB_NOSUBDIR);
  rc = mdb_env_open(opened.env.get(), path.c_str(), flags, 0);
  if (rc) return lmdb_error(rc, path, "opening the LMDB environment read-only");

  MDB_txn* raw_txn = nullptr;
  rc = mdb_txn_begin(opened.env.get(), nullptr, MDB_RDONLY, &raw_txn);
  if (rc) return lmdb_error(rc, path, "beginning a read transaction");
  opened.txn.reset(raw_txn);
  MDB_dbi dbi = 0;
  rc = mdb_dbi_open(opened.txn.get(), nullptr, 0, &dbi);
  if (rc) return lmdb_error(rc, path, "opening the main database");
  MDB_stat ms{};
  rc = mdb_stat(opened.txn.get(), dbi, &ms);
  if (rc) return lmdb_error(rc, path, "mdb_stat");
  opened.entries = ms.ms_entries;

  MDB_cursor* raw_cur = nullptr;
  rc = mdb_cursor_open(opened.txn.get(), dbi, &raw_cur);
  if (rc) return lmdb_error(rc, path, "opening a cursor");
  opened.cur.reset(raw_cur);
  return Status::ok();
}

// Turns the cursor's records into locations in data.mdb, checking each one.
class Locator {
 public:
  Locator(const std::string& data_path, const struct stat& data_stat, uint64_t page_size)
      : data_path_(data_path),
        inode_(data_stat.st_ino),
        file_size_(static_cast<uint64_t>(data_stat.st_size)),
        psize_(page_size) {}

  // Record number `index`, key `k`, value `v`.
  Result<ValueLocation> locate(size_t index, const MDB_val& k, const MDB_val& v) {
    auto* vp = static_cast<const unsigned char*>(v.mv_data);
    if (base_ == nullptr) DLFS_RETURN_IF_ERROR(find_base(vp));
    // Every leaf node is [header 8][key][value]; its flags tell what the
    // record is. The key pointer is the node's key, so the header precedes it.
    uint16_t nflags;
    std::memcpy(&nflags, static_cast<const unsigned char*>(k.mv_data) - kNodeHeader + 4, sizeof nflags);
    if (nflags & kNodeSubData) {
      return Status(ENOTSUP, data_path_ + ": the main database holds named sub-databases (record " +
                                 std::to_string(index) + " is one); only a plain main database is supported");
    }
    if (nflags & kNodeDupData) {
      return Status(ENOTSUP, data_path_ + ": record " + std::to_string(index) + " holds duplicate values");
    }
    if (vp < base_) return Status(EIO, data_path_ + ": a value lies before the map base");
    uint64_t off = static_cast<uint64_t>(vp - base_);
    if (off + v.mv_size > file_size_) {
      return Status(EIO, data_path_ + ": record " + std::to_string(index) + " ends past the end of the file");
    }
    if ((nflags & kNodeBigData) && !checked_overflow_) DLFS_RETURN_IF_ERROR(check_overflow_page(index, vp, off));
    return ValueLocation{off, v.mv_size};
  }

 private:
  Status find_base(const unsigned char* vp) {
    auto b = map_base(vp, inode_, data_path_);
    if (!b) return b.status();
    base_ = *b;
    // The map starts with meta page 0: check we found byte 0 of the file.
    uint32_t magic;
    std::memcpy(&magic, base_ + kPageHeaderBytes, sizeof magic);
    if (magic != kMagic) return Status(EIO, data_path_ + ": the derived map base does not hold meta page 0");
    return Status::ok();
  }

  // An overflow value starts right after its first page's header, which
  // names that page: a consistency check of the derived map base, done once.
  // Not for every value: that would read every overflow page of the file (a
  // cold walk of 1.28e6 3 KiB values went from 0.3 s to 40 s); liblmdb itself
  // reads only branch and leaf pages here, and every read of a value checks
  // its header anyway (EpochView).
  Status check_overflow_page(size_t index, const unsigned char* vp, uint64_t off) {
    checked_overflow_ = true;
    uint64_t pg;
    uint16_t pflags;
    std::memcpy(&pg, vp - kPageHeaderBytes, sizeof pg);
    std::memcpy(&pflags, vp - kPageHeaderBytes + 10, sizeof pflags);
    if (!(pflags & kPageOverflow) || (off - kPageHeaderBytes) != pg * psize_) {
      return Status(EIO, data_path_ + ": record " + std::to_string(index) +
                             ": overflow page header does not match its position");
    }
    return Status::ok();
  }

  const std::string& data_path_;
  const ino_t inode_;
  const uint64_t file_size_;
  const uint64_t psize_;
  const unsigned char* base_ = nullptr;
  bool checked_overflow_ = false;
};

}  // namespace

Result<Locations> walk_locations(const std::string& path, std::vector<uint32_t>* key_sizes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::from_errno(errno, path);
  const bool is_dir = S_ISDIR(st.st_mode);
  const std::string data_path = is_dir ? path + "/data.mdb" : path;
  struct stat dst {};
  if (::stat(data_path.c_str(), &dst) != 0) return Status::from_errno(errno, data_path);

  // Validate the header ourselves first: liblmdb's messages ("Invalid argument")
  // do not say what is wrong with the file.
  auto meta = read_meta_key(data_path);
  if (!meta) return meta.status();
  if (meta->flags & MDB_DUPSORT) {
    return Status(ENOTSUP, data_path + ": the main database uses MDB_DUPSORT (duplicate keys); "
                                       "a dataset needs one value per key");
  }

  ReadCursor db;
  DLFS_RETURN_IF_ERROR(open_read_cursor(path, is_dir, db));
  Locations out;
  out.reserve(db.entries);
  if (key_sizes) {
    key_sizes->clear();
    key_sizes->reserve(db.entries);
  }
  Locator locator(data_path, dst, meta->page_size);
  MDB_val k, v;
  int rc;
  for (rc = mdb_cursor_get(db.cur.get(), &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(db.cur.get(), &k, &v, MDB_NEXT)) {
    DLFS_ASSIGN_OR_RETURN(ValueLocation loc, locator.locate(out.size(), k, v));
    out.push_back(loc);
    if (key_sizes) key_sizes->push_back(static_cast<uint32_t>(k.mv_size));
  }
  if (rc != MDB_NOTFOUND) return lmdb_error(rc, path, "walking the main database");
  if (out.size() != db.entries) {
    return Status(EIO, data_path + ": walked " + std::to_string(out.size()) + " records but the database counts " +
                           std::to_string(db.entries));
  }
  return out;
}

}  // namespace dlfs::provenance::lmdb
