// A model of liblmdb 0.9.24-0.9.31's write path, reduced to what decides page
// numbers and node positions. Written from reading mdb.c; names in comments
// (mdb_page_alloc, ...) point at the liblmdb function whose behaviour a piece
// reproduces.
//
// Pages live in a pool and refer to each other by pool slot, so the copy-on-
// write of a page (a new page number for the same content) is a renumbering
// that needs no parent fix-up. Keys are their key-order rank in the main
// database and the txnid in the free database: only their order and their
// byte sizes matter to the layout.
#include "provenance/lmdb_replay.h"

#include <algorithm>
#include <cstdio>
#include <array>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace dlfs::provenance::lmdb {
namespace {

constexpr uint32_t kPageHeader = 16;     // pgno, pad, flags, lower, upper
constexpr uint32_t kNodeHeader = 8;      // data size or child pgno, flags, key size
constexpr uint32_t kPtrSize = 2;         // one entry of a page's pointer array
constexpr uint32_t kPgnoSize = 8;        // an overflow page number stored as node data
constexpr uint32_t kMaxKeySize = 511;    // liblmdb's default MDB_MAXKEYSIZE
constexpr uint32_t kFillThreshold = 250; // per mille: leaves below it get rebalanced
constexpr int kCursorStack = 32;         // liblmdb's CURSOR_STACK
constexpr uint64_t kInvalidPgno = ~uint64_t{0};

inline uint32_t even(uint32_t n) { return (n + 1) & ~1u; }

struct Node {
  uint64_t key = 0;    // order key (rank or txnid); meaningless in a branch's slot 0
  uint64_t ref = 0;    // branch: child slot; leaf with big: first overflow page
  uint32_t dsize = 0;  // leaf: value bytes
  uint16_t ksize = 0;
  uint16_t ofs = 0;    // node offset inside its page (liblmdb's mp_ptrs[i])
  bool big = false;    // value in overflow pages (F_BIGDATA)
};

struct Page {
  uint64_t pgno = 0;
  uint64_t dirty_txn = 0;  // the txn that wrote this version: dirty iff current
  uint32_t upper = 0;      // mp_upper: nodes occupy [upper, page size)
  bool leaf = false;
  std::vector<Node> nodes;  // key order
};

struct Db {
  int64_t root = -1;  // slot, -1: empty tree
  uint16_t depth = 0;
  uint64_t branch_pages = 0, leaf_pages = 0, overflow_pages = 0, entries = 0;
  bool is_free = false;
};

// A root-to-leaf path: page slot and index per level (liblmdb's MDB_cursor).
struct Cursor {
  Db* db = nullptr;
  int snum = 0;
  int top = 0;
  std::array<int64_t, kCursorStack + 1> pg{};
  std::array<int, kCursorStack + 1> ki{};
};

// A free-database record: the page numbers it lists, plus what the overwrite
// rules need to know about its overflow pages.
struct FreeRec {
  std::vector<uint64_t> ids;  // descending, as liblmdb sorts IDLs
  uint32_t dsize = 0;         // the node's data size (may exceed the IDL)
  uint64_t ov_txn = 0;        // txn that allocated its overflow pages
  uint32_t ov_pages = 0;
};

// What a node about to be added looks like.
struct Item {
  uint64_t key = 0;
  uint16_t ksize = 0;
  uint32_t dsize = 0;
  bool big = false;
  uint64_t ref = 0;
};

Item item_of(const Node& n) { return Item{n.key, n.ksize, n.dsize, n.big, n.ref}; }

Status internal(const std::string& what) {
  return Status(EPROTO, "LMDB replay: internal inconsistency: " + what);
}

class Writer {
 public:
  explicit Writer(uint32_t psize)
      : psize_(psize),
        nodemax_((((psize - kPageHeader) / 2) & ~1u) - kPtrSize),
        maxfree_1pg_((psize - kPageHeader) / 8 - 1),
        keythresh_(psize >> 7) {
    free_.is_free = true;
  }

  void begin() {
    // mdb_txn_renew0: the writer continues from the newest meta page.
    txnid_ = committed_txnid_ + 1;
    next_pgno_ = last_pg_ + 1;
    mop_.clear();
    mop_exists_ = false;
    pglast_ = 0;
    free_pgs_.clear();
    wrote_ = false;
  }

  // mdb_put(txn, main, key, value, append ? MDB_APPEND : 0) of a new key.
  Status put_main(uint64_t rank, uint16_t ksize, uint32_t dsize, bool append) {
    wrote_ = true;
    bool exact = false;
    Cursor mc;
    DLFS_RETURN_IF_ERROR(position(main_, rank, append, &mc, &exact));
    if (exact) return internal("key rank " + std::to_string(rank) + " put twice");
    return insert(mc, Item{rank, ksize, dsize, false, 0}, append);
  }

  // mdb_txn_commit: a transaction that wrote nothing commits nothing (no new
  // txnid, no meta page).
  Status commit() {
    if (!wrote_) return Status::ok();
    DLFS_RETURN_IF_ERROR(freelist_save());

    last_pg_ = next_pgno_ - 1;
    committed_txnid_ = txnid_;
    return Status::ok();
  }

  MetaKey meta() const {
    MetaKey m;
    m.page_size = psize_;
    m.version = 1;
    m.txnid = committed_txnid_;
    m.last_pgno = last_pg_;
    m.root = main_.root < 0 ? kInvalidPgno : pages_[main_.root].pgno;
    m.depth = main_.depth;
    m.flags = 0;
    m.branch_pages = main_.branch_pages;
    m.leaf_pages = main_.leaf_pages;
    m.overflow_pages = main_.overflow_pages;
    m.entries = main_.entries;
    return m;
  }

  // Every value's location in key order (an in-order walk of the main tree).
  Status locations(Locations* out) const {
    out->clear();
    out->reserve(main_.entries);
    if (main_.root >= 0) collect(main_.root, out);
    if (out->size() != main_.entries) return internal("walk found " + std::to_string(out->size()) + " values");
    return Status::ok();
  }

 private:
  // ---- pages -------------------------------------------------------------

  Page& page(int64_t slot) { return pages_[slot]; }
  uint32_t lower(const Page& p) const { return kPageHeader + kPtrSize * static_cast<uint32_t>(p.nodes.size()); }
  uint32_t size_left(const Page& p) const { return p.upper - lower(p); }
  uint32_t fill(const Page& p) const {  // PAGEFILL, per mille
    uint64_t usable = psize_ - kPageHeader;
    return static_cast<uint32_t>(1000 * (usable - size_left(p)) / usable);
  }
  uint32_t ovpages(uint32_t dsize) const { return (kPageHeader - 1 + dsize) / psize_ + 1; }
  // mdb_leaf_size: the bytes a new leaf node takes, pointer included.
  uint32_t leaf_size(uint16_t ksize, uint32_t dsize) const {
    uint64_t sz = uint64_t{kNodeHeader} + ksize + dsize;
    if (sz > nodemax_) sz = kNodeHeader + ksize + kPgnoSize;
    return even(static_cast<uint32_t>(sz) + kPtrSize);
  }
  // mdb_branch_size (not rounded: liblmdb compares it unrounded).
  uint32_t branch_size(uint16_t ksize) const { return kNodeHeader + ksize + kPtrSize; }

  void release(int64_t slot) {
    pages_[slot] = Page{};
    free_slots_.push_back(slot);
  }

  // mdb_page_alloc: the smallest fitting run from the reclaimed list (me_pghead,
  // kept descending like liblmdb), filled lazily from free-DB records older than
  // the previous transaction; otherwise the end of the file.
  uint64_t alloc(uint32_t num) {
    const size_t n2 = num - 1;
    int64_t retry = int64_t{num} * 60;
    for (;;) {
      if (mop_.size() > n2) {
        // Scan from the smallest page number up for num consecutive pages.
        for (size_t i = mop_.size() - 1;; --i) {
          uint64_t pgno = mop_[i];
          if (mop_[i - n2] == pgno + n2) {
            mop_.erase(mop_.begin() + static_cast<std::ptrdiff_t>(i - n2),
                       mop_.begin() + static_cast<std::ptrdiff_t>(i + 1));
            return pgno;
          }
          if (i == n2) break;
        }
        if (--retry < 0) break;
      }
      // The next record after the ones already merged. Pages freed by txn T
      // may be reused once no snapshot can see them: with no readers, from
      // T + 2 on (mdb_find_oldest returns txnid - 1).
      auto it = free_recs_.upper_bound(pglast_);
      if (it == free_recs_.end() || it->first + 1 >= txnid_) break;
      std::vector<uint64_t> merged;
      merged.reserve(mop_.size() + it->second.ids.size());
      std::merge(mop_.begin(), mop_.end(), it->second.ids.begin(), it->second.ids.end(), std::back_inserter(merged),
                 std::greater<uint64_t>());
      mop_.swap(merged);
      mop_exists_ = true;
      pglast_ = it->first;
    }
    uint64_t pgno = next_pgno_;
    next_pgno_ += num;
    return pgno;
  }

  // mdb_page_new for a branch or leaf page.
  int64_t new_tree_page(Db& db, bool leaf) {
    uint64_t pgno = alloc(1);
    int64_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = static_cast<int64_t>(pages_.size());
      pages_.emplace_back();
    }
    Page& p = pages_[slot];
    p.pgno = pgno;
    p.dirty_txn = txnid_;
    p.upper = psize_;
    p.leaf = leaf;
    p.nodes.clear();
    (leaf ? db.leaf_pages : db.branch_pages)++;
    return slot;
  }

  // mdb_page_touch: the first write of a page in a transaction copies it to a
  // newly allocated page and frees the old number (reusable two txns later).
  void touch(Cursor& mc, int level) {
    Page& p = page(mc.pg[level]);
    if (p.dirty_txn == txnid_) return;
    uint64_t np = alloc(1);
    free_pgs_.push_back(p.pgno);
    p.pgno = np;
    p.dirty_txn = txnid_;
  }
  void touch_path(Cursor& mc) {
    for (int l = 0; l < mc.snum; ++l) touch(mc, l);
  }

  // mdb_ovpage_free: overflow pages of a free-DB record being replaced or
  // deleted. Pages written in this txn go straight back to the reclaimed list
  // (if it exists yet); older ones are freed by this txn.
  void ovpage_free(Db& db, uint64_t pgno, uint32_t n, bool dirty) {
    if (mop_exists_ && dirty) {
      for (uint32_t k = 0; k < n; ++k) {
        uint64_t pg = pgno + k;
        mop_.insert(std::lower_bound(mop_.begin(), mop_.end(), pg, std::greater<uint64_t>()), pg);
      }
    } else {
      for (uint32_t k = 0; k < n; ++k) free_pgs_.push_back(pgno + k);
    }
    db.overflow_pages -= n;
  }

  // ---- nodes -------------------------------------------------------------

  // mdb_node_add: nodes are packed downward from the page end in the order
  // they are added; a value too big for a node gets its overflow pages now.
  Status node_add(Db& db, Page& p, int idx, Item it) {
    const int64_t room = static_cast<int64_t>(size_left(p)) - kPtrSize;
    uint32_t node_size = kNodeHeader + it.ksize;
    if (p.leaf) {
      if (it.big) {
        node_size += kPgnoSize;
      } else if (uint64_t{node_size} + it.dsize > nodemax_) {
        node_size += kPgnoSize;
        if (even(node_size) > room) return internal("no room for a node in page " + std::to_string(p.pgno));
        uint32_t n = ovpages(it.dsize);
        it.ref = alloc(n);
        it.big = true;
        db.overflow_pages += n;
        if (db.is_free) {
          FreeRec& r = free_recs_[it.key];
          r.ov_txn = txnid_;
          r.ov_pages = n;
        }
      } else {
        node_size += it.dsize;
      }
    } else {
      it.big = false;
      it.dsize = 0;
    }
    node_size = even(node_size);
    if (node_size > room) return internal("no room for a node in page " + std::to_string(p.pgno));
    Node nd;
    nd.key = it.key;
    nd.ref = it.ref;
    nd.dsize = it.dsize;
    nd.ksize = it.ksize;
    nd.big = it.big;
    p.upper -= node_size;
    nd.ofs = static_cast<uint16_t>(p.upper);
    p.nodes.insert(p.nodes.begin() + idx, nd);
    return Status::ok();
  }

  uint32_t stored_size(const Page& p, const Node& n) const {
    uint32_t sz = kNodeHeader + n.ksize;
    if (p.leaf) sz += n.big ? kPgnoSize : n.dsize;
    return even(sz);
  }

  // mdb_node_del: the nodes below the deleted one move up to close the gap.
  void node_del(Page& p, int idx) {
    const Node gone = p.nodes[idx];
    const uint32_t sz = stored_size(p, gone);
    p.nodes.erase(p.nodes.begin() + idx);
    for (Node& n : p.nodes) {
      if (n.ofs < gone.ofs) n.ofs = static_cast<uint16_t>(n.ofs + sz);
    }
    p.upper += sz;
  }

  // mdb_update_key: a branch separator changes (free DB rebalancing only).
  Status update_key(Page& p, int idx, uint64_t key, uint16_t ksize) {
    Node& nd = p.nodes[idx];
    int delta = static_cast<int>(even(ksize)) - static_cast<int>(even(nd.ksize));
    if (delta != 0) {
      if (delta > 0 && static_cast<int>(size_left(p)) < delta) {
        return Status(ENOTSUP, "LMDB replay: a free-database separator update that splits a page is not modeled");
      }
      const uint16_t ptr = nd.ofs;
      for (Node& n : p.nodes) {
        if (n.ofs <= ptr) n.ofs = static_cast<uint16_t>(n.ofs - delta);
      }
      p.upper = static_cast<uint32_t>(static_cast<int>(p.upper) - delta);
    }
    nd.key = key;
    nd.ksize = ksize;
    return Status::ok();
  }

  // ---- search ------------------------------------------------------------

  // The child a branch page routes `key` to (mdb_node_search skips slot 0 of a
  // branch; an inexact match goes to the node before).
  static int branch_index(const Page& p, uint64_t key) {
    auto it = std::upper_bound(p.nodes.begin() + 1, p.nodes.end(), key,
                               [](uint64_t k, const Node& n) { return k < n.key; });
    return static_cast<int>(it - p.nodes.begin()) - 1;
  }

  // mdb_cursor_set (or mdb_cursor_last + 1 for MDB_APPEND), then the touch of
  // the whole path (mdb_cursor_touch); a new root leaf for an empty tree.
  Status position(Db& db, uint64_t key, bool append, Cursor* out, bool* exact) {
    Cursor& mc = *out;
    mc.db = &db;
    *exact = false;
    if (db.root < 0) {
      int64_t s = new_tree_page(db, true);
      db.root = s;
      db.depth++;
      mc.pg[0] = s;
      mc.ki[0] = 0;
      mc.snum = 1;
      mc.top = 0;
      return Status::ok();
    }
    int64_t s = db.root;
    int lvl = 0;
    for (;; ++lvl) {
      if (lvl >= kCursorStack) return internal("tree deeper than liblmdb's cursor stack");
      const Page& p = page(s);
      mc.pg[lvl] = s;
      if (p.leaf) {
        int idx;
        if (append) {
          idx = static_cast<int>(p.nodes.size());
        } else {
          auto it = std::lower_bound(p.nodes.begin(), p.nodes.end(), key,
                                     [](const Node& n, uint64_t k) { return n.key < k; });
          idx = static_cast<int>(it - p.nodes.begin());
          *exact = it != p.nodes.end() && it->key == key;
        }
        mc.ki[lvl] = idx;
        break;
      }
      int idx = append ? static_cast<int>(p.nodes.size()) - 1 : branch_index(p, key);
      mc.ki[lvl] = idx;
      s = static_cast<int64_t>(p.nodes[idx].ref);
    }
    mc.snum = lvl + 1;
    mc.top = lvl;
    touch_path(mc);
    return Status::ok();
  }

  // mdb_page_search with MDB_PS_FIRST/MDB_PS_LAST and MDB_PS_MODIFY.
  Status search_edge(Db& db, bool last, Cursor* out) {
    Cursor& mc = *out;
    mc.db = &db;
    mc.snum = 0;
    if (db.root < 0) return Status::ok();
    int64_t s = db.root;
    for (int lvl = 0;; ++lvl) {
      if (lvl >= kCursorStack) return internal("tree deeper than liblmdb's cursor stack");
      mc.pg[lvl] = s;
      mc.snum = lvl + 1;
      mc.top = lvl;
      touch(mc, lvl);
      const Page& p = page(s);
      if (p.leaf) {
        mc.ki[lvl] = 0;
        return Status::ok();
      }
      int idx = last ? static_cast<int>(p.nodes.size()) - 1 : 0;
      mc.ki[lvl] = idx;
      s = static_cast<int64_t>(p.nodes[idx].ref);
    }
  }

  // The smallest key below a branch node (mdb_page_search_lowest).
  const Node& lowest_below(int64_t slot) {
    const Page* p = &page(slot);
    while (!p->leaf) p = &page(static_cast<int64_t>(p->nodes[0].ref));
    return p->nodes[0];
  }

  // ---- insert and split --------------------------------------------------

  // The tail of mdb_cursor_put: add the node where the cursor points, splitting
  // the leaf when it has no room.
  Status insert(Cursor& mc, Item it, bool append) {
    Page& leaf = page(mc.pg[mc.top]);
    if (size_left(leaf) < leaf_size(it.ksize, it.dsize)) {
      DLFS_RETURN_IF_ERROR(split(mc, it, append));
    } else {
      DLFS_RETURN_IF_ERROR(node_add(*mc.db, leaf, mc.ki[mc.top], it));
    }
    mc.db->entries++;
    return Status::ok();
  }

  // mdb_page_split. Allocation order: the right sibling, a new root if the
  // split page was the root, the parents' splits, then the new value's
  // overflow pages. With MDB_APPEND the left page keeps everything and the new
  // node starts the right page; otherwise both halves are rewritten in key
  // order (which repacks the left page) around a size-aware split point.
  Status split(Cursor& mc, const Item& nitem, bool append) {
    Db& db = *mc.db;
    const int64_t mp_slot = mc.pg[mc.top];
    const int newindx = mc.ki[mc.top];
    const bool leaf = page(mp_slot).leaf;
    const int nkeys = static_cast<int>(page(mp_slot).nodes.size());

    const int64_t rp_slot = new_tree_page(db, leaf);
    int ptop;
    if (mc.top < 1) {
      const int64_t pp = new_tree_page(db, false);
      if (mc.snum >= kCursorStack) return internal("tree deeper than liblmdb's cursor stack");
      for (int i = mc.snum; i > 0; --i) {
        mc.pg[i] = mc.pg[i - 1];
        mc.ki[i] = mc.ki[i - 1];
      }
      mc.pg[0] = pp;
      mc.ki[0] = 0;
      db.root = pp;
      db.depth++;
      DLFS_RETURN_IF_ERROR(node_add(db, page(pp), 0, Item{0, 0, 0, false, static_cast<uint64_t>(mp_slot)}));
      mc.snum++;
      mc.top++;
      ptop = 0;
    } else {
      ptop = mc.top - 1;
    }
    Cursor mn = mc;
    mn.pg[mn.top] = rp_slot;
    mn.ki[ptop] = mc.ki[ptop] + 1;

    // The nodes in key order with the new one in place (liblmdb's `copy`
    // pointer array with a hole at newindx).
    std::vector<Item> items;
    items.reserve(nkeys + 1);
    {
      const Page& mp = page(mp_slot);
      for (int i = 0; i < nkeys; ++i) {
        if (i == newindx) items.push_back(nitem);
        items.push_back(item_of(mp.nodes[i]));
      }
      if (newindx >= nkeys) items.push_back(nitem);
    }

    int split_indx;
    Item sep;
    if (append) {
      split_indx = newindx;
      sep = nitem;
    } else {
      split_indx = (nkeys + 1) / 2;
      const int pmax = static_cast<int>(psize_ - kPageHeader);
      const int nsize = static_cast<int>(even(leaf ? leaf_size(nitem.ksize, nitem.dsize) : branch_size(nitem.ksize)));
      // When nodes are large (or the new node goes last) the midpoint may not
      // leave room: walk node sizes from one end to find where a page fills.
      if (nkeys < static_cast<int>(keythresh_) || nsize > pmax / 16 || newindx >= nkeys) {
        int psize = 0, i, j, k;
        if (newindx <= split_indx || newindx >= nkeys) {
          i = 0;
          j = 1;
          k = newindx >= nkeys ? nkeys : split_indx + 1 + (leaf ? 1 : 0);
        } else {
          i = nkeys;
          j = -1;
          k = split_indx - 1;
        }
        for (; i != k; i += j) {
          if (i == newindx) {
            psize += nsize;
          } else {
            const Item& n = items[i];
            psize += static_cast<int>(kNodeHeader + n.ksize + kPtrSize);
            if (leaf) psize += static_cast<int>(n.big ? kPgnoSize : n.dsize);
            psize = static_cast<int>(even(static_cast<uint32_t>(psize)));
          }
          if (psize > pmax || i == k - j) {
            split_indx = i + (j < 0 ? 1 : 0);
            break;
          }
        }
      }
      if (split_indx < 0 || split_indx > nkeys) return internal("split point out of range");
      sep = items[split_indx];
    }

    // The separator goes into the parent, which may split in turn.
    const Item sep_item{sep.key, sep.ksize, 0, false, static_cast<uint64_t>(rp_slot)};
    if (size_left(page(mn.pg[ptop])) < branch_size(sep.ksize)) {
      mn.snum--;
      mn.top--;
      DLFS_RETURN_IF_ERROR(split(mn, sep_item, false));
    } else {
      DLFS_RETURN_IF_ERROR(node_add(db, page(mn.pg[ptop]), mn.ki[ptop], sep_item));
    }

    if (append) return node_add(db, page(rp_slot), 0, nitem);

    // Rewrite: the right page from the split point, then the left page from 0.
    // A branch page's first node keeps no key.
    Page& rp = page(rp_slot);
    for (int i = split_indx, j = 0; i <= nkeys; ++i, ++j) {
      Item it = items[i];
      if (!leaf && j == 0) it.ksize = 0;
      DLFS_RETURN_IF_ERROR(node_add(db, rp, j, it));
    }
    Page copy;
    copy.pgno = page(mp_slot).pgno;
    copy.leaf = leaf;
    copy.upper = psize_;
    for (int i = 0; i < split_indx; ++i) {
      Item it = items[i];
      if (!leaf && i == 0) it.ksize = 0;
      DLFS_RETURN_IF_ERROR(node_add(db, copy, i, it));
    }
    Page& mp = page(mp_slot);
    mp.nodes.swap(copy.nodes);
    mp.upper = copy.upper;
    return Status::ok();
  }

  // ---- the free database -------------------------------------------------

  // mdb_cursor_put(MDB_RESERVE) into the free DB: a new record, or an existing
  // one resized (overflow pages kept if big enough and written in this txn).
  Status put_free(uint64_t key, uint32_t dsize) {
    bool exact = false;
    Cursor mc;
    DLFS_RETURN_IF_ERROR(position(free_, key, false, &mc, &exact));
    FreeRec& rec = free_recs_[key];
    if (exact) {
      Page& leaf = page(mc.pg[mc.top]);
      Node& nd = leaf.nodes[mc.ki[mc.top]];
      if (nd.big) {
        const bool dirty = rec.ov_txn == txnid_;
        if (rec.ov_pages >= ovpages(dsize) && dirty) {
          nd.dsize = dsize;
          rec.dsize = dsize;
          return Status::ok();
        }
        ovpage_free(free_, nd.ref, rec.ov_pages, dirty);
        rec.ov_pages = 0;
      } else if (nd.dsize == dsize) {
        return Status::ok();
      }
      node_del(leaf, mc.ki[mc.top]);
      free_.entries--;  // insert() counts it again
    }
    rec.dsize = dsize;
    return insert(mc, Item{key, 8, dsize, false, 0}, false);
  }

  // mdb_cursor_first + mdb_cursor_del on the free DB.
  Status del_first_free() {
    Cursor mc;
    mc.db = &free_;
    int64_t s = free_.root;
    if (s < 0) return internal("deleting from an empty free database");
    for (int lvl = 0;; ++lvl) {
      if (lvl >= kCursorStack) return internal("tree deeper than liblmdb's cursor stack");
      mc.pg[lvl] = s;
      mc.ki[lvl] = 0;
      mc.snum = lvl + 1;
      mc.top = lvl;
      const Page& p = page(s);
      if (p.leaf) break;
      s = static_cast<int64_t>(p.nodes[0].ref);
    }
    touch_path(mc);
    Page& leaf = page(mc.pg[mc.top]);
    const Node nd = leaf.nodes[0];
    auto it = free_recs_.find(nd.key);
    if (it == free_recs_.end()) return internal("free record without content");
    if (nd.big) ovpage_free(free_, nd.ref, it->second.ov_pages, it->second.ov_txn == txnid_);
    free_recs_.erase(it);
    node_del(leaf, 0);
    free_.entries--;
    return rebalance(mc);
  }

  // mdb_rebalance: a page under the fill threshold borrows a node from a
  // neighbour or merges with it; an empty root leaf empties the tree, a root
  // branch with one child is replaced by that child.
  Status rebalance(Cursor& mc) {
    Db& db = *mc.db;
    Page& mp = page(mc.pg[mc.top]);
    const uint32_t minkeys = mp.leaf ? 1 : 2;
    const uint32_t thresh = mp.leaf ? kFillThreshold : 1;
    if (fill(mp) >= thresh && mp.nodes.size() >= minkeys) return Status::ok();

    if (mc.snum < 2) {
      if (mp.nodes.empty()) {
        free_pgs_.push_back(mp.pgno);
        release(mc.pg[0]);
        db.root = -1;
        db.depth = 0;
        db.leaf_pages = 0;
        mc.snum = 0;
      } else if (!mp.leaf && mp.nodes.size() == 1) {
        free_pgs_.push_back(mp.pgno);
        const int64_t child = static_cast<int64_t>(mp.nodes[0].ref);
        release(mc.pg[0]);
        db.root = child;
        db.depth--;
        db.branch_pages--;
        for (int i = 0; i + 1 < mc.snum; ++i) {
          mc.pg[i] = mc.pg[i + 1];
          mc.ki[i] = mc.ki[i + 1];
        }
        mc.snum--;
        mc.top = mc.snum - 1;
      }
      return Status::ok();
    }

    const int ptop = mc.top - 1;
    const Page& parent = page(mc.pg[ptop]);
    if (parent.nodes.size() < 2) return internal("branch page with fewer than two children");
    Cursor mn = mc;
    bool fromleft;
    if (mc.ki[ptop] == 0) {
      mn.ki[ptop]++;
      mn.pg[mn.top] = static_cast<int64_t>(parent.nodes[mn.ki[ptop]].ref);
      mn.ki[mn.top] = 0;
      mc.ki[mc.top] = static_cast<int>(page(mc.pg[mc.top]).nodes.size());
      fromleft = false;
    } else {
      mn.ki[ptop]--;
      mn.pg[mn.top] = static_cast<int64_t>(parent.nodes[mn.ki[ptop]].ref);
      mn.ki[mn.top] = static_cast<int>(page(mn.pg[mn.top]).nodes.size()) - 1;
      mc.ki[mc.top] = 0;
      fromleft = true;
    }
    const Page& np = page(mn.pg[mn.top]);
    if (fill(np) >= thresh && np.nodes.size() > minkeys) return node_move(mn, mc, fromleft);
    if (!fromleft) return page_merge(mn, mc);
    mn.ki[mn.top] += mc.ki[mn.top] + 1;
    return page_merge(mc, mn);
  }

  // mdb_node_move: one node from csrc's page to cdst's, then the separators.
  Status node_move(Cursor& csrc, Cursor& cdst, bool /*fromleft*/) {
    touch(csrc, csrc.top);
    touch(cdst, cdst.top);
    Db& db = *csrc.db;
    Page& sp = page(csrc.pg[csrc.top]);
    Page& dp = page(cdst.pg[cdst.top]);
    const int sidx = csrc.ki[csrc.top];
    Item it = item_of(sp.nodes[sidx]);
    if (sidx == 0 && !sp.leaf) {
      const Node& low = lowest_below(static_cast<int64_t>(sp.nodes[0].ref));
      it.key = low.key;
      it.ksize = low.ksize;
    }
    if (!dp.leaf && cdst.ki[cdst.top] == 0) {
      const Node& low = lowest_below(static_cast<int64_t>(dp.nodes[0].ref));
      DLFS_RETURN_IF_ERROR(update_key(dp, 0, low.key, low.ksize));
    }
    DLFS_RETURN_IF_ERROR(node_add(db, dp, cdst.ki[cdst.top], it));
    node_del(sp, sidx);
    for (Cursor* c : {&csrc, &cdst}) {
      Page& p = page(c->pg[c->top]);
      if (c->ki[c->top] != 0) continue;
      if (c->ki[c->top - 1] != 0) {
        DLFS_RETURN_IF_ERROR(update_key(page(c->pg[c->top - 1]), c->ki[c->top - 1], p.nodes[0].key, p.nodes[0].ksize));
      }
      if (!p.leaf) DLFS_RETURN_IF_ERROR(update_key(p, 0, p.nodes[0].key, 0));
    }
    return Status::ok();
  }

  // mdb_page_merge: all of csrc's nodes onto cdst's page, csrc's page freed
  // (free-DB pages are never "loose": they go to this txn's freed list), then
  // the parent is rebalanced.
  Status page_merge(Cursor& csrc, Cursor& cdst) {
    touch(cdst, cdst.top);
    Db& db = *csrc.db;
    Page& ps = page(csrc.pg[csrc.top]);
    Page& pd = page(cdst.pg[cdst.top]);
    int j = static_cast<int>(pd.nodes.size());
    for (size_t i = 0; i < ps.nodes.size(); ++i, ++j) {
      Item it = item_of(ps.nodes[i]);
      if (i == 0 && !ps.leaf) {
        const Node& low = lowest_below(static_cast<int64_t>(ps.nodes[0].ref));
        it.key = low.key;
        it.ksize = low.ksize;
      }
      DLFS_RETURN_IF_ERROR(node_add(db, pd, j, it));
    }
    Page& parent = page(csrc.pg[csrc.top - 1]);
    node_del(parent, csrc.ki[csrc.top - 1]);
    if (csrc.ki[csrc.top - 1] == 0) DLFS_RETURN_IF_ERROR(update_key(parent, 0, parent.nodes[0].key, 0));
    free_pgs_.push_back(ps.pgno);
    (ps.leaf ? db.leaf_pages : db.branch_pages)--;
    release(csrc.pg[csrc.top]);
    cdst.snum--;
    cdst.top--;
    return rebalance(cdst);
  }

  // mdb_freelist_save: at commit, delete the free-DB records this txn consumed,
  // write one record listing the pages this txn freed, and reserve records
  // (keys counting down from the last consumed txnid) for the reclaimed pages
  // not used. Each step can allocate, consume or free pages, so it loops until
  // nothing changes, like liblmdb.
  Status freelist_save() {
    Cursor scratch;
    if (mop_exists_) DLFS_RETURN_IF_ERROR(search_edge(free_, false, &scratch));
    uint64_t pglast = 0, head_id = 0;
    size_t freecnt = 0;
    int64_t head_room = 0, total_room = 0;
    int more = 1;
    const int64_t maxfree = maxfree_1pg_;
    int64_t mop_len = 0;
    for (;;) {
      while (pglast < pglast_) {
        if (free_recs_.empty()) return internal("consumed free records missing");
        pglast = head_id = free_recs_.begin()->first;
        total_room = head_room = 0;
        DLFS_RETURN_IF_ERROR(del_first_free());
      }
      if (freecnt < free_pgs_.size()) {
        if (freecnt == 0) DLFS_RETURN_IF_ERROR(search_edge(free_, true, &scratch));
        do {
          freecnt = free_pgs_.size();
          DLFS_RETURN_IF_ERROR(put_free(txnid_, static_cast<uint32_t>((freecnt + 1) * 8)));
        } while (freecnt < free_pgs_.size());
        std::vector<uint64_t> ids = free_pgs_;
        std::sort(ids.begin(), ids.end(), std::greater<uint64_t>());
        free_recs_[txnid_].ids = std::move(ids);
        continue;
      }
      mop_len = static_cast<int64_t>(mop_.size());
      if (total_room >= mop_len) {
        if (total_room == mop_len || --more < 0) break;
      } else if (head_room >= maxfree && head_id > 1) {
        head_id--;
        head_room = 0;
      }
      total_room -= head_room;
      head_room = mop_len - total_room;
      if (head_room > maxfree && head_id > 1) {
        head_room /= static_cast<int64_t>(head_id);
        head_room += maxfree - head_room % (maxfree + 1);
      } else if (head_room < 0) {
        head_room = 0;
      }
      DLFS_RETURN_IF_ERROR(put_free(head_id, static_cast<uint32_t>((head_room + 1) * 8)));
      free_recs_[head_id].ids.clear();
      total_room += head_room;
    }

    // Fill the reserved records in key order with the smallest page numbers
    // first; a record with more room than pages left is shrunk.
    if (mop_len > 0) {
      int64_t end = mop_len;  // mop_[0, end) not yet stored
      uint64_t after = 0;
      bool first = true;
      for (;;) {
        auto it = first ? free_recs_.begin() : free_recs_.upper_bound(after);
        first = false;
        if (it == free_recs_.end()) break;
        const uint64_t key = it->first;
        after = key;
        int64_t len = static_cast<int64_t>(it->second.dsize / 8) - 1;
        uint32_t dsize = it->second.dsize;
        if (len > end) {
          len = end;
          dsize = static_cast<uint32_t>((len + 1) * 8);
        }
        if (len < 0) return internal("free record smaller than an IDL header");
        std::vector<uint64_t> ids(mop_.begin() + (end - len), mop_.begin() + end);
        DLFS_RETURN_IF_ERROR(put_free(key, dsize));
        free_recs_[key].ids = std::move(ids);
        end -= len;
        if (end == 0) break;
      }
    }
    return Status::ok();
  }

  void collect(int64_t slot, Locations* out) const {
    const Page& p = pages_[slot];
    if (!p.leaf) {
      for (const Node& n : p.nodes) collect(static_cast<int64_t>(n.ref), out);
      return;
    }
    for (const Node& n : p.nodes) {
      uint64_t off = n.big ? n.ref * psize_ + kPageHeader : p.pgno * psize_ + n.ofs + kNodeHeader + n.ksize;
      out->push_back({off, n.dsize});
    }
  }

  const uint32_t psize_;
  const uint32_t nodemax_;      // me_nodemax: largest node kept inside a page
  const uint32_t maxfree_1pg_;  // page numbers an IDL can hold in one page
  const uint32_t keythresh_;    // below this many keys the split point is size-checked

  std::deque<Page> pages_;
  std::vector<int64_t> free_slots_;
  Db main_, free_;

  uint64_t txnid_ = 0;
  uint64_t committed_txnid_ = 0;  // a new environment's meta pages say txnid 0
  uint64_t last_pg_ = 1;          // and last page 1 (the two meta pages)
  uint64_t next_pgno_ = 2;
  bool wrote_ = false;

  std::vector<uint64_t> mop_;  // me_pghead: reclaimed pages, descending
  bool mop_exists_ = false;    // liblmdb distinguishes "none read" from "empty"
  uint64_t pglast_ = 0;        // me_pglast: last free record merged into mop_
  std::vector<uint64_t> free_pgs_;          // mt_free_pgs: freed by this txn
  std::map<uint64_t, FreeRec> free_recs_;   // the free DB's records by txnid
};

std::string version_text(uint32_t v) {
  return std::to_string(v >> 24) + "." + std::to_string((v >> 16) & 0xff) + "." + std::to_string(v & 0xffff);
}

Status validate(const Provenance& p) {
  if (p.page_size != kModeledPageSize) {
    return Status(ENOTSUP, "LMDB replay: page size " + std::to_string(p.page_size) + " is not modeled (only " +
                               std::to_string(kModeledPageSize) + ")");
  }
  if (p.lmdb_version < kOldestModeled || p.lmdb_version > kNewestModeled) {
    return Status(ENOTSUP, "LMDB replay: liblmdb version " +
                               (p.lmdb_version ? version_text(p.lmdb_version) : std::string("(not recorded)")) +
                               " is not modeled (supported: " + version_text(kOldestModeled) + " to " +
                               version_text(kNewestModeled) + ")");
  }
  const uint64_t n = p.records;
  auto check_sizes = [n](const std::vector<uint32_t>& v, const char* what) -> Status {
    if (n == 0 && v.empty()) return Status::ok();
    if (v.size() != 1 && v.size() != n) {
      return Status(EINVAL, std::string("LMDB replay: ") + what + " has " + std::to_string(v.size()) +
                                " entries; expected 1 or " + std::to_string(n));
    }
    return Status::ok();
  };
  DLFS_RETURN_IF_ERROR(check_sizes(p.key_sizes, "key_sizes"));
  DLFS_RETURN_IF_ERROR(check_sizes(p.value_sizes, "value_sizes"));
  for (uint32_t k : p.key_sizes) {
    if (k == 0 || k > kMaxKeySize) {
      return Status(EINVAL, "LMDB replay: key size " + std::to_string(k) + " is outside liblmdb's 1.." +
                                std::to_string(kMaxKeySize));
    }
  }
  if (!p.key_rank.empty()) {
    if (p.key_rank.size() != n) {
      return Status(EINVAL, "LMDB replay: key_rank has " + std::to_string(p.key_rank.size()) + " entries; expected " +
                                std::to_string(n));
    }
    std::vector<bool> seen(n, false);
    for (uint64_t r : p.key_rank) {
      if (r >= n || seen[r]) {
        return Status(EINVAL, "LMDB replay: key_rank is not a permutation of 0.." + std::to_string(n - 1) +
                                  " (rank " + std::to_string(r) + ")");
      }
      seen[r] = true;
    }
    if (p.append) {
      for (uint64_t i = 0; i < n; ++i) {
        if (p.key_rank[i] != i) {
          return Status(EINVAL, "LMDB replay: MDB_APPEND requires insertion in key order, but record " +
                                    std::to_string(i) + " has key rank " + std::to_string(p.key_rank[i]));
        }
      }
    }
  }
  if (p.txn_records.empty()) return Status(EINVAL, "LMDB replay: txn_records is empty");
  if (p.txn_records.size() == 1) {
    if (p.txn_records[0] == 0) return Status(EINVAL, "LMDB replay: a commit every 0 records");
  } else {
    uint64_t sum = 0;
    for (uint64_t t : p.txn_records) sum += t;
    if (sum != n) {
      return Status(EINVAL, "LMDB replay: transactions hold " + std::to_string(sum) + " records in total; expected " +
                                std::to_string(n));
    }
  }
  return Status::ok();
}

}  // namespace

Result<ReplayResult> replay(const Provenance& p) {
  DLFS_RETURN_IF_ERROR(validate(p));
  Writer w(p.page_size);
  const uint64_t n = p.records;
  const bool one_ksize = p.key_sizes.size() == 1, one_vsize = p.value_sizes.size() == 1;
  const bool sorted = p.key_rank.empty();
  uint64_t i = 0;
  auto run_txn = [&](uint64_t count) -> Status {
    w.begin();
    for (uint64_t end = i + count; i < end; ++i) {
      uint64_t rank = sorted ? i : p.key_rank[i];
      uint16_t ks = static_cast<uint16_t>(one_ksize ? p.key_sizes[0] : p.key_sizes[i]);
      uint32_t vs = one_vsize ? p.value_sizes[0] : p.value_sizes[i];
      DLFS_RETURN_IF_ERROR(w.put_main(rank, ks, vs, p.append));
    }
    return w.commit();
  };
  if (p.txn_records.size() == 1) {
    const uint64_t every = p.txn_records[0];
    while (i < n) DLFS_RETURN_IF_ERROR(run_txn(std::min(every, n - i)));
  } else {
    for (uint64_t t : p.txn_records) DLFS_RETURN_IF_ERROR(run_txn(t));
  }
  ReplayResult r;
  DLFS_RETURN_IF_ERROR(w.locations(&r.locations));
  r.meta = w.meta();
  return r;
}

Result<Locations> replay_locations(const Provenance& p) {
  auto r = replay(p);
  if (!r) return r.status();
  return std::move(r->locations);
}

}  // namespace dlfs::provenance::lmdb
