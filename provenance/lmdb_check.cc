#include "provenance/lmdb_check.h"

#include <unistd.h>

#include <cstring>
#include <random>
#include <vector>

namespace dlfs::provenance::lmdb {
namespace {

constexpr uint16_t kBranch = 0x01, kLeaf = 0x02, kOverflow = 0x04;
constexpr uint16_t kBigData = 0x01;  // node flag: the data is an overflow page number
constexpr unsigned kMaxDepth = 64;   // far deeper than any real tree: a loop guard

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

uint64_t overflow_pages(uint64_t length, uint32_t page_size) { return (kPageHeaderBytes - 1 + length) / page_size + 1; }

struct Page {
  uint64_t number = 0;
  std::vector<std::byte> bytes;
  uint16_t flags() const { return load<uint16_t>(bytes.data() + 10); }
  unsigned nodes() const {
    const uint16_t lower = load<uint16_t>(bytes.data() + 12);
    return lower < kPageHeaderBytes ? 0 : (lower - kPageHeaderBytes) / 2;
  }
};

// One node of a page, bounds-checked against the page.
struct Node {
  uint32_t lo_hi = 0;  // data size (leaf) or the low 32 bits of the child page (branch)
  uint16_t flags = 0;
  uint16_t key_size = 0;
  uint64_t offset = 0;  // of the node in its page
};

class Reader {
 public:
  Reader(int fd, const std::string& name, uint32_t page_size, uint64_t last_page, SpotCheckReport& r)
      : fd_(fd), name_(name), psize_(page_size), last_(last_page), r_(r) {}

  Result<Page> page(uint64_t number) {
    if (number < 2 || number > last_)
      return Status(EBADMSG, name_ + ": the tree points at page " + std::to_string(number) + ", outside pages 2.." +
                                 std::to_string(last_));
    Page p{number, std::vector<std::byte>(psize_)};
    const ssize_t n = ::pread(fd_, p.bytes.data(), psize_, static_cast<off_t>(number * psize_));
    if (n < 0) return Status::from_errno(errno, name_ + ": reading page " + std::to_string(number));
    if (static_cast<uint32_t>(n) != psize_) return Status(EBADMSG, name_ + ": page " + std::to_string(number) + " is truncated");
    ++r_.pages_read;
    if (load<uint64_t>(p.bytes.data()) != number)
      return Status(EBADMSG, name_ + ": page " + std::to_string(number) + " says it is page " +
                                 std::to_string(load<uint64_t>(p.bytes.data())));
    return p;
  }

  Result<Node> node(const Page& p, unsigned i) const {
    const uint64_t at = kPageHeaderBytes + 2ull * i;
    if (i >= p.nodes() || at + 2 > psize_) return Status(EBADMSG, where(p) + ": node index out of range");
    Node n;
    n.offset = load<uint16_t>(p.bytes.data() + at);
    if (n.offset < kPageHeaderBytes || n.offset + 8 > psize_) return Status(EBADMSG, where(p) + ": node offset out of the page");
    const std::byte* b = p.bytes.data() + n.offset;
    n.lo_hi = load<uint16_t>(b) | static_cast<uint32_t>(load<uint16_t>(b + 2)) << 16;
    n.flags = load<uint16_t>(b + 4);
    n.key_size = load<uint16_t>(b + 6);
    if (n.offset + 8 + n.key_size > psize_) return Status(EBADMSG, where(p) + ": a key runs past the page");
    return n;
  }

  std::string where(const Page& p) const { return name_ + ": page " + std::to_string(p.number); }
  uint32_t page_size() const { return psize_; }

 private:
  int fd_;
  const std::string& name_;
  uint32_t psize_;
  uint64_t last_;
  SpotCheckReport& r_;
};

// Compares one leaf with locations[first, first + nodes).
Status check_leaf(Reader& rd, int fd, const Page& leaf, const Locations& locs, uint64_t first, SpotCheckReport& r,
                  const std::string& name) {
  const uint32_t ps = rd.page_size();
  for (unsigned i = 0; i < leaf.nodes(); ++i) {
    auto n = rd.node(leaf, i);
    if (!n) return n.status();
    const uint64_t rec = first + i;
    if (rec >= locs.size())
      return Status(EBADMSG, rd.where(leaf) + " holds more records than the locations list (" +
                                 std::to_string(locs.size()) + ")");
    ValueLocation actual;
    actual.length = n->lo_hi;
    if (n->flags & kBigData) {
      const uint64_t at = n->offset + 8 + n->key_size;
      if (at + 8 > ps) return Status(EBADMSG, rd.where(leaf) + ": an overflow reference runs past the page");
      actual.offset = load<uint64_t>(leaf.bytes.data() + at) * ps + kPageHeaderBytes;
    } else {
      actual.offset = leaf.number * ps + n->offset + 8 + n->key_size;
      if (n->offset + 8 + n->key_size + actual.length > ps) return Status(EBADMSG, rd.where(leaf) + ": a value runs past the page");
    }
    ++r.records;
    if (actual != locs[rec])
      return Status(EBADMSG, name + ": record " + std::to_string(rec) + " is at offset " + std::to_string(actual.offset) +
                                 " (" + std::to_string(actual.length) + " bytes) per the leaf at page " +
                                 std::to_string(leaf.number) + ", but the locations say offset " +
                                 std::to_string(locs[rec].offset) + " (" + std::to_string(locs[rec].length) + " bytes)");
    if (n->flags & kBigData) {
      std::byte h[16];
      if (::pread(fd, h, sizeof h, static_cast<off_t>(actual.offset - kPageHeaderBytes)) != 16)
        return Status(EIO, name + ": cannot read the overflow page of record " + std::to_string(rec));
      DLFS_RETURN_IF_ERROR(check_overflow_header(h, actual, ps).with_context(name + ": record " + std::to_string(rec)));
      ++r.overflow_headers;
    }
  }
  ++r.leaves;
  return Status::ok();
}

// Checks record `rec` where the locations put it: its overflow page header,
// or the leaf page that holds it (found by the value's offset, then compared
// whole with the locations around `rec`).
Status check_record(Reader& rd, int fd, const Locations& locs, uint64_t rec, SpotCheckReport& r,
                    const std::string& name) {
  const uint32_t ps = rd.page_size();
  const ValueLocation& v = locs[rec];
  const std::string what = name + ": record " + std::to_string(rec);
  if (is_overflow_location(v, ps)) {
    std::byte h[16];
    if (::pread(fd, h, sizeof h, static_cast<off_t>(v.offset - kPageHeaderBytes)) != 16)
      return Status(EIO, what + ": cannot read its overflow page");
    DLFS_RETURN_IF_ERROR(check_overflow_header(h, v, ps).with_context(what));
    ++r.overflow_headers;
    return Status::ok();
  }
  auto p = rd.page(v.offset / ps);
  if (!p) return p.status().with_context(what);
  if (!(p->flags() & kLeaf))
    return Status(EBADMSG, what + ": the locations put it in page " + std::to_string(p->number) + ", not a leaf page");
  for (unsigned i = 0; i < p->nodes(); ++i) {
    auto n = rd.node(*p, i);
    if (!n) return n.status();
    if (n->flags & kBigData || p->number * ps + n->offset + 8 + n->key_size != v.offset) continue;
    if (i > rec) return Status(EBADMSG, what + ": it is node " + std::to_string(i) + " of leaf page " + std::to_string(p->number));
    return check_leaf(rd, fd, *p, locs, rec - i, r, name);
  }
  return Status(EBADMSG, what + ": no node of leaf page " + std::to_string(p->number) + " holds a value at offset " +
                             std::to_string(v.offset));
}

}  // namespace

Status check_overflow_header(std::span<const std::byte, 16> header, const ValueLocation& v, uint32_t page_size) {
  if (page_size == 0 || v.offset % page_size != kPageHeaderBytes)
    return Status(EBADMSG, "offset " + std::to_string(v.offset) + " is not the start of an overflow value");
  const uint64_t page = v.offset / page_size;
  const uint64_t own = load<uint64_t>(header.data());
  const uint16_t flags = load<uint16_t>(header.data() + 10);
  const uint32_t pages = load<uint32_t>(header.data() + 12);
  if (own != page) return Status(EBADMSG, "overflow page " + std::to_string(page) + " says it is page " + std::to_string(own));
  if (!(flags & kOverflow))
    return Status(EBADMSG, "page " + std::to_string(page) + " is not an overflow page (flags " + std::to_string(flags) + ")");
  if (pages != overflow_pages(v.length, page_size))
    return Status(EBADMSG, "overflow page " + std::to_string(page) + " spans " + std::to_string(pages) + " pages, a " +
                               std::to_string(v.length) + "-byte value needs " +
                               std::to_string(overflow_pages(v.length, page_size)));
  return Status::ok();
}

Status spot_check(int fd, const std::string& name, const MetaKey& key, const Locations& locs,
                  const SpotCheckOptions& options, SpotCheckReport* report) {
  SpotCheckReport local;
  SpotCheckReport& r = report ? *report : local;
  r = SpotCheckReport{};
  if (key.entries != locs.size())
    return Status(EBADMSG, name + ": the database has " + std::to_string(key.entries) + " records, the locations " +
                               std::to_string(locs.size()));
  if (locs.empty()) return Status::ok();
  if (key.page_size < 512) return Status(EBADMSG, name + ": implausible page size " + std::to_string(key.page_size));
  Reader rd(fd, name, key.page_size, key.last_pgno, r);
  std::mt19937_64 rng(options.seed);
  // Descents: 0 = leftmost, 1 = rightmost, the rest random. The first and last
  // leaves have known ranks; a random leaf is placed by its first node's offset.
  for (unsigned d = 0; d < options.random_leaves + 2; ++d) {
    auto p = rd.page(key.root);
    if (!p) return p.status();
    unsigned depth = 0;
    while (p->flags() & kBranch) {
      if (++depth > kMaxDepth) return Status(EBADMSG, name + ": the tree is deeper than " + std::to_string(kMaxDepth));
      const unsigned n = p->nodes();
      if (n == 0) return Status(EBADMSG, rd.where(*p) + ": an empty branch page");
      const unsigned pick = d == 0 ? 0 : d == 1 ? n - 1 : static_cast<unsigned>(rng() % n);
      auto node = rd.node(*p, pick);
      if (!node) return node.status();
      const uint64_t child = node->lo_hi | static_cast<uint64_t>(node->flags) << 32;
      p = rd.page(child);
      if (!p) return p.status();
    }
    if (!(p->flags() & kLeaf)) return Status(EBADMSG, rd.where(*p) + ": expected a leaf page, flags " + std::to_string(p->flags()));
    const unsigned n = p->nodes();
    if (n == 0) continue;
    uint64_t first = 0;
    if (d == 1) {
      if (n > locs.size()) return Status(EBADMSG, rd.where(*p) + " holds more records than the database");
      first = locs.size() - n;
    } else if (d > 1) {
      // Where the locations put this leaf's first record (a linear scan: a
      // few milliseconds for a million records, no index to build).
      auto node = rd.node(*p, 0);
      if (!node) return node.status();
      if (node->offset + 16 + node->key_size > key.page_size)
        return Status(EBADMSG, rd.where(*p) + ": the first node runs past the page");
      const uint64_t at = node->flags & kBigData
                              ? load<uint64_t>(p->bytes.data() + node->offset + 8 + node->key_size) * key.page_size +
                                    kPageHeaderBytes
                              : p->number * key.page_size + node->offset + 8 + node->key_size;
      first = locs.size();
      for (uint64_t i = 0; i < locs.size(); ++i)
        if (locs[i].offset == at) {
          first = i;
          break;
        }
      if (first == locs.size())
        return Status(EBADMSG, name + ": a record at offset " + std::to_string(at) + " (leaf page " +
                                   std::to_string(p->number) + ") is at no position of the locations");
    }
    DLFS_RETURN_IF_ERROR(check_leaf(rd, fd, *p, locs, first, r, name));
  }
  for (uint64_t rec : options.records)
    if (rec < locs.size()) DLFS_RETURN_IF_ERROR(check_record(rd, fd, locs, rec, r, name));
  return Status::ok();
}

}  // namespace dlfs::provenance::lmdb
