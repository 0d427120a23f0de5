// The Writer model (lmdb_replay_writer.h): a transaction's puts and commit,
// pages, nodes, search, insert and split.
#include "provenance/lmdb_replay_writer.h"

#include <algorithm>
#include <functional>
#include <iterator>

namespace dlfs::provenance::lmdb::replay_model {

Status internal(const std::string& what) {
  return Status(EPROTO, "LMDB replay: internal inconsistency: " + what);
}

void Writer::begin() {
  // mdb_txn_renew0: the writer continues from the newest meta page.
  txnid_ = committed_txnid_ + 1;
  next_pgno_ = last_pg_ + 1;
  mop_.clear();
  mop_exists_ = false;
  pglast_ = 0;
  free_pgs_.clear();
  wrote_ = false;
}

Status Writer::put_main(uint64_t rank, uint16_t ksize, uint32_t dsize, bool append) {
  wrote_ = true;
  bool exact = false;
  Cursor mc;
  DLFS_RETURN_IF_ERROR(position(main_, rank, append, &mc, &exact));
  if (exact) return internal("key rank " + std::to_string(rank) + " put twice");
  return insert(mc, Item{rank, ksize, dsize, false, 0}, append);
}

Status Writer::commit() {
  if (!wrote_) return Status::ok();
  DLFS_RETURN_IF_ERROR(freelist_save());

  last_pg_ = next_pgno_ - 1;
  committed_txnid_ = txnid_;
  return Status::ok();
}

MetaKey Writer::meta() const {
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

Status Writer::locations(Locations* out) const {
  out->clear();
  out->reserve(main_.entries);
  if (main_.root >= 0) collect(main_.root, out);
  if (out->size() != main_.entries) return internal("walk found " + std::to_string(out->size()) + " values");
  return Status::ok();
}

uint32_t Writer::fill(const Page& p) const {
  uint64_t usable = psize_ - kPageHeader;
  return static_cast<uint32_t>(1000 * (usable - size_left(p)) / usable);
}

uint32_t Writer::leaf_size(uint16_t ksize, uint32_t dsize) const {
  uint64_t sz = uint64_t{kNodeHeader} + ksize + dsize;
  if (sz > nodemax_) sz = kNodeHeader + ksize + kPgnoSize;
  return even(static_cast<uint32_t>(sz) + kPtrSize);
}

void Writer::release(int64_t slot) {
  pages_[slot] = Page{};
  free_slots_.push_back(slot);
}

uint64_t Writer::alloc(uint32_t num) {
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

int64_t Writer::new_tree_page(Db& db, bool leaf) {
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

void Writer::touch(Cursor& mc, int level) {
  Page& p = page(mc.pg[level]);
  if (p.dirty_txn == txnid_) return;
  uint64_t np = alloc(1);
  free_pgs_.push_back(p.pgno);
  p.pgno = np;
  p.dirty_txn = txnid_;
}

void Writer::touch_path(Cursor& mc) {
  for (int l = 0; l < mc.snum; ++l) touch(mc, l);
}

void Writer::ovpage_free(Db& db, uint64_t pgno, uint32_t n, bool dirty) {
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

Status Writer::node_add(Db& db, Page& p, int idx, Item it) {
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

uint32_t Writer::stored_size(const Page& p, const Node& n) const {
  uint32_t sz = kNodeHeader + n.ksize;
  if (p.leaf) sz += n.big ? kPgnoSize : n.dsize;
  return even(sz);
}

void Writer::node_del(Page& p, int idx) {
  const Node gone = p.nodes[idx];
  const uint32_t sz = stored_size(p, gone);
  p.nodes.erase(p.nodes.begin() + idx);
  for (Node& n : p.nodes) {
    if (n.ofs < gone.ofs) n.ofs = static_cast<uint16_t>(n.ofs + sz);
  }
  p.upper += sz;
}

Status Writer::update_key(Page& p, int idx, uint64_t key, uint16_t ksize) {
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

int Writer::branch_index(const Page& p, uint64_t key) {
  auto it = std::upper_bound(p.nodes.begin() + 1, p.nodes.end(), key,
                             [](uint64_t k, const Node& n) { return k < n.key; });
  return static_cast<int>(it - p.nodes.begin()) - 1;
}

Status Writer::position(Db& db, uint64_t key, bool append, Cursor* out, bool* exact) {
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

Status Writer::search_edge(Db& db, bool last, Cursor* out) {
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

const Node& Writer::lowest_below(int64_t slot) {
  const Page* p = &page(slot);
  while (!p->leaf) p = &page(static_cast<int64_t>(p->nodes[0].ref));
  return p->nodes[0];
}

Status Writer::insert(Cursor& mc, Item it, bool append) {
  Page& leaf = page(mc.pg[mc.top]);
  if (size_left(leaf) < leaf_size(it.ksize, it.dsize)) {
    DLFS_RETURN_IF_ERROR(split(mc, it, append));
  } else {
    DLFS_RETURN_IF_ERROR(node_add(*mc.db, leaf, mc.ki[mc.top], it));
  }
  mc.db->entries++;
  return Status::ok();
}

Result<int> Writer::split_parent_level(Db& db, Cursor& mc, int64_t mp_slot) {
  if (mc.top >= 1) return mc.top - 1;
  // The split page was the root: a new root above it, with it as only child.
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
  return 0;
}

Writer::SplitNodes Writer::split_nodes(int64_t mp_slot, int newindx, const Item& nitem) {
  const Page& mp = page(mp_slot);
  SplitNodes s;
  s.leaf = mp.leaf;
  s.nkeys = static_cast<int>(mp.nodes.size());
  s.newindx = newindx;
  s.items.reserve(s.nkeys + 1);
  for (int i = 0; i < s.nkeys; ++i) {
    if (i == newindx) s.items.push_back(nitem);
    s.items.push_back(item_of(mp.nodes[i]));
  }
  if (newindx >= s.nkeys) s.items.push_back(nitem);
  return s;
}

Result<int> Writer::split_point(const SplitNodes& s, const Item& nitem) const {
  const bool leaf = s.leaf;
  const int nkeys = s.nkeys, newindx = s.newindx;
  int split_indx = (nkeys + 1) / 2;
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
        const Item& n = s.items[i];
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
  return split_indx;
}

Status Writer::add_separator(Cursor& mn, int ptop, const Item& sep_item) {
  if (size_left(page(mn.pg[ptop])) < branch_size(sep_item.ksize)) {
    mn.snum--;
    mn.top--;
    return split(mn, sep_item, false);
  }
  return node_add(*mn.db, page(mn.pg[ptop]), mn.ki[ptop], sep_item);
}

Status Writer::rewrite_halves(Db& db, const SplitNodes& s, int64_t mp_slot, int64_t rp_slot, int split_indx) {
  // A branch page's first node keeps no key.
  Page& rp = page(rp_slot);
  for (int i = split_indx, j = 0; i <= s.nkeys; ++i, ++j) {
    Item it = s.items[i];
    if (!s.leaf && j == 0) it.ksize = 0;
    DLFS_RETURN_IF_ERROR(node_add(db, rp, j, it));
  }
  Page copy;
  copy.pgno = page(mp_slot).pgno;
  copy.leaf = s.leaf;
  copy.upper = psize_;
  for (int i = 0; i < split_indx; ++i) {
    Item it = s.items[i];
    if (!s.leaf && i == 0) it.ksize = 0;
    DLFS_RETURN_IF_ERROR(node_add(db, copy, i, it));
  }
  Page& mp = page(mp_slot);
  mp.nodes.swap(copy.nodes);
  mp.upper = copy.upper;
  return Status::ok();
}

Status Writer::split(Cursor& mc, const Item& nitem, bool append) {
  Db& db = *mc.db;
  const int64_t mp_slot = mc.pg[mc.top];
  const int newindx = mc.ki[mc.top];

  const int64_t rp_slot = new_tree_page(db, page(mp_slot).leaf);
  DLFS_ASSIGN_OR_RETURN(const int ptop, split_parent_level(db, mc, mp_slot));
  Cursor mn = mc;
  mn.pg[mn.top] = rp_slot;
  mn.ki[ptop] = mc.ki[ptop] + 1;

  const SplitNodes nodes = split_nodes(mp_slot, newindx, nitem);
  int split_indx = newindx;
  if (!append) {
    DLFS_ASSIGN_OR_RETURN(split_indx, split_point(nodes, nitem));
  }
  const Item& sep = append ? nitem : nodes.items[split_indx];

  // The separator goes into the parent, which may split in turn.
  DLFS_RETURN_IF_ERROR(add_separator(mn, ptop, Item{sep.key, sep.ksize, 0, false, static_cast<uint64_t>(rp_slot)}));

  if (append) return node_add(db, page(rp_slot), 0, nitem);
  // Rewrite: the right page from the split point, then the left page from 0.
  return rewrite_halves(db, nodes, mp_slot, rp_slot, split_indx);
}

void Writer::collect(int64_t slot, Locations* out) const {
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

}  // namespace dlfs::provenance::lmdb::replay_model
