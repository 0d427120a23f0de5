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
//
// Internal to provenance/: lmdb_replay.cc drives it; the member functions
// live in lmdb_replay_writer.cc (pages, nodes, search, insert and split) and
// lmdb_replay_freedb.cc (the free database and the free-list save).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "provenance/lmdb_types.h"

namespace dlfs::provenance::lmdb::replay_model {

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

inline Item item_of(const Node& n) { return Item{n.key, n.ksize, n.dsize, n.big, n.ref}; }

// An impossible state of the model (a bug here, not bad input).
Status internal(const std::string& what);

class Writer {
 public:
  explicit Writer(uint32_t psize)
      : psize_(psize),
        nodemax_((((psize - kPageHeader) / 2) & ~1u) - kPtrSize),
        maxfree_1pg_((psize - kPageHeader) / 8 - 1),
        keythresh_(psize >> 7) {
    free_.is_free = true;
  }

  void begin();

  // mdb_put(txn, main, key, value, append ? MDB_APPEND : 0) of a new key.
  Status put_main(uint64_t rank, uint16_t ksize, uint32_t dsize, bool append);

  // mdb_txn_commit: a transaction that wrote nothing commits nothing (no new
  // txnid, no meta page).
  Status commit();

  MetaKey meta() const;

  // Every value's location in key order (an in-order walk of the main tree).
  Status locations(Locations* out) const;

 private:
  // ---- pages -------------------------------------------------------------

  Page& page(int64_t slot) { return pages_[slot]; }
  uint32_t lower(const Page& p) const { return kPageHeader + kPtrSize * static_cast<uint32_t>(p.nodes.size()); }
  uint32_t size_left(const Page& p) const { return p.upper - lower(p); }
  uint32_t fill(const Page& p) const;  // PAGEFILL, per mille
  uint32_t ovpages(uint32_t dsize) const { return (kPageHeader - 1 + dsize) / psize_ + 1; }
  // mdb_leaf_size: the bytes a new leaf node takes, pointer included.
  uint32_t leaf_size(uint16_t ksize, uint32_t dsize) const;
  // mdb_branch_size (not rounded: liblmdb compares it unrounded).
  uint32_t branch_size(uint16_t ksize) const { return kNodeHeader + ksize + kPtrSize; }

  void release(int64_t slot);

  // mdb_page_alloc: the smallest fitting run from the reclaimed list (me_pghead,
  // kept descending like liblmdb), filled lazily from free-DB records older than
  // the previous transaction; otherwise the end of the file.
  uint64_t alloc(uint32_t num);

  // mdb_page_new for a branch or leaf page.
  int64_t new_tree_page(Db& db, bool leaf);

  // mdb_page_touch: the first write of a page in a transaction copies it to a
  // newly allocated page and frees the old number (reusable two txns later).
  void touch(Cursor& mc, int level);
  void touch_path(Cursor& mc);

  // mdb_ovpage_free: overflow pages of a free-DB record being replaced or
  // deleted. Pages written in this txn go straight back to the reclaimed list
  // (if it exists yet); older ones are freed by this txn.
  void ovpage_free(Db& db, uint64_t pgno, uint32_t n, bool dirty);

  // ---- nodes -------------------------------------------------------------

  // mdb_node_add: nodes are packed downward from the page end in the order
  // they are added; a value too big for a node gets its overflow pages now.
  Status node_add(Db& db, Page& p, int idx, Item it);

  uint32_t stored_size(const Page& p, const Node& n) const;

  // mdb_node_del: the nodes below the deleted one move up to close the gap.
  void node_del(Page& p, int idx);

  // mdb_update_key: a branch separator changes (free DB rebalancing only).
  Status update_key(Page& p, int idx, uint64_t key, uint16_t ksize);

  // ---- search ------------------------------------------------------------

  // The child a branch page routes `key` to (mdb_node_search skips slot 0 of a
  // branch; an inexact match goes to the node before).
  static int branch_index(const Page& p, uint64_t key);

  // mdb_cursor_set (or mdb_cursor_last + 1 for MDB_APPEND), then the touch of
  // the whole path (mdb_cursor_touch); a new root leaf for an empty tree.
  Status position(Db& db, uint64_t key, bool append, Cursor* out, bool* exact);

  // mdb_page_search with MDB_PS_FIRST/MDB_PS_LAST and MDB_PS_MODIFY.
  Status search_edge(Db& db, bool last, Cursor* out);

  // The smallest key below a branch node (mdb_page_search_lowest).
  const Node& lowest_below(int64_t slot);

  // ---- insert and split --------------------------------------------------

  // The tail of mdb_cursor_put: add the node where the cursor points, splitting
  // the leaf when it has no room.
  Status insert(Cursor& mc, Item it, bool append);

  // mdb_page_split. Allocation order: the right sibling, a new root if the
  // split page was the root, the parents' splits, then the new value's
  // overflow pages. With MDB_APPEND the left page keeps everything and the new
  // node starts the right page; otherwise both halves are rewritten in key
  // order (which repacks the left page) around a size-aware split point.
  Status split(Cursor& mc, const Item& nitem, bool append);

  // The pieces of split, in the order it runs them.

  // The level of the split page's parent in `mc`; a new root first (the cursor
  // shifted down one level) when the split page was the root.
  Result<int> split_parent_level(Db& db, Cursor& mc, int64_t mp_slot);

  // The split page's nodes in key order with the new one in place (liblmdb's
  // `copy` pointer array with a hole at newindx).
  struct SplitNodes {
    std::vector<Item> items;  // nkeys + 1 of them
    int nkeys = 0;            // on the page before the split
    int newindx = 0;          // where the new node goes
    bool leaf = false;
  };
  SplitNodes split_nodes(int64_t mp_slot, int newindx, const Item& nitem);

  // Where the right page starts without MDB_APPEND: the midpoint, or where a
  // page fills when nodes are large or the new node goes last.
  Result<int> split_point(const SplitNodes& s, const Item& nitem) const;

  // The separator into the parent at level `ptop` of `mn`, splitting the parent
  // in turn when it has no room.
  Status add_separator(Cursor& mn, int ptop, const Item& sep_item);

  // Without MDB_APPEND both halves are rewritten in key order: the right page
  // from the split point, then the left page (repacked) from 0.
  Status rewrite_halves(Db& db, const SplitNodes& s, int64_t mp_slot, int64_t rp_slot, int split_indx);

  // ---- the free database -------------------------------------------------

  // mdb_cursor_put(MDB_RESERVE) into the free DB: a new record, or an existing
  // one resized (overflow pages kept if big enough and written in this txn).
  Status put_free(uint64_t key, uint32_t dsize);

  // mdb_cursor_first + mdb_cursor_del on the free DB.
  Status del_first_free();

  // mdb_rebalance: a page under the fill threshold borrows a node from a
  // neighbour or merges with it; an empty root leaf empties the tree, a root
  // branch with one child is replaced by that child.
  Status rebalance(Cursor& mc);

  // mdb_node_move: one node from csrc's page to cdst's, then the separators.
  Status node_move(Cursor& csrc, Cursor& cdst, bool /*fromleft*/);

  // mdb_page_merge: all of csrc's nodes onto cdst's page, csrc's page freed
  // (free-DB pages are never "loose": they go to this txn's freed list), then
  // the parent is rebalanced.
  Status page_merge(Cursor& csrc, Cursor& cdst);

  // mdb_freelist_save: at commit, delete the free-DB records this txn consumed,
  // write one record listing the pages this txn freed, and reserve records
  // (keys counting down from the last consumed txnid) for the reclaimed pages
  // not used. Each step can allocate, consume or free pages, so it loops until
  // nothing changes, like liblmdb.
  Status freelist_save();

  void collect(int64_t slot, Locations* out) const;

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

}  // namespace dlfs::provenance::lmdb::replay_model
