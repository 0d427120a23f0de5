#include "provenance/lmdb_meta.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace dlfs::provenance::lmdb {
namespace {

// On-disk layout of a meta page (liblmdb 0.9.x, 64-bit builds): a 16-byte page
// header (pgno, pad, flags, lower, upper), then MDB_meta: magic (4), version
// (4), fixed-map address (8), map size (8), the free DB's record (48), the
// main DB's record (48), last page number (8), txnid (8). A DB record is
// pad (4; the free DB's holds the page size), flags (2), depth (2), branch,
// leaf and overflow page counts (8 each), entries (8), root (8).
constexpr size_t kMetaMagic = kPageHeaderBytes + 0;
constexpr size_t kMetaVersion = kPageHeaderBytes + 4;
constexpr size_t kFreeDb = kPageHeaderBytes + 24;
constexpr size_t kMainDb = kPageHeaderBytes + 72;
constexpr size_t kLastPg = kPageHeaderBytes + 120;
constexpr size_t kTxnid = kPageHeaderBytes + 128;
constexpr size_t kMetaBytes = kTxnid + 8;  // bytes of a meta page we read
constexpr uint16_t kPageFlagMeta = 0x08;

template <typename T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

struct RawMeta {
  uint32_t page_size;
  MetaKey key;
};

// Reads exactly `want` bytes at `offset`; a short read is an error naming what.
Status read_exact(int fd, unsigned char* buf, size_t want, uint64_t offset, const std::string& path,
                  const char* what) {
  size_t got = 0;
  while (got < want) {
    ssize_t n = ::pread(fd, buf + got, want - got, static_cast<off_t>(offset + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::from_errno(errno, path + ": reading " + what);
    }
    if (n == 0) {
      return Status(EINVAL, path + ": truncated: file ends at byte " + std::to_string(offset + got) +
                                " inside " + what + " (an LMDB data file starts with two meta pages)");
    }
    got += static_cast<size_t>(n);
  }
  return Status::ok();
}

Result<RawMeta> parse_meta(const unsigned char* p, int which, const std::string& path) {
  const std::string where = path + ": meta page " + std::to_string(which);
  uint32_t magic = load<uint32_t>(p + kMetaMagic);
  if (magic != kMagic) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08X", magic);
    return Status(EINVAL, where + ": not an LMDB data file (magic " + hex + ", expected 0xBEEFC0DE)");
  }
  uint16_t flags = load<uint16_t>(p + 10);
  if (!(flags & kPageFlagMeta)) {
    return Status(EINVAL, where + ": not an LMDB data file (page flags " + std::to_string(flags) +
                              " lack the meta flag)");
  }
  uint32_t version = load<uint32_t>(p + kMetaVersion);
  if (version != kDataVersion) {
    return Status(ENOTSUP, where + ": unsupported LMDB data format version " + std::to_string(version) +
                               " (supported: " + std::to_string(kDataVersion) + ", liblmdb 0.9.x)");
  }
  RawMeta m{};
  m.page_size = load<uint32_t>(p + kFreeDb);
  MetaKey& k = m.key;
  k.page_size = m.page_size;
  k.version = version;
  k.txnid = load<uint64_t>(p + kTxnid);
  k.last_pgno = load<uint64_t>(p + kLastPg);
  const unsigned char* db = p + kMainDb;
  k.flags = load<uint16_t>(db + 4);
  k.depth = load<uint16_t>(db + 6);
  k.branch_pages = load<uint64_t>(db + 8);
  k.leaf_pages = load<uint64_t>(db + 16);
  k.overflow_pages = load<uint64_t>(db + 24);
  k.entries = load<uint64_t>(db + 32);
  k.root = load<uint64_t>(db + 40);
  return m;
}

}  // namespace

Result<MetaKey> read_meta_key(int fd, const std::string& path) {
  // Meta page 0 is at offset 0 whatever the page size; 4 KiB is the smallest
  // page liblmdb writes on the systems we care about and holds the meta fields.
  unsigned char buf[kMetaBytes];
  DLFS_RETURN_IF_ERROR(read_exact(fd, buf, sizeof buf, 0, path, "meta page 0"));
  auto m0 = parse_meta(buf, 0, path);
  if (!m0) return m0.status();
  uint32_t psize = m0->page_size;
  // liblmdb accepts power-of-two page sizes from 512 bytes to 32 KiB (64 KiB in
  // builds with a nonzero page base).
  if (psize < 512 || psize > 65536 || (psize & (psize - 1)) != 0) {
    return Status(EINVAL, path + ": meta page 0 has an implausible page size " + std::to_string(psize));
  }
  DLFS_RETURN_IF_ERROR(read_exact(fd, buf, sizeof buf, psize, path, "meta page 1"));
  auto m1 = parse_meta(buf, 1, path);
  if (!m1) return m1.status();
  if (m1->page_size != psize) {
    return Status(EINVAL, path + ": meta pages disagree on the page size (" + std::to_string(psize) + " and " +
                              std::to_string(m1->page_size) + ")");
  }
  // The writer alternates meta pages (txnid & 1); readers take the higher txnid.
  const MetaKey& newer = m0->key.txnid < m1->key.txnid ? m1->key : m0->key;
  if (newer.last_pgno < 1) {
    return Status(EINVAL, path + ": meta page names last page " + std::to_string(newer.last_pgno) +
                              " (an LMDB file has at least the two meta pages)");
  }
  return newer;
}

Result<MetaKey> read_meta_key(const std::string& data_mdb_path) {
  int fd = ::open(data_mdb_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::from_errno(errno, data_mdb_path);
  auto r = read_meta_key(fd, data_mdb_path);
  ::close(fd);
  return r;
}

std::string describe(const MetaKey& k) {
  return "txnid " + std::to_string(k.txnid) + ", last page " + std::to_string(k.last_pgno) + ", " +
         std::to_string(k.entries) + " entries, depth " + std::to_string(k.depth) + ", root " +
         (k.root == ~uint64_t{0} ? std::string("none") : std::to_string(k.root)) + ", page size " + std::to_string(k.page_size);
}

}  // namespace dlfs::provenance::lmdb
